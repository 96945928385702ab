package region

import (
	"strings"
	"testing"
	"time"
)

// TestParseTestHooks: the hooks parse; every malformed entry is refused
// naming it.
func TestParseTestHooks(t *testing.T) {
	h, err := parseTestHooks(" decom-fail=8, decom-backoff=50ms")
	if err != nil || h.DecomFail != 8 || h.DecomBackoff != 50*time.Millisecond {
		t.Fatalf("%+v %v", h, err)
	}
	if h, err := parseTestHooks("1"); err != nil || !h.Admin || h.DecomFail != 0 {
		t.Fatalf("1: %+v %v", h, err)
	}
	if h, err := parseTestHooks("audit,decom-fail=2"); err != nil || !h.Admin || h.DecomFail != 2 {
		t.Fatalf("audit,decom-fail=2: %+v %v", h, err)
	}
	if h, err := parseTestHooks(""); err != nil || h != (testHooks{}) {
		t.Fatalf("empty: %+v %v", h, err)
	}
	for _, bad := range []struct{ in, names string }{
		{"decom-fail", "decom-fail"}, {"decom-fail=", "decom-fail"}, {"decom-fail=-1", "-1"}, {"decom-fail=x", "x"},
		{"decom-backoff=0s", "0s"}, {"decom-backoff=soon", "soon"}, {"nope=1", "nope"}, {"decom-fail=1,,", `""`}, {"2", `"2"`},
	} {
		if _, err := parseTestHooks(bad.in); err == nil || !strings.Contains(err.Error(), bad.names) || !strings.Contains(err.Error(), TestHooksEnv) {
			t.Errorf("%q: %v, want an error naming %s", bad.in, err, bad.names)
		}
	}
}

// FuzzParseTestHooks: any value parses or is refused; never a panic,
// and what parses has no negative count or duration.
func FuzzParseTestHooks(f *testing.F) {
	for _, s := range []string{"decom-fail=3", "decom-backoff=10ms,decom-fail=0", "x=1", "=", ","} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := parseTestHooks(s)
		if err == nil && (h.DecomFail < 0 || h.DecomBackoff < 0) {
			t.Fatalf("%q: %+v", s, h)
		}
	})
}
