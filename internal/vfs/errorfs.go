package vfs

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// OpKind names an FS or File operation, for error injection.
type OpKind uint8

// Operations seen by an Injector.
const (
	OpCreate OpKind = iota + 1
	OpOpen          // Open and OpenReadWrite
	OpRemove
	OpRename
	OpMkdirAll
	OpList
	OpStat // FS.Stat and File.Stat
	OpSyncDir
	OpDiskSpace
	OpRead  // File.ReadAt
	OpWrite // File.Write and File.WriteAt
	OpSync  // File.Sync and SyncData
	OpTruncate
	OpClose
)

var opNames = [...]string{"?", "create", "open", "remove", "rename", "mkdirall", "list", "stat",
	"syncdir", "diskspace", "read", "write", "sync", "truncate", "close"}

func (k OpKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return "?"
}

// Op is one operation about to run.
type Op struct {
	Kind OpKind
	Path string // the file or directory (for Rename, the old name)
	Off  int64  // File.WriteAt/ReadAt offset, or the write offset of Write
	Len  int    // bytes to read or write
}

// Injector decides whether an operation fails. MaybeError is called before
// the operation; a non-nil result is returned instead of running it. It
// must be safe for concurrent use.
type Injector interface {
	MaybeError(op Op) error
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op) error

// MaybeError implements Injector.
func (f InjectorFunc) MaybeError(op Op) error { return f(op) }

// Match selects operations.
type Match func(op Op) bool

// OnKind matches operations of the given kinds.
func OnKind(kinds ...OpKind) Match {
	return func(op Op) bool {
		for _, k := range kinds {
			if op.Kind == k {
				return true
			}
		}
		return false
	}
}

// InDir matches operations on paths inside dir (at any depth).
func InDir(dir string) Match {
	dir = filepath.Clean(dir) + string(filepath.Separator)
	return func(op Op) bool { return strings.HasPrefix(filepath.Clean(op.Path), dir) }
}

// And matches operations that all of ms match.
func And(ms ...Match) Match {
	return func(op Op) bool {
		for _, m := range ms {
			if !m(op) {
				return false
			}
		}
		return true
	}
}

// FailNth is an Injector that fails only the n-th (1-based) operation
// that match selects (nil: every operation), with err (nil: ErrInjected).
type FailNth struct {
	n     int64
	match Match
	err   error
	seen  atomic.Int64
}

// NewFailNth builds a FailNth injector.
func NewFailNth(n int64, match Match, err error) *FailNth {
	if err == nil {
		err = ErrInjected
	}
	return &FailNth{n: n, match: match, err: err}
}

// MaybeError implements Injector.
func (f *FailNth) MaybeError(op Op) error {
	if f.match != nil && !f.match(op) {
		return nil
	}
	if f.seen.Add(1) == f.n {
		return f.err
	}
	return nil
}

// Seen is how many matching operations the injector has seen.
func (f *FailNth) Seen() int64 { return f.seen.Load() }

// FailAll returns an Injector failing every operation match selects (nil:
// every operation) with err (nil: ErrInjected).
func FailAll(match Match, err error) Injector {
	if err == nil {
		err = ErrInjected
	}
	return InjectorFunc(func(op Op) error {
		if match == nil || match(op) {
			return err
		}
		return nil
	})
}

// ErrorFS wraps an FS and fails the operations its Injector chooses.
type ErrorFS struct {
	fs  FS
	mu  sync.RWMutex
	inj Injector
}

// NewErrorFS wraps fs; inj may be nil (no errors until SetInjector).
func NewErrorFS(fs FS, inj Injector) *ErrorFS {
	return &ErrorFS{fs: fs, inj: inj}
}

// SetInjector replaces the injector (nil: inject nothing).
func (e *ErrorFS) SetInjector(inj Injector) {
	e.mu.Lock()
	e.inj = inj
	e.mu.Unlock()
}

func (e *ErrorFS) maybe(op Op) error {
	e.mu.RLock()
	inj := e.inj
	e.mu.RUnlock()
	if inj == nil {
		return nil
	}
	if err := inj.MaybeError(op); err != nil {
		return &fs.PathError{Op: op.Kind.String(), Path: op.Path, Err: err}
	}
	return nil
}

// Create implements FS.
func (e *ErrorFS) Create(name string) (File, error) {
	if err := e.maybe(Op{Kind: OpCreate, Path: name}); err != nil {
		return nil, err
	}
	f, err := e.fs.Create(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{fs: e, f: f, name: name}, nil
}

// CreateDirect implements DirectCreator when the wrapped FS does (as an
// OpCreate); otherwise it returns ErrDirectUnsupported.
func (e *ErrorFS) CreateDirect(name string) (File, error) {
	dc, ok := e.fs.(DirectCreator)
	if !ok {
		return nil, ErrDirectUnsupported
	}
	if err := e.maybe(Op{Kind: OpCreate, Path: name}); err != nil {
		return nil, err
	}
	f, err := dc.CreateDirect(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{fs: e, f: f, name: name}, nil
}

// Open implements FS.
func (e *ErrorFS) Open(name string) (File, error) {
	if err := e.maybe(Op{Kind: OpOpen, Path: name}); err != nil {
		return nil, err
	}
	f, err := e.fs.Open(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{fs: e, f: f, name: name}, nil
}

// OpenReadWrite implements FS.
func (e *ErrorFS) OpenReadWrite(name string) (File, error) {
	if err := e.maybe(Op{Kind: OpOpen, Path: name}); err != nil {
		return nil, err
	}
	f, err := e.fs.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{fs: e, f: f, name: name}, nil
}

// Remove implements FS.
func (e *ErrorFS) Remove(name string) error {
	if err := e.maybe(Op{Kind: OpRemove, Path: name}); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

// Rename implements FS.
func (e *ErrorFS) Rename(oldname, newname string) error {
	if err := e.maybe(Op{Kind: OpRename, Path: oldname}); err != nil {
		return err
	}
	return e.fs.Rename(oldname, newname)
}

// MkdirAll implements FS.
func (e *ErrorFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := e.maybe(Op{Kind: OpMkdirAll, Path: dir}); err != nil {
		return err
	}
	return e.fs.MkdirAll(dir, perm)
}

// List implements FS.
func (e *ErrorFS) List(dir string) ([]string, error) {
	if err := e.maybe(Op{Kind: OpList, Path: dir}); err != nil {
		return nil, err
	}
	return e.fs.List(dir)
}

// Stat implements FS.
func (e *ErrorFS) Stat(name string) (fs.FileInfo, error) {
	if err := e.maybe(Op{Kind: OpStat, Path: name}); err != nil {
		return nil, err
	}
	return e.fs.Stat(name)
}

// SyncDir implements FS.
func (e *ErrorFS) SyncDir(dir string) error {
	if err := e.maybe(Op{Kind: OpSyncDir, Path: dir}); err != nil {
		return err
	}
	return e.fs.SyncDir(dir)
}

// DiskSpace implements FS.
func (e *ErrorFS) DiskSpace(dir string) (DiskSpace, error) {
	if err := e.maybe(Op{Kind: OpDiskSpace, Path: dir}); err != nil {
		return DiskSpace{}, err
	}
	return e.fs.DiskSpace(dir)
}

type errorFile struct {
	fs   *ErrorFS
	f    File
	name string
	pos  atomic.Int64 // mirrors the wrapped handle's write offset, for Op.Off
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.maybe(Op{Kind: OpRead, Path: f.name, Off: off, Len: len(p)}); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *errorFile) Write(p []byte) (int, error) {
	if err := f.fs.maybe(Op{Kind: OpWrite, Path: f.name, Off: f.pos.Load(), Len: len(p)}); err != nil {
		return 0, err
	}
	n, err := f.f.Write(p)
	f.pos.Add(int64(n))
	return n, err
}

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.maybe(Op{Kind: OpWrite, Path: f.name, Off: off, Len: len(p)}); err != nil {
		return 0, err
	}
	return f.f.WriteAt(p, off)
}

func (f *errorFile) Sync() error {
	if err := f.fs.maybe(Op{Kind: OpSync, Path: f.name}); err != nil {
		return err
	}
	return f.f.Sync()
}

// SyncData implements DataSyncer (injected as OpSync).
func (f *errorFile) SyncData() error {
	if err := f.fs.maybe(Op{Kind: OpSync, Path: f.name}); err != nil {
		return err
	}
	return SyncData(f.f)
}

// StartWriteback implements WritebackStarter when the wrapped file does
// (never injected: it promises nothing).
func (f *errorFile) StartWriteback(off, length int64) error {
	return StartWriteback(f.f, off, length)
}

func (f *errorFile) Prefetch(off, length int64) error {
	return Prefetch(f.f, off, length)
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.fs.maybe(Op{Kind: OpTruncate, Path: f.name, Off: size}); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *errorFile) Stat() (fs.FileInfo, error) {
	if err := f.fs.maybe(Op{Kind: OpStat, Path: f.name}); err != nil {
		return nil, err
	}
	return f.f.Stat()
}

func (f *errorFile) Close() error {
	if err := f.fs.maybe(Op{Kind: OpClose, Path: f.name}); err != nil {
		f.f.Close()
		return err
	}
	return f.f.Close()
}

// Lock implements Locker when the wrapped FS does (as an OpCreate of
// name); otherwise the lock protects nothing, as vfs.Lock's.
func (e *ErrorFS) Lock(name string) (io.Closer, error) {
	if err := e.maybe(Op{Kind: OpCreate, Path: name}); err != nil {
		return nil, err
	}
	return Lock(e.fs, name)
}
