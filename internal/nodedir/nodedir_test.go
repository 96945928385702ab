package nodedir

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLockKeepsOthersOut: the node directory Lock makes, or finds, is the
// owner's only (it holds message data and secrets).
func TestLockKeepsOthersOut(t *testing.T) {
	for name, prepare := range map[string]func(string){
		"new":      func(string) {},
		"existing": func(d string) { os.MkdirAll(d, 0o755) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "k1")
			prepare(dir)
			l, err := Lock(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			st, err := os.Stat(dir)
			if err != nil || st.Mode().Perm() != 0o700 {
				t.Fatalf("node directory %v %v, want mode 0700", st.Mode(), err)
			}
		})
	}
}
