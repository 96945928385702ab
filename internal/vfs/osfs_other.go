//go:build !linux

package vfs

import "errors"

func osDiskSpace(dir string) (DiskSpace, error) {
	return DiskSpace{}, errors.New("vfs: disk space is only implemented on linux")
}

// CreateDirect implements DirectCreator: direct I/O is only used on linux.
func (osFS) CreateDirect(name string) (File, error) { return nil, ErrDirectUnsupported }
