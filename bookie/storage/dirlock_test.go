package storage

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
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
			fsys, root := lockTestFS(t, fsName)
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

// TestOpenWithTheJournalInTheDataDir: a journal directory that is the
// data directory itself is locked once, not refused as in use by itself.
func TestOpenWithTheJournalInTheDataDir(t *testing.T) {
	for _, fsName := range []string{"mem", "os"} {
		t.Run(fsName, func(t *testing.T) {
			fsys, root := lockTestFS(t, fsName)
			cfg := testConfig(fsys)
			cfg.Dir, cfg.JournalDir = root+"data", root+"data/"
			e := open(t, cfg)
			addMany(t, e, 1, 0, 10)
			if _, err := Open(cfg); !errors.Is(err, ErrInUse) {
				t.Fatalf("second engine: %v, want ErrInUse", err)
			}
		})
	}
}

// TestDefaultJournalDirIsLocked: CheckNotInUse and RemoveJournal see a
// live engine whose journal is in its default place (Dir/journal).
func TestDefaultJournalDirIsLocked(t *testing.T) {
	cfg := testConfig(vfs.Default)
	cfg.Dir = filepath.Join(t.TempDir(), "data")
	e := open(t, cfg)
	addMany(t, e, 1, 0, 10)
	jdir := filepath.Join(cfg.Dir, journalDir)
	if err := CheckNotInUse(vfs.Default, jdir); !errors.Is(err, ErrInUse) {
		t.Fatalf("CheckNotInUse(%s) under a live engine: %v, want ErrInUse", jdir, err)
	}
	if n, err := RemoveJournal(vfs.Default, jdir); !errors.Is(err, ErrInUse) || n != 0 {
		t.Fatalf("RemoveJournal(%s) under a live engine: %d removed, %v; want ErrInUse", jdir, n, err)
	}
}

// TestLockFileOutlivesRemoveJournal: a process that opened the journal
// directory's lock file just before RemoveJournal, and locks it just
// after, holds the one lock file every later Open meets (RemoveJournal
// never removes it; a removed one would leave two holders on two files).
func TestLockFileOutlivesRemoveJournal(t *testing.T) {
	root := t.TempDir()
	jdir := filepath.Join(root, "journal")
	if err := os.MkdirAll(jdir, 0o755); err != nil {
		t.Fatal(err)
	}
	lockPath := filepath.Join(jdir, lockFileName)
	if err := os.WriteFile(lockPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.OpenFile(lockPath, os.O_RDWR, 0o644) // the other process, between open and flock
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := RemoveJournal(vfs.Default, jdir); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(b.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("the other process's flock: %v", err)
	}
	cfg := testConfig(vfs.Default)
	cfg.Dir, cfg.JournalDir = filepath.Join(root, "data2"), jdir
	if e, err := Open(cfg); !errors.Is(err, ErrInUse) {
		if err == nil {
			e.Close()
		}
		t.Fatalf("an engine on a journal directory another process holds: %v, want ErrInUse", err)
	}
}

// lockTestFS is a file system for the lock tests, "mem" (MemFS, whose
// locks hold within it) or "os" (the machine's, flock), and the root to
// put directories under.
func lockTestFS(t *testing.T, name string) (vfs.FS, string) {
	if name == "os" {
		return vfs.Default, t.TempDir() + "/"
	}
	return vfs.NewMem(), "/"
}
