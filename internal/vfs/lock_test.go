package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLock: one holder per lock file, on the OS file system (flock, which
// also holds between two opens in one process), MemFS and ErrorFS over
// either; closing frees it; the OS's refusal names the holder's pid.
func TestLock(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   FS
		dir  string
	}{
		{"os", Default, t.TempDir()},
		{"mem", NewMem(), "/d"},
		{"errorfs", NewErrorFS(NewMem(), nil), "/d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.fs.MkdirAll(tc.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			name := filepath.Join(tc.dir, "LOCK")
			l, err := Lock(tc.fs, name)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Lock(tc.fs, name)
			if !errors.Is(err, ErrLocked) {
				t.Fatalf("second lock: %v, want ErrLocked", err)
			}
			if tc.name == "os" && !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
				t.Fatalf("refusal does not name the holder: %v", err)
			}
			other, err := Lock(tc.fs, filepath.Join(tc.dir, "OTHER"))
			if err != nil {
				t.Fatalf("another name: %v", err)
			}
			other.Close()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2, err := Lock(tc.fs, name)
			if err != nil {
				t.Fatalf("lock after close: %v", err)
			}
			l2.Close()
		})
	}
	// An ErrorFS can fail the lock file's creation.
	boom := errors.New("boom")
	efs := NewErrorFS(NewMem(), InjectorFunc(func(op Op) error {
		if op.Kind == OpCreate {
			return boom
		}
		return nil
	}))
	if _, err := Lock(efs, "/LOCK"); !errors.Is(err, boom) {
		t.Fatalf("injected failure: %v", err)
	}
	// A MemFS crash frees its locks (the holder is gone).
	m := NewMem()
	if _, err := Lock(m, "/LOCK"); err != nil {
		t.Fatal(err)
	}
	m.Crash()
	if _, err := Lock(m, "/LOCK"); err != nil {
		t.Fatalf("lock after a crash: %v", err)
	}
}
