package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// ErrCrashed is returned by File operations on a MemFS handle opened before
// MemFS.Crash.
var ErrCrashed = errors.New("vfs: file system crashed")

// ErrInjected is the default error returned by the injectors of ErrorFS.
var ErrInjected = errors.New("vfs: injected error")

// FS is a namespace of files and directories. Names are slash- or
// OS-separated paths; implementations clean them.
type FS interface {
	// Create creates the named file for reading and writing, truncating it
	// if it exists. Its parent directory must exist. The new directory
	// entry is durable only after SyncDir of the parent.
	Create(name string) (File, error)
	// Open opens the named file read-only.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing without
	// truncating it; Write starts at offset 0. It fails with an error
	// satisfying errors.Is(err, fs.ErrNotExist) if the file does not exist.
	OpenReadWrite(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename renames a file, replacing newname if it exists.
	Rename(oldname, newname string) error
	// MkdirAll creates dir and any missing parents (perm as os.MkdirAll).
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the names (not paths) in dir, sorted.
	List(dir string) ([]string, error)
	// Stat describes the named file or directory.
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes dir's entries (creates, renames and removes of files
	// in it) durable.
	SyncDir(dir string) error
	// DiskSpace reports the capacity and free space, in bytes, of the file
	// system holding dir.
	DiskSpace(dir string) (DiskSpace, error)
}

// File is an open file.
type File interface {
	io.ReaderAt
	// Write writes at the handle's offset (0 when opened) and advances it.
	io.Writer
	io.WriterAt
	// Sync makes the file's contents and size durable.
	Sync() error
	// Truncate changes the file's size (shrinking, or growing with zeros).
	// It does not move the handle's write offset.
	Truncate(size int64) error
	// Stat describes the file.
	Stat() (fs.FileInfo, error)
	Close() error
}

// DiskSpace is the size of a file system, in bytes.
type DiskSpace struct {
	Total int64 // capacity
	Free  int64 // bytes available to this process
}

// UsedFraction is (Total-Free)/Total, or 0 when Total is 0.
func (d DiskSpace) UsedFraction() float64 {
	if d.Total <= 0 {
		return 0
	}
	return float64(d.Total-d.Free) / float64(d.Total)
}

// DataSyncer is implemented by files that can sync their data without
// metadata not needed to read it back (fdatasync). Optional: callers
// type-assert (see SyncData); Sync is always a valid substitute.
type DataSyncer interface {
	SyncData() error
}

// WritebackStarter is implemented by files that can start writing a range
// back to disk without waiting (sync_file_range on Linux), so that a later
// Sync has little left to do and writes are spread out rather than burst.
// It guarantees nothing about durability. Optional, like DataSyncer.
type WritebackStarter interface {
	StartWriteback(off, length int64) error
}

// Prefetcher is implemented by files that can start reading a range into
// the page cache without waiting (posix_fadvise(POSIX_FADV_WILLNEED) on
// Linux), for a reader about to ask for it. A hint only. Optional.
type Prefetcher interface {
	Prefetch(off, length int64) error
}

// Prefetch calls f.Prefetch if f implements Prefetcher; otherwise it does
// nothing.
func Prefetch(f File, off, length int64) error {
	if p, ok := f.(Prefetcher); ok {
		return p.Prefetch(off, length)
	}
	return nil
}

// StartWriteback calls f.StartWriteback if f implements WritebackStarter.
func StartWriteback(f File, off, length int64) error {
	if w, ok := f.(WritebackStarter); ok {
		return w.StartWriteback(off, length)
	}
	return nil
}

// SyncData calls f.SyncData if f implements DataSyncer, else f.Sync.
func SyncData(f File) error {
	if d, ok := f.(DataSyncer); ok {
		return d.SyncData()
	}
	return f.Sync()
}

// ReadFile returns the whole contents of the named file.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, st.Size())
	n, err := f.ReadAt(buf, 0)
	if err == io.EOF && n == len(buf) {
		err = nil
	}
	return buf[:n], err
}
