package vfs

import (
	"errors"
	"unsafe"
)

// DirectAlignment is the alignment, in bytes, that direct I/O needs of a
// write's buffer address, file offset and length: the page size, which is
// a multiple of every common disk's logical block size (open(2), O_DIRECT).
const DirectAlignment = 4096

// ErrDirectUnsupported is returned by DirectCreator.CreateDirect when the
// file system under the name cannot do direct I/O (e.g. Linux tmpfs before
// 6.6 refuses O_DIRECT with EINVAL).
var ErrDirectUnsupported = errors.New("vfs: direct I/O not supported here")

// DirectCreator is implemented by file systems that can create a file for
// direct I/O: its writes bypass the page cache (no copy into it, no
// write-back later), and every write's buffer address, file offset and
// length must be multiples of DirectAlignment, or the write fails with an
// error (EINVAL on Linux). Sync and SyncData are still needed for
// durability (the disk's cache, the file's size). Read such a file
// through another handle from Open.
type DirectCreator interface {
	// CreateDirect is Create for direct I/O; ErrDirectUnsupported when
	// the file system under name cannot do it.
	CreateDirect(name string) (File, error)
}

// CreateDirect creates name for direct I/O when fsys can (direct is true),
// and otherwise as fsys.Create does (direct is false). Errors are
// Create's.
func CreateDirect(fsys FS, name string) (f File, direct bool, err error) {
	if dc, ok := fsys.(DirectCreator); ok {
		f, err := dc.CreateDirect(name)
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, ErrDirectUnsupported) {
			return nil, false, err
		}
	}
	f, err = fsys.Create(name)
	return f, false, err
}

// AlignedBuffer returns a zeroed buffer of n bytes, n rounded up to a
// multiple of DirectAlignment, whose address is a multiple of
// DirectAlignment.
func AlignedBuffer(n int) []byte {
	n = AlignUp(n)
	b := make([]byte, n+DirectAlignment)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % DirectAlignment); r != 0 {
		skip = DirectAlignment - r
	}
	return b[skip : skip+n : skip+n]
}

// AlignUp rounds n up to a multiple of DirectAlignment.
func AlignUp(n int) int { return (n + DirectAlignment - 1) &^ (DirectAlignment - 1) }

// AlignDown rounds n down to a multiple of DirectAlignment.
func AlignDown(n int) int { return n &^ (DirectAlignment - 1) }

// directAligned reports whether a write of p at off meets direct I/O's
// alignment.
func directAligned(p []byte, off int64) bool {
	return off%DirectAlignment == 0 && len(p)%DirectAlignment == 0 &&
		(len(p) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(p)))%DirectAlignment == 0)
}
