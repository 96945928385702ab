package supervisor

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/stratamesh/strata/tenancy/creds"
	"github.com/stratamesh/strata/topology"
)

// TestPrepareNATSAuth: the seed files the topology names are made once
// (0600) and kept by later runs; system.creds is a user of the system
// account whose file parses with the NATS libraries.
func TestPrepareNATSAuth(t *testing.T) {
	m, _, err := topology.Parse("t.yaml", []byte("mesh: m\nregions:\n  - name: r\n    bookies: 4\nauth:\n  enabled: true\n  nats:\n    operator_seed_file: secure/op.nk\n    system_account_seed_file: secure/sys.nk\n"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := PrepareNATSAuth(m, dir, io.Discard); err != nil {
		t.Fatal(err)
	}
	op1, _ := os.ReadFile(filepath.Join(dir, "secure/op.nk"))
	if err := PrepareNATSAuth(m, dir, io.Discard); err != nil {
		t.Fatal(err)
	}
	op2, _ := os.ReadFile(filepath.Join(dir, "secure/op.nk"))
	if string(op1) != string(op2) || len(op1) == 0 {
		t.Fatal("a second run replaced the operator's seed")
	}
	sysSeed, _ := os.ReadFile(filepath.Join(dir, "secure/sys.nk"))
	sys, err := creds.ParseSeed(sysSeed, nkeys.PrefixByteAccount)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"secure/op.nk", "secure/sys.nk", SystemCredsFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, st.Mode(), err)
		}
	}
	text, _ := os.ReadFile(filepath.Join(dir, SystemCredsFile))
	token, err := jwt.ParseDecoratedJWT(text)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil || uc.Issuer != creds.PublicKey(sys) {
		t.Fatalf("system.creds: %+v %v", uc, err)
	}
	if _, err := jwt.ParseDecoratedNKey(text); err != nil {
		t.Fatal(err)
	}

	// A seed file of the wrong kind is refused, naming it.
	if err := os.WriteFile(filepath.Join(dir, "secure/sys.nk"), op1, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := PrepareNATSAuth(m, dir, io.Discard); err == nil {
		t.Fatal("an operator seed accepted as the system account's")
	}
	// GenerateNATSSeeds: two seeds in a directory.
	o, s, err := GenerateNATSSeeds(filepath.Join(dir, "gen"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readSeedFile(o, nkeys.PrefixByteOperator); err != nil {
		t.Fatal(err)
	}
	if _, err := readSeedFile(s, nkeys.PrefixByteAccount); err != nil {
		t.Fatal(err)
	}
}
