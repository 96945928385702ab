package supervisor

import (
	"context"
	"errors"
	"fmt"
	"github.com/stratamesh/strata/internal/tlsconf"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/tenancy/creds"
	"github.com/stratamesh/strata/topology"
)

// NATS auth for `strata up` (topology auth.nats, issue 24).
const (
	// SystemCredsFile is where `up` writes a user of the mesh's system
	// account (relative to the data directory, mode 0600): `strata pub`,
	// `sub` log in with it. It is the superuser's NATS credentials.
	SystemCredsFile = "creds/system.creds"
	// OperatorSeedFile and SystemSeedFile are the names GenerateNATSSeeds
	// gives the seed files in its directory.
	OperatorSeedFile = "operator.nk"
	SystemSeedFile   = "system.nk"
)

// GenerateNATSSeeds writes an operator seed and a system-account seed
// into dir (made, mode 0700) as operator.nk and system.nk, mode 0600,
// keeping either file that exists already. It returns their paths.
func GenerateNATSSeeds(dir string) (operator, system string, err error) {
	operator, system = filepath.Join(dir, OperatorSeedFile), filepath.Join(dir, SystemSeedFile)
	if _, err := ensureSeed(operator, nkeys.PrefixByteOperator); err != nil {
		return "", "", err
	}
	if _, err := ensureSeed(system, nkeys.PrefixByteAccount); err != nil {
		return "", "", err
	}
	return operator, system, nil
}

// ensureSeed reads the seed of kind in path, writing a new one first
// when there is no file. made reports whether it wrote one.
func ensureSeed(path string, kind nkeys.PrefixByte) (made bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if _, err := creds.ParseSeed(b, kind); err != nil {
			return false, fmt.Errorf("auth.nats: %s: %w", path, err)
		}
		return false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("auth.nats: %w", err)
	}
	seed, err := creds.NewSeed(kind)
	if err != nil {
		return false, err
	}
	if err := writeSecret(path, append(seed, '\n')); err != nil {
		return false, fmt.Errorf("auth.nats: writing %s: %w", path, err)
	}
	return true, nil
}

// writeSecret writes b to path, mode 0600, making its directory (0700);
// it never replaces an existing file.
func writeSecret(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// PrepareNATSAuth makes what the nodes of mesh m need when its topology
// has auth.nats: the two seed files it names (relative to dataDir) when
// they are missing, and <dataDir>/creds/system.creds, a user of the
// system account for the superuser's tools (made again each run, from the
// system account's seed). It does nothing when auth.nats is off.
func PrepareNATSAuth(m *topology.Mesh, dataDir string, out io.Writer) error {
	n := m.NATSAuth()
	if n == nil {
		return nil
	}
	opFile, sysFile := n.Files(dataDir)
	for _, f := range []struct {
		path string
		kind nkeys.PrefixByte
		what string
	}{{opFile, nkeys.PrefixByteOperator, "operator"}, {sysFile, nkeys.PrefixByteAccount, "system account"}} {
		made, err := ensureSeed(f.path, f.kind)
		if err != nil {
			return err
		}
		if made {
			fmt.Fprintf(out, "auth.nats: made the %s's seed: %s (keep it secret)\n", f.what, f.path)
		}
	}
	op, err := readSeedFile(opFile, nkeys.PrefixByteOperator)
	if err != nil {
		return err
	}
	acct, err := readSeedFile(sysFile, nkeys.PrefixByteAccount)
	if err != nil {
		return err
	}
	sys, err := creds.NewSystem(op, acct)
	if err != nil {
		return err
	}
	text, err := sys.MeshCreds("strata-superuser", 0, time.Now())
	if err != nil {
		return err
	}
	path := filepath.Join(dataDir, SystemCredsFile)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := writeSecret(path, text); err != nil {
		return fmt.Errorf("auth.nats: writing %s: %w", path, err)
	}
	return nil
}

func readSeedFile(path string, kind nkeys.PrefixByte) (nkeys.KeyPair, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth.nats: %w", err)
	}
	kp, err := creds.ParseSeed(b, kind)
	if err != nil {
		return nil, fmt.Errorf("auth.nats: %s: %w", path, err)
	}
	return kp, nil
}

// DemoUser is the name of the user DemoCreds makes in each tenant.
const DemoUser = "demo"

// DemoCreds makes, for each tenant of m's topology, a NATS user "demo"
// through the admin API of a running mesh (the brokers' admin URLs in
// mesh.json of dataDir, with the superuser's token), writes its
// credentials to <dataDir>/creds/<tenant>-demo.creds (mode 0600) and
// prints how to use them. A tenant whose file exists already is kept
// (its user was made by an earlier run); one whose user exists without
// the file has it revoked and made again. It does nothing when auth.nats
// is off.
func DemoCreds(ctx context.Context, m *topology.Mesh, dataDir, token string, out io.Writer) error {
	if m.NATSAuth() == nil || len(m.Tenants) == 0 {
		return nil
	}
	mf, err := meshfile.Read(dataDir)
	if err != nil {
		return err
	}
	var bases, nats []string
	for _, reg := range mf.Regions {
		for _, n := range reg.Nodes {
			if n.Role == topology.RoleBroker && n.Admin != "" {
				bases = append(bases, n.Admin)
			}
		}
		if len(nats) == 0 {
			nats = reg.NATS
		}
	}
	if len(bases) == 0 {
		return errors.New("auth.nats: mesh.json lists no broker admin URL to make the demo users with")
	}
	c := &admin.Client{Token: token}
	tlsFlag := ""
	if m.TLS != nil {
		tc, err := tlsconf.ClientFromFiles("tls.ca_file", m.TLS.CAFile, "", "", "")
		if err != nil {
			return err
		}
		c.HTTP = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
		tlsFlag = " --tlsca " + m.TLS.CAFile
	}
	fmt.Fprintln(out, "\nNATS clients log in (auth.nats). Demo users, one per tenant:")
	for _, t := range m.Tenants {
		path := filepath.Join(dataDir, "creds", t.Name+"-"+DemoUser+".creds")
		if _, err := os.Stat(path); err != nil {
			if err := makeDemoUser(ctx, c, bases[0], t.Name, path); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "  %s: nats --creds %s%s -s %s pub %s.<namespace>.<topic> hello\n", t.Name, path, tlsFlag, strings.Join(nats, ","), t.Name)
	}
	fmt.Fprintf(out, "  (the superuser's: %s; nats.go: nats.UserCredentials(FILE))\n", filepath.Join(dataDir, SystemCredsFile))
	return nil
}

func makeDemoUser(ctx context.Context, c *admin.Client, base, tenant, path string) error {
	req := admin.UserRequest{Name: DemoUser}
	u, err := c.AddUser(ctx, base, tenant, req)
	var ae *admin.APIError
	if errors.As(err, &ae) && ae.Code == admin.CodeAlreadyExists {
		// Made by an earlier run whose file is gone: make it again.
		if err := c.RevokeUser(ctx, base, tenant, DemoUser); err != nil {
			return fmt.Errorf("auth.nats: revoking %s's old demo user: %w", tenant, err)
		}
		u, err = c.AddUser(ctx, base, tenant, req)
	}
	if err != nil {
		return fmt.Errorf("auth.nats: making %s's demo user: %w", tenant, err)
	}
	if err := writeSecret(path, []byte(u.Creds)); err != nil {
		return fmt.Errorf("auth.nats: writing %s: %w", path, err)
	}
	return nil
}
