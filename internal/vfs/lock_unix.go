//go:build unix

package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Lock implements Locker with flock(2) (LOCK_EX|LOCK_NB) on name, which
// then holds the holder's process id (for the error another process
// gets). ErrLocked names that process when it can be read.
func (osFS) Lock(name string) (io.Closer, error) {
	// A lock on a file that lost its name (removed, or replaced, between
	// our open and our flock) locks nothing anyone else will open: check
	// that the name still leads to the locked file, and start again if not.
	for range 8 {
		f, err := flockFile(name)
		if err != nil {
			return nil, err
		}
		if same, err := sameFile(f, name); err != nil || !same {
			f.Close()
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("vfs: lock %s: %w", name, err)
			}
			continue
		}
		// Informational only: the lock is the flock, not the contents.
		if err := f.Truncate(0); err == nil {
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		return f, nil // closing the file releases the flock
	}
	return nil, fmt.Errorf("vfs: lock %s: the file keeps being replaced", name)
}

// sameFile reports whether name is (still) the file f has open.
func sameFile(f *os.File, name string) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	ni, err := os.Stat(name)
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, ni), nil
}

// flockFile opens (creating) name and flocks it exclusively without
// waiting; ErrLocked names the holder's pid when it can be read.
func flockFile(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		holder := ""
		if b, rerr := os.ReadFile(name); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = fmt.Sprintf(" (pid %d)", pid)
			}
		}
		f.Close()
		return nil, fmt.Errorf("%w: %s is held by another process%s", ErrLocked, name, holder)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("vfs: lock %s: %w", name, err)
	}
	return f, nil
}
