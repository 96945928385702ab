package topology

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestProblemFormat(t *testing.T) {
	e := Problem{File: "mesh.yaml", Line: 14, Col: 9, Path: "regions[1].ledger.write_quorum", Message: "4 is larger than ensemble 3"}
	w := Problem{File: "mesh.yaml", Line: 3, Col: 1, Path: "regions[0].bookies", Message: "no spare", Warning: true}
	if got := e.String(); got != "mesh.yaml:14:9: regions[1].ledger.write_quorum: 4 is larger than ensemble 3" {
		t.Errorf("error String() = %q", got)
	}
	if got := w.String(); got != "mesh.yaml:3:1: regions[0].bookies: warning: no spare" {
		t.Errorf("warning String() = %q", got)
	}
	if got := (Problems{e, w, e}).Error(); got != e.String()+"\n"+e.String() {
		t.Errorf("Problems.Error() = %q", got)
	}
}

func TestParseReportsEveryProblemAsProblems(t *testing.T) {
	data := []byte("mesh: a b\nregions:\n  - name: x\n    brokers: 0\n    bogus: 1\n")
	m, _, err := Parse("f.yaml", data)
	var ps Problems
	if m != nil || !errors.As(err, &ps) {
		t.Fatalf("Parse = %v, %T", m, err)
	}
	want := []string{
		`f.yaml:1:7: mesh: "a b" is not a valid name: use letters, digits, "-" and "_"`,
		"f.yaml:4:14: regions[0].brokers: must be at least 1, got 0",
		"f.yaml:5:5: regions[0].bogus: unknown field; known fields: name, brokers, bookies, nodes, ledger, rollover, ownership, replicator, failover, metadata, tier, wan_join",
	}
	if got := err.Error(); got != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	for _, p := range ps {
		if p.Warning || p.File != "f.yaml" {
			t.Errorf("problem %+v", p)
		}
	}
}

func TestParseWarningsWhenValid(t *testing.T) {
	data := []byte("mesh: m\nregions:\n  - name: r\n    bookies: 3\n")
	m, warns, err := Parse("w.yaml", data)
	if err != nil || m == nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(warns) != 1 || !warns[0].Warning || warns[0].Path != "regions[0].bookies" || warns[0].Line != 4 {
		t.Errorf("warnings %v", warns)
	}
}

func TestParseWarningsWhenInvalid(t *testing.T) {
	data := []byte("mesh: m\nregions:\n  - name: r\n    bookies: 3\n  - name: r\n")
	_, warns, err := Parse("w.yaml", data)
	if err == nil || len(warns) != 1 {
		t.Errorf("err %v, warnings %v", err, warns)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	_, _, err := LoadFile(filepath.Join(dir, "missing.yaml"))
	var ps Problems
	if !errors.Is(err, os.ErrNotExist) || errors.As(err, &ps) {
		t.Errorf("LoadFile(missing) = %v; want a wrapped not-exist error", err)
	}
	path := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(path, []byte("mesh: m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = LoadFile(path)
	if !errors.As(err, &ps) || len(ps) != 1 || ps[0].File != path || ps[0].Path != "regions" {
		t.Errorf("LoadFile(bad) = %v", err)
	}
}

// TestParseColonScalars covers goccy/go-yaml reading "host:port" inside a
// flow mapping as a mapping (see rejoinColonScalar).
func TestParseColonScalars(t *testing.T) {
	data := []byte(`mesh: m
regions:
  - {name: a, wan_join: [10.0.0.1:7948, "b:1"], metadata: {etcd: [https://e-1:2379, http://e-2:2379/x]}}
  - name: b
    metadata: {etcd: [https://e: 2379]}
`)
	_, _, err := Parse("c.yaml", data)
	want := `c.yaml:5:23: regions[1].metadata.etcd[0]: expected a string, got a mapping`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	m, _, err := Parse("c.yaml", data[:strings.Index(string(data), "  - name: b")])
	if err != nil {
		t.Fatal(err)
	}
	r := m.Regions[0]
	if strings.Join(r.WANJoin, ",") != "10.0.0.1:7948,b:1" ||
		strings.Join(r.Metadata.Etcd, ",") != "https://e-1:2379,http://e-2:2379/x" {
		t.Errorf("wan_join %q etcd %q", r.WANJoin, r.Metadata.Etcd)
	}
}

// TestParseAliasExpansionIsBounded: aliases can make a small file expand
// to a huge one; decoding stops at maxValues.
func TestParseAliasExpansionIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("mesh: m\ntenants:\n  - name: t\n    admins: &a [")
	for i := range 1000 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("x")
	}
	b.WriteString("]\n    namespaces: &ns\n      - {name: n, replication: *a}\n")
	b.WriteString("regions: &r\n  - {name: r, wan_join: *a}\n")
	for i := range 300 {
		b.WriteString("  - {name: r" + strconv.Itoa(i) + ", wan_join: *a}\n")
	}
	_, _, err := Parse("bomb.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "too many values (more than 250000, aliases expanded)") {
		t.Fatalf("err = %v", err)
	}
	if n := strings.Count(err.Error(), "\n"); n != 0 {
		t.Errorf("%d more problems after the expansion limit", n)
	}
}

// TestParseNATSAuth: auth.nats names two seed files (relative ones under
// the data directory) and needs auth.enabled.
func TestParseNATSAuth(t *testing.T) {
	good := "mesh: m\nregions:\n  - name: r\n    bookies: 4\nauth:\n  enabled: true\n  nats:\n    operator_seed_file: secure/operator.nk\n    system_account_seed_file: /etc/strata/system.nk\n"
	m, _, err := Parse("a.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	n := m.NATSAuth()
	if n == nil {
		t.Fatal("no NATS auth")
	}
	op, sys := n.Files("/data")
	if op != filepath.Join("/data", "secure/operator.nk") || sys != "/etc/strata/system.nk" {
		t.Errorf("files %s %s", op, sys)
	}
	for _, c := range []struct{ yaml, want string }{
		{"auth:\n  enabled: false\n  nats:\n    operator_seed_file: o.nk\n    system_account_seed_file: s.nk\n",
			"b.yaml:8:5: auth.nats: needs auth.enabled: true"},
		{"auth:\n  enabled: true\n  nats:\n    operator_seed_file: o.nk\n",
			"b.yaml:8:5: auth.nats.system_account_seed_file: required field missing"},
		{"auth:\n  enabled: true\n  nats:\n    operator_seed_file: o.nk\n    system_account_seed_file: o.nk\n",
			"b.yaml:9:31: auth.nats.system_account_seed_file: the system account's seed file must not be the operator's"},
		{"auth:\n  enabled: true\n  nats:\n    operator_seed: o.nk\n    system_account_seed_file: s.nk\n",
			"auth.nats.operator_seed: unknown field; known fields: operator_seed_file, system_account_seed_file"},
	} {
		_, _, err := Parse("b.yaml", []byte("mesh: m\nregions:\n  - name: r\n    bookies: 4\n"+c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.yaml, err, c.want)
		}
	}
	m, _, err = Parse("c.yaml", []byte("mesh: m\nregions:\n  - name: r\n    bookies: 4\nauth:\n  enabled: true\n"))
	if err != nil || m.NATSAuth() != nil {
		t.Errorf("auth without nats: %v %v", err, m.NATSAuth())
	}
}
