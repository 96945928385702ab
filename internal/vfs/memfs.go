package vfs

import (
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// DefaultMemCapacity is the Total a new MemFS reports from DiskSpace.
const DefaultMemCapacity = 1 << 40

// MemFS is an in-memory FS that can simulate a crash. See the package doc
// for its durability model. The zero value is not usable: call NewMem.
type MemFS struct {
	mu       sync.Mutex
	gen      uint64 // bumped by Crash; handles of older generations fail
	dirs     map[string]*memDir
	capacity int64
	noDirect bool              // CreateDirect refuses (SetDirectIO)
	locks    map[string]uint64 // Lock holders: name → the generation (gen) they locked in
}

// memDir is one directory. Subdirectories are durable at once; file
// entries have a current and a durable (last SyncDir) version.
type memDir struct {
	files   map[string]*memNode // current entries
	synced  map[string]*memNode // entries as of the last SyncDir
	subdirs map[string]struct{}
}

// memNode is a file's contents (an inode: it may outlive its names).
type memNode struct {
	data []byte
	// synced is the contents as of the last Sync. It may share data's
	// backing array (aliased): appends past len(synced) do not disturb it,
	// and any write below len(synced) first gives synced its own copy.
	synced  []byte
	aliased bool
	modTime time.Time
}

// NewMem returns an empty MemFS holding only the root directory "/".
// Relative names are taken relative to "/".
func NewMem() *MemFS {
	m := &MemFS{dirs: map[string]*memDir{}, capacity: DefaultMemCapacity}
	m.dirs["/"] = newMemDir()
	return m
}

func newMemDir() *memDir {
	return &memDir{files: map[string]*memNode{}, synced: map[string]*memNode{}, subdirs: map[string]struct{}{}}
}

// SetCapacity sets the Total that DiskSpace reports (bytes); Free is Total
// minus the current size of all files.
func (m *MemFS) SetCapacity(total int64) {
	m.mu.Lock()
	m.capacity = total
	m.mu.Unlock()
}

func clean(name string) string {
	name = filepath.ToSlash(name)
	if !strings.HasPrefix(name, "/") {
		name = "/" + name
	}
	return path.Clean(name)
}

func split(name string) (dir, base string) {
	name = clean(name)
	return path.Dir(name), path.Base(name)
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// parent returns the directory holding name and name's base, or an error
// if the directory does not exist. Callers hold m.mu.
func (m *MemFS) parent(op, name string) (*memDir, string, error) {
	dir, base := split(name)
	d, ok := m.dirs[dir]
	if !ok {
		return nil, "", pathErr(op, name, fs.ErrNotExist)
	}
	if base == "/" || base == "." {
		return nil, "", pathErr(op, name, fs.ErrInvalid)
	}
	return d, base, nil
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent("create", name)
	if err != nil {
		return nil, err
	}
	if _, isDir := d.subdirs[base]; isDir {
		return nil, pathErr("create", name, fs.ErrExist)
	}
	n := &memNode{modTime: time.Now()}
	d.files[base] = n
	return &memFile{fs: m, node: n, name: clean(name), gen: m.gen, writable: true}, nil
}

// CreateDirect implements DirectCreator: the file refuses writes that do
// not meet DirectAlignment (fs.ErrInvalid), as O_DIRECT does, so tests
// hold direct-I/O writers to the contract. ErrDirectUnsupported after
// SetDirectIO(false).
func (m *MemFS) CreateDirect(name string) (File, error) {
	m.mu.Lock()
	noDirect := m.noDirect
	m.mu.Unlock()
	if noDirect {
		return nil, ErrDirectUnsupported
	}
	f, err := m.Create(name)
	if err != nil {
		return nil, err
	}
	f.(*memFile).direct = true
	return f, nil
}

// SetDirectIO makes CreateDirect work (the default) or refuse with
// ErrDirectUnsupported, like a file system without O_DIRECT.
func (m *MemFS) SetDirectIO(enabled bool) {
	m.mu.Lock()
	m.noDirect = !enabled
	m.mu.Unlock()
}

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) { return m.open("open", name, false) }

// OpenReadWrite implements FS.
func (m *MemFS) OpenReadWrite(name string) (File, error) { return m.open("open", name, true) }

func (m *MemFS) open(op, name string, writable bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent(op, name)
	if err != nil {
		return nil, err
	}
	n, ok := d.files[base]
	if !ok {
		return nil, pathErr(op, name, fs.ErrNotExist)
	}
	return &memFile{fs: m, node: n, name: clean(name), gen: m.gen, writable: writable}, nil
}

// Remove implements FS. Removing a directory is durable at once and
// requires it to hold no files or subdirectories (current entries).
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent("remove", name)
	if err != nil {
		return err
	}
	if _, ok := d.files[base]; ok {
		delete(d.files, base)
		return nil
	}
	if _, ok := d.subdirs[base]; ok {
		full := clean(name)
		sub := m.dirs[full]
		if len(sub.files) > 0 || len(sub.subdirs) > 0 {
			return pathErr("remove", name, fs.ErrExist)
		}
		delete(d.subdirs, base)
		delete(m.dirs, full)
		return nil
	}
	return pathErr("remove", name, fs.ErrNotExist)
}

// Rename implements FS for files (directories cannot be renamed).
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, obase, err := m.parent("rename", oldname)
	if err != nil {
		return err
	}
	nd, nbase, err := m.parent("rename", newname)
	if err != nil {
		return err
	}
	n, ok := od.files[obase]
	if !ok {
		return pathErr("rename", oldname, fs.ErrNotExist)
	}
	if _, isDir := nd.subdirs[nbase]; isDir {
		return pathErr("rename", newname, fs.ErrExist)
	}
	delete(od.files, obase)
	nd.files[nbase] = n
	return nil
}

// MkdirAll implements FS; new directories are durable at once.
func (m *MemFS) MkdirAll(dir string, _ os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var missing []string
	for d := clean(dir); ; d = path.Dir(d) {
		if _, ok := m.dirs[d]; ok {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		p, base := m.dirs[path.Dir(d)], path.Base(d)
		if _, ok := p.files[base]; ok {
			return pathErr("mkdir", d, fs.ErrExist)
		}
		m.dirs[d] = newMemDir()
		p.subdirs[base] = struct{}{}
	}
	return nil
}

// List implements FS: files and subdirectories, sorted.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.dirs[clean(dir)]
	if !ok {
		return nil, pathErr("list", dir, fs.ErrNotExist)
	}
	names := make([]string, 0, len(d.files)+len(d.subdirs))
	for n := range d.files {
		names = append(names, n)
	}
	for n := range d.subdirs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	full := clean(name)
	if _, ok := m.dirs[full]; ok {
		return memInfo{name: path.Base(full), dir: true}, nil
	}
	d, base, err := m.parent("stat", name)
	if err != nil {
		return nil, err
	}
	n, ok := d.files[base]
	if !ok {
		return nil, pathErr("stat", name, fs.ErrNotExist)
	}
	return memInfo{name: base, size: int64(len(n.data)), mod: n.modTime}, nil
}

// SyncDir implements FS: dir's current file entries become durable.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.dirs[clean(dir)]
	if !ok {
		return pathErr("syncdir", dir, fs.ErrNotExist)
	}
	d.synced = make(map[string]*memNode, len(d.files))
	for k, v := range d.files {
		d.synced[k] = v
	}
	return nil
}

// DiskSpace implements FS: Total is the capacity (SetCapacity), Free is
// Total minus the bytes held by reachable files.
func (m *MemFS) DiskSpace(string) (DiskSpace, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var used int64
	for _, d := range m.dirs {
		for _, n := range d.files {
			used += int64(len(n.data))
		}
	}
	free := m.capacity - used
	if free < 0 {
		free = 0
	}
	return DiskSpace{Total: m.capacity, Free: free}, nil
}

// CrashOptions tunes CrashCloneWith. The zero value keeps exactly what was
// durable.
type CrashOptions struct {
	// KeepUnsynced, if set, is called for every file that survives the
	// crash and has bytes changed since its last Sync: appended past the
	// synced size, or overwritten below it (as a direct-I/O writer
	// rewriting its last block does). from is the offset of the first
	// byte that differs from the synced contents, current the file's
	// length. It returns how many bytes to keep, clamped to
	// [0, current-from]: they are data[from:from+n] of the current
	// contents over the synced ones, modelling pages written back before
	// the crash (a torn write). Every other byte comes from the synced
	// contents. In the clone, everything kept counts as synced: it is what
	// the disk holds after the crash.
	KeepUnsynced func(name string, from, current int) int
}

// CrashClone returns a new MemFS holding what a crash at this instant
// would leave: each directory's entries as of its last SyncDir, each
// surviving file's contents as of its last Sync. m itself is unchanged and
// stays usable.
func (m *MemFS) CrashClone() *MemFS { return m.CrashCloneWith(CrashOptions{}) }

// CrashCloneWith is CrashClone with options (e.g. torn writes).
func (m *MemFS) CrashCloneWith(opts CrashOptions) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &MemFS{gen: 0, dirs: m.durableDirs(opts), capacity: m.capacity, noDirect: m.noDirect}
}

// Crash replaces m's state in place with what a crash would leave (as
// CrashClone) and makes every handle opened before fail with ErrCrashed.
func (m *MemFS) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirs = m.durableDirs(CrashOptions{})
	m.gen++
	m.locks = nil // the crashed holders' locks went with them
}

// durableDirs builds the post-crash directory tree. Callers hold m.mu.
func (m *MemFS) durableDirs(opts CrashOptions) map[string]*memDir {
	nodes := map[*memNode]*memNode{}
	out := make(map[string]*memDir, len(m.dirs))
	for dname, d := range m.dirs {
		nd := newMemDir()
		for s := range d.subdirs {
			nd.subdirs[s] = struct{}{}
		}
		for fname, n := range d.synced {
			c, ok := nodes[n]
			if !ok {
				c = n.crashCopy(path.Join(dname, fname), opts)
				nodes[n] = c
			}
			nd.files[fname] = c
			nd.synced[fname] = c
		}
		out[dname] = nd
	}
	return out
}

func (n *memNode) crashCopy(name string, opts CrashOptions) *memNode {
	from := firstChange(n.synced, n.data)
	keep := 0
	if opts.KeepUnsynced != nil && len(n.data) > from {
		limit := len(n.data) - from
		keep = min(max(opts.KeepUnsynced(name, from, len(n.data)), 0), limit)
	}
	data := make([]byte, max(len(n.synced), from+keep))
	copy(data, n.synced)
	copy(data[from:], n.data[from:from+keep])
	// What survived a crash is what is on the disk: all of it is durable.
	return &memNode{data: data, synced: data[:len(data):len(data)], aliased: true, modTime: n.modTime}
}

// firstChange is the offset of the first byte of cur that differs from
// synced, or the shorter one's length: where unsynced changes begin.
func firstChange(synced, cur []byte) int {
	n := min(len(synced), len(cur))
	for i := range n {
		if synced[i] != cur[i] {
			return i
		}
	}
	return n
}

// detach gives synced its own copy before data changes below len(synced).
func (n *memNode) detach(off int64) {
	if n.aliased && off < int64(len(n.synced)) {
		n.synced = append([]byte(nil), n.synced...)
		n.aliased = false
	}
}

func (n *memNode) writeAt(p []byte, off int64) {
	n.detach(off)
	end := off + int64(len(p))
	if end > int64(len(n.data)) {
		if end > int64(cap(n.data)) {
			grown := make([]byte, len(n.data), max(end, 2*int64(cap(n.data))))
			copy(grown, n.data)
			n.data = grown
		}
		n.data = n.data[:end]
	}
	copy(n.data[off:], p)
	n.modTime = time.Now()
}

type memFile struct {
	fs       *MemFS
	node     *memNode
	name     string
	gen      uint64
	pos      int64 // Write offset
	writable bool
	closed   bool
	direct   bool // writes must meet DirectAlignment (CreateDirect)
}

// check returns an error if the handle cannot be used. Callers hold fs.mu.
func (f *memFile) check(op string, write bool) error {
	switch {
	case f.closed:
		return pathErr(op, f.name, fs.ErrClosed)
	case f.gen != f.fs.gen:
		return pathErr(op, f.name, ErrCrashed)
	case write && !f.writable:
		return pathErr(op, f.name, fs.ErrPermission)
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, fs.ErrInvalid)
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if f.direct && !directAligned(p, f.pos) {
		return 0, pathErr("write", f.name, fs.ErrInvalid)
	}
	f.node.writeAt(p, f.pos)
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 || f.direct && !directAligned(p, off) {
		return 0, pathErr("write", f.name, fs.ErrInvalid)
	}
	f.node.writeAt(p, off)
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false); err != nil {
		return err
	}
	n := f.node
	n.synced = n.data[:len(n.data):len(n.data)]
	n.aliased = true
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, fs.ErrInvalid)
	}
	n := f.node
	if size < int64(len(n.data)) {
		n.detach(size)
		n.data = n.data[:size]
	} else if size > int64(len(n.data)) {
		n.writeAt(make([]byte, size-int64(len(n.data))), int64(len(n.data)))
	}
	n.modTime = time.Now()
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", false); err != nil {
		return nil, err
	}
	return memInfo{name: path.Base(f.name), size: int64(len(f.node.data)), mod: f.node.modTime}, nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}

type memInfo struct {
	name string
	size int64
	dir  bool
	mod  time.Time
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return i.mod }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
