package supervisor

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/topology"
)

// SuperuserTokenFile is where `strata up` keeps the mesh superuser's
// admin token (mode 0600) when the topology turns auth on without giving
// the token's hash: in the data directory, made on the first run and
// kept for the next. `strata admin` reads it when no --token is given.
const SuperuserTokenFile = "superuser.token"

// superuserToken gives the nodes the superuser token's hash when auth is
// on and neither the topology nor the environment has one: from the
// data directory's token file, made now if there is none.
func (r *run) superuserToken() error {
	a := r.cfg.Mesh.Auth
	if a == nil || !a.Enabled || a.SuperuserTokenSHA256 != "" || os.Getenv(topology.EnvSuperuserTokenSHA256) != "" {
		return nil
	}
	path := filepath.Join(r.cfg.DataDir, SuperuserTokenFile)
	b, err := os.ReadFile(path)
	token := strings.TrimSpace(string(b))
	switch {
	case errors.Is(err, fs.ErrNotExist) || err == nil && token == "":
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return err
		}
		token = "sut_" + base64.RawURLEncoding.EncodeToString(raw)
		if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
			return fmt.Errorf("auth: writing the superuser token: %w", err)
		}
		fmt.Fprintf(r.out, "auth: made the superuser's admin token: %s (strata admin uses it; keep it secret)\n", path)
	case err != nil:
		return fmt.Errorf("auth: reading the superuser token: %w", err)
	default:
		fmt.Fprintf(r.out, "auth: the superuser's admin token is in %s\n", path)
	}
	r.superToken = token
	r.env = append(r.env, topology.EnvSuperuserTokenSHA256+"="+tenancy.HashSecret(token))
	return nil
}
