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

// lockFileName is the lock file in the data directory and, when it is
// configured apart (Config.JournalDir), in the journal directory.
const lockFileName = "LOCK"

// lockDirs locks cfg.Dir and, when configured, cfg.JournalDir (vfs.Lock:
// flock(2) on the OS file system, held until the returned closers are
// closed or the process ends). Errors: ErrInUse (with vfs.ErrLocked),
// or the file system's.
func lockDirs(cfg Config) ([]io.Closer, error) {
	dirs := []string{cfg.Dir}
	if cfg.JournalDir != "" {
		dirs = append(dirs, cfg.JournalDir)
	}
	var held []io.Closer
	for _, d := range dirs {
		l, err := vfs.Lock(cfg.FS, filepath.Join(d, lockFileName))
		if err != nil {
			unlockDirs(held)
			if errors.Is(err, vfs.ErrLocked) {
				return nil, fmt.Errorf("%w: %s: %w", ErrInUse, d, err)
			}
			return nil, fmt.Errorf("bookie: lock %s: %w", d, err)
		}
		held = append(held, l)
	}
	return held, nil
}

func unlockDirs(held []io.Closer) {
	for _, l := range held {
		l.Close()
	}
}
