package topology

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratamesh/strata/tenancy"
)

// FuzzParse checks that no input makes Parse panic, and that every problem
// it reports is well formed: a position (Line, Col ≥ 1; there are no
// exceptions), a path, a message, and one line of text. A valid result must
// satisfy the invariants the rest of Strata relies on.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"testdata/bad/*.yaml", "testdata/good/*.yaml", "../examples/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, warns, err := Parse("fuzz.yaml", data)
		var errs Problems
		if err != nil && !errors.As(err, &errs) {
			t.Fatalf("Parse returned %T, want Problems", err)
		}
		if (err == nil) == (m == nil) || (err != nil && len(errs) == 0) {
			t.Fatalf("mesh %v with error %v", m != nil, err)
		}
		for _, p := range errs {
			checkProblem(t, p, false)
		}
		for _, p := range warns {
			checkProblem(t, p, true)
		}
		if m != nil {
			checkValidMesh(t, m)
		}
	})
}

func checkProblem(t *testing.T, p Problem, warning bool) {
	t.Helper()
	if p.File != "fuzz.yaml" || p.Line < 1 || p.Col < 1 || p.Path == "" || p.Message == "" ||
		p.Warning != warning || strings.ContainsAny(p.String(), "\n\r") {
		t.Fatalf("malformed problem %#v", p)
	}
}

// checkValidMesh checks what a valid Mesh promises its users.
func checkValidMesh(t *testing.T, m *Mesh) {
	t.Helper()
	if !tenancy.ValidToken(m.Name) || len(m.Regions) == 0 {
		t.Fatalf("valid mesh with name %q and %d regions", m.Name, len(m.Regions))
	}
	for i := range m.Regions {
		r := &m.Regions[i]
		if !tenancy.ValidToken(r.Name) || !validLedger(r.Ledger) || r.Rollover == nil || r.Tier.Kind == "" {
			t.Fatalf("region %+v", r)
		}
		if len(r.NodesOf(RoleBroker)) < 1 || len(r.NodesOf(RoleBookie)) < r.Ledger.Ensemble {
			t.Fatalf("region %s: %d brokers, %d bookies for ensemble %d", r.Name,
				len(r.NodesOf(RoleBroker)), len(r.NodesOf(RoleBookie)), r.Ledger.Ensemble)
		}
		for _, n := range r.Nodes {
			if got, ok := r.Node(n.ID); !ok || got != n {
				t.Fatalf("region %s: Node(%q) = %+v, %v", r.Name, n.ID, got, ok)
			}
		}
	}
	regions := make([]string, len(m.Regions))
	for i := range m.Regions {
		regions[i] = m.Regions[i].Name
	}
	for _, tc := range m.TenancyConfig().Tenants {
		// The admin API's checks of quotas accept what the file's did.
		if err := (&tenancy.Tenant{Name: tc.Name, Quotas: tc.Quotas}).ValidateIn(regions); err != nil {
			t.Fatalf("tenant %s: the topology accepted quotas tenancy refuses: %v", tc.Name, err)
		}
	}
	for _, tn := range m.Tenants {
		for _, ns := range tn.Namespaces {
			if len(ns.Replication) == 0 || ns.Bundles < 1 || ns.AutoCreateTopics == nil || ns.Retention.Mode == "" {
				t.Fatalf("namespace %s/%s: %+v", tn.Name, ns.Name, ns)
			}
			for _, name := range ns.Replication {
				if _, ok := m.Region(name); !ok {
					t.Fatalf("namespace %s/%s replicates to unknown region %q", tn.Name, ns.Name, name)
				}
			}
		}
	}
}

// FuzzUnits checks that the unit parsers never panic, never return a
// negative value, and that whatever they accept prints back to the same
// value.
func FuzzUnits(f *testing.F) {
	for _, s := range []string{"0", "256MiB", "1.5GB", "90s", "1h30m", "7d", "1.5ms", "5000/s", "10MiB/s",
		"-1", "12XB", "9223372036854775807", "0.000001ms", "1 h 2 m", "8388607TiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseSize(s); err == nil {
			back, err := ParseSize(v.String())
			if v < 0 || err != nil || back != v {
				t.Fatalf("ParseSize(%q) = %d; String %q parses to %d, %v", s, v, v.String(), back, err)
			}
		}
		if v, err := ParseDuration(s); err == nil {
			back, err := ParseDuration(v.String())
			if v < 0 || err != nil || back != v {
				t.Fatalf("ParseDuration(%q) = %d; String %q parses to %d, %v", s, v, v.String(), back, err)
			}
		}
		if v, err := ParseMsgRate(s); err == nil {
			back, err := ParseMsgRate(v.String())
			if v < 0 || err != nil || back != v {
				t.Fatalf("ParseMsgRate(%q) = %d; String %q parses to %d, %v", s, v, v.String(), back, err)
			}
		}
		if v, err := ParseByteRate(s); err == nil {
			back, err := ParseByteRate(v.String())
			if v < 0 || err != nil || back != v {
				t.Fatalf("ParseByteRate(%q) = %d; String %q parses to %d, %v", s, v, v.String(), back, err)
			}
		}
	})
}
