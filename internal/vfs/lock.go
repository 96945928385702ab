package vfs

import (
	"errors"
	"io"
)

// ErrLocked is returned by Lock when another holder has the lock: another
// process on the real file system, another open of the same MemFS.
var ErrLocked = errors.New("vfs: locked by another holder")

// Locker is implemented by file systems that can lock a file for one
// holder at a time: the OS file system with flock(2) (the lock goes with
// the process: a crash or kill releases it, and it does not stop a
// process that does not ask for it), MemFS against other Locks of the
// same name until Unlock or Crash.
type Locker interface {
	// Lock creates name if needed and locks it exclusively without
	// waiting: ErrLocked (wrapped) when it is held. Closing the returned
	// io.Closer releases it.
	Lock(name string) (io.Closer, error)
}

// Lock locks name on fsys when fsys is a Locker (see Locker) and
// otherwise returns a lock that protects nothing (file systems without
// locks, e.g. the OS's off unix). Errors: ErrLocked (wrapped), or the
// file system's on creating name.
func Lock(fsys FS, name string) (io.Closer, error) {
	if l, ok := fsys.(Locker); ok {
		return l.Lock(name)
	}
	return nopCloser{}, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
