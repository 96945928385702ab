package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestValidateCLI checks that `strata validate` prints every problem as
// FILE:LINE:COL: PATH: MESSAGE and exits non-zero.
func TestValidateCLI(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	content := `mesh: e2e
regions:
  - name: east
    bookies: 2
    ledger: {ensemble: 3, write_quorum: 2, ack_quorum: 2}
    colour: blue
  - name: east
    ledger: {ensemble: 3, write_quorum: 4, ack_quorum: 2}
`
	if err := os.WriteFile(bad, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code := strata(t, "validate", "-f", bad)
	if code == 0 {
		t.Fatalf("validate of a broken file exited 0:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 4 {
		t.Fatalf("want at least 4 problems (write_quorum, bookies, unknown field, duplicate), got:\n%s", out)
	}
	shape := regexp.MustCompile(`^` + regexp.QuoteMeta(bad) + `:\d+:\d+: \S+: .+`)
	for _, l := range lines {
		if !shape.MatchString(l) {
			t.Errorf("line %q is not FILE:LINE:COL: PATH: MESSAGE", l)
		}
	}
	for _, want := range []string{"regions[0].bookies", "regions[0].colour", "regions[1].name", "regions[1].ledger.write_quorum"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not mention %s:\n%s", want, out)
		}
	}

	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte(twoRegions), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, code := strata(t, "validate", "-f", good); code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("validate of a good file: code %d\n%s", code, out)
	}
}

// TestStatusWithoutMesh checks the error a user gets when nothing runs.
func TestStatusWithoutMesh(t *testing.T) {
	_, errOut, code := strata(t, "status", "--data-dir", t.TempDir())
	if code == 0 || !strings.Contains(errOut, "strata up") {
		t.Fatalf("status without a mesh: code %d, stderr %q; want an error pointing at strata up", code, errOut)
	}
}
