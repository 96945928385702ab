package storage

import (
	"path/filepath"
	"testing"

	"github.com/stratamesh/strata/internal/vfs"
)

// TestHasData: an empty or missing directory, or one with only a lock
// file and empty subdirectories, holds no data; after an engine has run in
// it (journal, index, and entry logs once flushed) it does.
func TestHasData(t *testing.T) {
	mem := vfs.NewMem()
	has := func(want bool) {
		t.Helper()
		got, err := HasData(mem, testDir)
		if err != nil || got != want {
			t.Fatalf("HasData = %v, %v; want %v", got, err, want)
		}
	}
	has(false) // missing
	for _, d := range []string{testDir, filepath.Join(testDir, journalDir), filepath.Join(testDir, logsDir)} {
		if err := mem.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	has(false) // empty subdirectories
	e := open(t, testConfig(mem))
	addMany(t, e, 1, 0, 3)
	flush(t, e)
	e.Close()
	has(true)
	for _, sub := range []string{journalDir, indexDirName} {
		names, err := mem.List(filepath.Join(testDir, sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := mem.Remove(filepath.Join(testDir, sub, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	has(true) // the entry logs alone
}
