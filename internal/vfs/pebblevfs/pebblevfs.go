// Package pebblevfs adapts an internal/vfs FS to pebble's vfs.FS, so that a
// pebble database lives on the same (possibly crashable or fault-injecting)
// file system as the rest of a component's files, and a simulated crash
// cuts every file at the same instant.
//
// What it must not do: add behaviour. Every pebble call maps onto one or a
// few calls of the wrapped FS; durability is exactly the wrapped FS's
// (pebble syncs files and directories as it should). Unsupported calls
// (Link) return an error, which pebble only needs for features Strata does
// not use (checkpoints, ingestion by link).
//
// Concurrency: as safe as the wrapped FS. Lock is an in-process lock only
// (it stops two pebble instances in one process from opening the same
// directory, not two processes).
package pebblevfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	pvfs "github.com/cockroachdb/pebble/v2/vfs"

	"github.com/stratamesh/strata/internal/vfs"
)

// ErrUnsupported is returned by the pebble calls the adapter does not
// offer.
var ErrUnsupported = errors.New("pebblevfs: unsupported")

// New returns fsys as a pebble vfs.FS.
func New(fsys vfs.FS) pvfs.FS { return &adapter{fs: fsys} }

type adapter struct {
	fs vfs.FS
}

// locks holds the lock files held in this process, by cleaned path.
var locks sync.Map

func (a *adapter) Create(name string, _ pvfs.DiskWriteCategory) (pvfs.File, error) {
	f, err := a.fs.Create(name)
	if err != nil {
		return nil, err
	}
	return &file{f: f}, nil
}

func (a *adapter) Link(string, string) error { return ErrUnsupported }

func (a *adapter) Open(name string, opts ...pvfs.OpenOption) (pvfs.File, error) {
	f, err := a.fs.Open(name)
	if err != nil {
		return nil, err
	}
	pf := &file{f: f}
	for _, o := range opts {
		o.Apply(pf)
	}
	return pf, nil
}

func (a *adapter) OpenReadWrite(name string, _ pvfs.DiskWriteCategory, opts ...pvfs.OpenOption) (pvfs.File, error) {
	f, err := a.fs.OpenReadWrite(name)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = a.fs.Create(name)
	}
	if err != nil {
		return nil, err
	}
	pf := &file{f: f}
	for _, o := range opts {
		o.Apply(pf)
	}
	return pf, nil
}

func (a *adapter) OpenDir(name string) (pvfs.File, error) {
	st, err := a.fs.Stat(name)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, &fs.PathError{Op: "opendir", Path: name, Err: fs.ErrInvalid}
	}
	return &dir{fs: a.fs, name: name}, nil
}

func (a *adapter) Remove(name string) error { return a.fs.Remove(name) }

func (a *adapter) RemoveAll(name string) error {
	st, err := a.fs.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.IsDir() {
		names, err := a.fs.List(name)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := a.RemoveAll(filepath.Join(name, n)); err != nil {
				return err
			}
		}
	}
	return a.fs.Remove(name)
}

func (a *adapter) Rename(oldname, newname string) error { return a.fs.Rename(oldname, newname) }

// ReuseForWrite does not reuse: it removes oldname and creates newname,
// which the pebble contract allows.
func (a *adapter) ReuseForWrite(oldname, newname string, cat pvfs.DiskWriteCategory) (pvfs.File, error) {
	if err := a.fs.Remove(oldname); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return a.Create(newname, cat)
}

func (a *adapter) MkdirAll(dir string, perm os.FileMode) error { return a.fs.MkdirAll(dir, perm) }

func (a *adapter) Lock(name string) (io.Closer, error) {
	key := filepath.Clean(name)
	if _, loaded := locks.LoadOrStore(key, struct{}{}); loaded {
		return nil, &fs.PathError{Op: "lock", Path: name, Err: errors.New("already locked in this process")}
	}
	f, err := a.fs.Create(name)
	if err != nil {
		locks.Delete(key)
		return nil, err
	}
	if err := f.Close(); err != nil {
		locks.Delete(key)
		return nil, err
	}
	return lockCloser(key), nil
}

type lockCloser string

func (l lockCloser) Close() error {
	locks.Delete(string(l))
	return nil
}

func (a *adapter) List(dir string) ([]string, error) { return a.fs.List(dir) }

func (a *adapter) Stat(name string) (pvfs.FileInfo, error) {
	st, err := a.fs.Stat(name)
	if err != nil {
		return nil, err
	}
	return fileInfo{st}, nil
}

func (a *adapter) PathBase(p string) string       { return filepath.Base(p) }
func (a *adapter) PathJoin(elem ...string) string { return filepath.Join(elem...) }
func (a *adapter) PathDir(p string) string        { return filepath.Dir(p) }
func (a *adapter) Unwrap() pvfs.FS                { return nil }
func (a *adapter) GetDiskUsage(p string) (pvfs.DiskUsage, error) {
	ds, err := a.fs.DiskSpace(p)
	if err != nil {
		return pvfs.DiskUsage{}, err
	}
	return pvfs.DiskUsage{
		AvailBytes: uint64(ds.Free),
		TotalBytes: uint64(ds.Total),
		UsedBytes:  uint64(ds.Total - ds.Free),
	}, nil
}

type fileInfo struct{ fs.FileInfo }

func (fileInfo) DeviceID() pvfs.DeviceID { return pvfs.DeviceID{} }

// file adapts a vfs.File; Read keeps its own offset over ReadAt.
type file struct {
	f   vfs.File
	mu  sync.Mutex
	off int64
}

func (p *file) Close() error { return p.f.Close() }

func (p *file) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, err := p.f.ReadAt(b, p.off)
	p.off += int64(n)
	if n > 0 && err == io.EOF {
		err = nil
	}
	return n, err
}

func (p *file) ReadAt(b []byte, off int64) (int, error)  { return p.f.ReadAt(b, off) }
func (p *file) Write(b []byte) (int, error)              { return p.f.Write(b) }
func (p *file) WriteAt(b []byte, off int64) (int, error) { return p.f.WriteAt(b, off) }
func (p *file) Preallocate(off, length int64) error      { return nil }
func (p *file) Sync() error                              { return p.f.Sync() }
func (p *file) SyncData() error                          { return vfs.SyncData(p.f) }
func (p *file) Prefetch(int64, int64) error              { return nil }
func (p *file) Fd() uintptr                              { return pvfs.InvalidFd }

func (p *file) SyncTo(int64) (fullSync bool, err error) {
	if err := vfs.SyncData(p.f); err != nil {
		return false, err
	}
	return true, nil
}

func (p *file) Stat() (pvfs.FileInfo, error) {
	st, err := p.f.Stat()
	if err != nil {
		return nil, err
	}
	return fileInfo{st}, nil
}

// dir is a directory opened for syncing.
type dir struct {
	fs   vfs.FS
	name string
}

func (d *dir) errNotFile(op string) error {
	return &fs.PathError{Op: op, Path: d.name, Err: fs.ErrInvalid}
}

func (d *dir) Close() error                       { return nil }
func (d *dir) Read([]byte) (int, error)           { return 0, d.errNotFile("read") }
func (d *dir) ReadAt([]byte, int64) (int, error)  { return 0, d.errNotFile("read") }
func (d *dir) Write([]byte) (int, error)          { return 0, d.errNotFile("write") }
func (d *dir) WriteAt([]byte, int64) (int, error) { return 0, d.errNotFile("write") }
func (d *dir) Preallocate(int64, int64) error     { return nil }
func (d *dir) Sync() error                        { return d.fs.SyncDir(d.name) }
func (d *dir) SyncData() error                    { return d.fs.SyncDir(d.name) }
func (d *dir) SyncTo(int64) (bool, error)         { return false, nil }
func (d *dir) Prefetch(int64, int64) error        { return nil }
func (d *dir) Fd() uintptr                        { return pvfs.InvalidFd }
func (d *dir) Stat() (pvfs.FileInfo, error) {
	st, err := d.fs.Stat(d.name)
	if err != nil {
		return nil, err
	}
	return fileInfo{st}, nil
}
