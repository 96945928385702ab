package storage

import (
	"errors"
	"testing"

	"github.com/stratamesh/strata/internal/vfs"
)

// TestOpenRefusesADirectoryInUse: a second engine on a data directory,
// or on a journal directory, that an engine has open is refused with
// ErrInUse before it touches anything (two engines would each replay,
// recycle and cut the other's journal). Close or a crash frees it.
func TestOpenRefusesADirectoryInUse(t *testing.T) {
	for _, fsName := range []string{"mem", "os"} {
		t.Run(fsName, func(t *testing.T) {
			var fsys vfs.FS = vfs.NewMem()
			root := "/"
			if fsName == "os" {
				fsys, root = vfs.Default, t.TempDir()+"/"
			}
			cfg := testConfig(fsys)
			cfg.Dir, cfg.JournalDir = root+"data", root+"fast/journal"
			e := open(t, cfg)
			addMany(t, e, 1, 0, 10)

			if _, err := Open(cfg); !errors.Is(err, ErrInUse) || !errors.Is(err, vfs.ErrLocked) {
				t.Fatalf("second engine on the same directories: %v, want ErrInUse", err)
			}
			other := cfg
			other.Dir = root + "data2"
			if _, err := Open(other); !errors.Is(err, ErrInUse) {
				t.Fatalf("second engine on the same journal directory: %v, want ErrInUse", err)
			}
			// The first engine lost nothing to the refused ones.
			for i := range int64(10) {
				if _, err := e.Read(1, i); err != nil {
					t.Fatalf("entry %d after refused opens: %v", i, err)
				}
			}
			if err := CheckNotInUse(fsys, cfg.Dir); !errors.Is(err, ErrInUse) {
				t.Fatalf("CheckNotInUse of an open data dir: %v", err)
			}
			if _, err := RemoveJournal(fsys, cfg.JournalDir); !errors.Is(err, ErrInUse) {
				t.Fatalf("RemoveJournal of an open journal: %v", err)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if err := CheckNotInUse(fsys, cfg.Dir); err != nil {
				t.Fatalf("CheckNotInUse after Close: %v", err)
			}
			e2 := open(t, cfg)
			if _, err := e2.Read(1, 9); err != nil {
				t.Fatalf("reopened: %v", err)
			}
			if mem, ok := fsys.(*vfs.MemFS); ok {
				// A crash ends the holder: its locks go with it.
				mem.Crash()
				if err := CheckNotInUse(fsys, cfg.Dir); err != nil {
					t.Fatalf("CheckNotInUse after a crash: %v", err)
				}
			}
		})
	}
}
