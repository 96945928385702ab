//go:build !linux

package vfs

import "errors"

func osDiskSpace(dir string) (DiskSpace, error) {
	return DiskSpace{}, errors.New("vfs: disk space is only implemented on linux")
}
