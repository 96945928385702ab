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
	// Informational only: the lock is the flock, not the contents.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil // closing the file releases the flock
}
