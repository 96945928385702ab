package topology

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/bad/*.golden from the current output")

// problemLines parses a file and returns every problem, errors and
// warnings, in file order, one per line.
func problemLines(t *testing.T, path string, data []byte) (lines string, invalid bool) {
	t.Helper()
	m, warns, err := Parse(path, data)
	var ps Problems
	if err != nil {
		if !errors.As(err, &ps) {
			t.Fatalf("Parse(%s) returned %T, want Problems", path, err)
		}
		if m != nil {
			t.Errorf("Parse(%s) returned a mesh with errors", path)
		}
	}
	var b strings.Builder
	for _, p := range sortProblems(append(append([]Problem(nil), ps...), warns...)) {
		b.WriteString(p.String() + "\n")
	}
	return b.String(), err != nil
}

// TestGoldenBad parses each testdata/bad/*.yaml and compares every problem
// with the sibling .golden file. Run with -update to rewrite them.
func TestGoldenBad(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil || len(files) < 18 {
		t.Fatalf("want at least 18 bad files, found %d (%v)", len(files), err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got, invalid := problemLines(t, filepath.ToSlash(path), data)
			if !invalid {
				t.Errorf("%s parsed without errors", path)
			}
			golden := strings.TrimSuffix(path, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("problems differ from %s\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}
