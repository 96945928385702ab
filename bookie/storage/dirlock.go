package storage

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/stratamesh/strata/internal/vfs"
)

// ErrInUse is returned by Open when another process (or another Engine
// in this one) has the data directory, or the journal directory, open.
// Two engines on one directory would each replay, recycle and cut the
// other's journal and rewrite its index: acknowledged entries would be
// lost. Stop the other process first.
var ErrInUse = errors.New("bookie: directory in use by another bookie")

// lockFileName is the lock file in the data directory and in the journal
// directory. It is never removed (RemoveJournal keeps it): a process that
// opened it just before a removal would lock a file nobody else sees.
const lockFileName = "LOCK"

// lockDirs locks cfg.Dir and the journal directory (vfs.Lock: flock(2)
// on the OS file system, held until the returned closers are closed or
// the process ends), each once when they are the same. Errors: ErrInUse
// (with vfs.ErrLocked), or the file system's.
func lockDirs(cfg Config) ([]io.Closer, error) {
	dirs := []string{cfg.Dir}
	if j := cfg.journalDir(); filepath.Clean(j) != filepath.Clean(cfg.Dir) {
		dirs = append(dirs, j)
	}
	var held []io.Closer
	for _, d := range dirs {
		l, err := lockDir(cfg.FS, d)
		if err != nil {
			unlockDirs(held)
			return nil, err
		}
		held = append(held, l)
	}
	return held, nil
}

// lockDir locks one directory's lock file. Errors: ErrInUse (with
// vfs.ErrLocked), or the file system's.
func lockDir(fsys vfs.FS, dir string) (io.Closer, error) {
	l, err := vfs.Lock(fsys, filepath.Join(dir, lockFileName))
	if err != nil {
		if errors.Is(err, vfs.ErrLocked) {
			return nil, fmt.Errorf("%w: %s: %w", ErrInUse, dir, err)
		}
		return nil, fmt.Errorf("bookie: lock %s: %w", dir, err)
	}
	return l, nil
}

func unlockDirs(held []io.Closer) {
	for _, l := range held {
		l.Close()
	}
}
