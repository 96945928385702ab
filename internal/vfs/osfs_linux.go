//go:build linux

package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

func osDiskSpace(dir string) (DiskSpace, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return DiskSpace{}, err
	}
	bs := int64(st.Bsize)
	return DiskSpace{Total: int64(st.Blocks) * bs, Free: int64(st.Bavail) * bs}, nil
}

// SyncData calls fdatasync(2).
func (f osFile) SyncData() error {
	return f.control("fdatasync", syscall.Fdatasync)
}

// StartWriteback calls sync_file_range(SYNC_FILE_RANGE_WRITE).
func (f osFile) StartWriteback(off, length int64) error {
	const syncFileRangeWrite = 0x2
	return f.control("sync_file_range", func(fd int) error { return syscall.SyncFileRange(fd, off, length, syncFileRangeWrite) })
}

// Prefetch calls posix_fadvise(POSIX_FADV_WILLNEED).
func (f osFile) Prefetch(off, length int64) error {
	return f.control("fadvise", func(fd int) error { return unix.Fadvise(fd, off, length, unix.FADV_WILLNEED) })
}

// control runs op on the file's descriptor, retrying on EINTR.
func (f osFile) control(name string, op func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) {
		for {
			opErr = op(int(fd))
			if opErr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if opErr != nil {
		return &fs.PathError{Op: name, Path: f.Name(), Err: opErr}
	}
	return nil
}

// CreateDirect implements DirectCreator with O_DIRECT.
func (osFS) CreateDirect(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC|syscall.O_DIRECT, 0o644)
	if errors.Is(err, syscall.EINVAL) {
		return nil, fmt.Errorf("%w: %s: %v", ErrDirectUnsupported, name, err)
	}
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}
