package fsblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/stratamesh/strata/tiered/blob"
	"github.com/stratamesh/strata/tiered/blob/internal/driver"
)

// tempPattern names Put's temporary files (os.CreateTemp pattern). It
// starts with blob.ReservedPrefix, so no object name can collide with it.
const tempPattern = blob.ReservedPrefix + "tmp-*"

// putRetries bounds how often Put re-creates a directory that a
// concurrent Delete pruned between Put's mkdir and its create.
const putRetries = 10

// Store is a blob.Store over a local directory.
type Store struct {
	root   string // absolute, cleaned
	closed driver.Closed
}

var _ blob.Store = (*Store)(nil)

// New opens (creating it if missing, mode 0755) the directory dir as a
// store. Objects already in it are the store's objects.
func New(dir string) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("fsblob: %w: dir is empty", blob.ErrInvalidConfig)
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fsblob: dir %q: %w", dir, err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("fsblob: %w", err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("fsblob: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("fsblob: %w: %s is not a directory", blob.ErrInvalidConfig, root)
	}
	return &Store{root: root}, nil
}

// Dir returns the store's directory (absolute).
func (s *Store) Dir() string { return s.root }

// path checks name and returns its file's path.
func (s *Store) path(ctx context.Context, op, name string) (string, error) {
	if err := s.closed.Check("fsblob"); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("fsblob: %s %q: %w", op, name, err)
	}
	if _, err := driver.Key("", name); err != nil {
		return "", fmt.Errorf("fsblob: %s: %w", op, err)
	}
	return filepath.Join(s.root, filepath.FromSlash(name)), nil
}

// Put implements blob.Store: the body goes to a temporary file in the
// object's directory, which is fsynced, renamed over the object and the
// directory fsynced; on any error the temporary file is removed and an
// existing object of that name is left as it was. A name that is a
// directory here (because objects exist under name+"/") cannot be put.
func (s *Store) Put(ctx context.Context, name string, r io.Reader, size int64) (err error) {
	p, err := s.path(ctx, "put", name)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("fsblob: put %q: %w", name, err)
		}
	}()
	dir := filepath.Dir(p)
	var f *os.File
	for attempt := 0; ; attempt++ {
		err = s.mkdirAll(dir)
		if err == nil {
			f, err = os.CreateTemp(dir, tempPattern)
		}
		if err == nil || !errors.Is(err, fs.ErrNotExist) || attempt == putRetries {
			break
		}
	}
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = io.Copy(f, driver.NewBody(ctx, r, size)); err != nil {
		return err
	}
	if err = ctx.Err(); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, p); err != nil {
		if fi, serr := os.Lstat(p); serr == nil && fi.IsDir() {
			return fmt.Errorf("objects exist under %q: fs cannot also hold an object of that name: %w", name+"/", err)
		}
		return err
	}
	return syncDir(dir)
}

// mkdirAll creates dir and its missing parents up to the root, fsyncing
// each new directory's parent so the new entry survives a crash.
func (s *Store) mkdirAll(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is an object, so no object can be under it: %w", s.rel(dir), syscall.ENOTDIR)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) || dir == s.root {
		return err
	}
	parent := filepath.Dir(dir)
	if err := s.mkdirAll(parent); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

// rel returns p relative to the root in slash form, for messages.
func (s *Store) rel(p string) string {
	r, err := filepath.Rel(s.root, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}

// NewRangeReader implements blob.Store with a section reader over the
// file. The file stays open until the reader is closed, so a concurrent
// overwrite or delete does not disturb it (it keeps reading the old
// object). ctx is only checked when opening.
func (s *Store) NewRangeReader(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	p, err := s.path(ctx, "read", name)
	if err != nil {
		return nil, err
	}
	if err := driver.CheckOffset(name, off); err != nil {
		return nil, fmt.Errorf("fsblob: %w", err)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("fsblob: read %q: %w", name, notFound(err))
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = blob.ErrNotFound
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("fsblob: read %q: %w", name, err)
	}
	n, err := driver.Span(name, off, length, fi.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("fsblob: %w", err)
	}
	return &fileReader{SectionReader: io.NewSectionReader(f, off, n), f: f}, nil
}

type fileReader struct {
	*io.SectionReader
	f *os.File
}

func (r *fileReader) Close() error { return r.f.Close() }

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, name string) (blob.Attrs, error) {
	p, err := s.path(ctx, "stat", name)
	if err != nil {
		return blob.Attrs{}, err
	}
	fi, err := os.Stat(p)
	if err == nil && !fi.Mode().IsRegular() {
		err = blob.ErrNotFound
	}
	if err != nil {
		return blob.Attrs{}, fmt.Errorf("fsblob: stat %q: %w", name, notFound(err))
	}
	return blob.Attrs{Name: name, Size: fi.Size(), Modified: fi.ModTime()}, nil
}

// Delete implements blob.Store. It also removes the directories that the
// deletion left empty, up to (not including) the root, and fsyncs the
// object's directory.
func (s *Store) Delete(ctx context.Context, name string) error {
	p, err := s.path(ctx, "delete", name)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(p)
	if err != nil || fi.IsDir() {
		// Missing, or only a prefix of other objects: no such object.
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("fsblob: delete %q: %w", name, err)
		}
		return nil
	}
	if err := os.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("fsblob: delete %q: %w", name, err)
	}
	dir := filepath.Dir(p)
	if err := syncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("fsblob: delete %q: %w", name, err)
	}
	for d := dir; d != s.root && len(d) > len(s.root); d = filepath.Dir(d) {
		if os.Remove(d) != nil { // not empty (or gone): stop
			break
		}
	}
	return nil
}

// Close implements blob.Store. It only marks the store closed.
func (s *Store) Close() error {
	s.closed.Close()
	return nil
}

// notFound maps "no such file" (and "a parent is a file") to
// blob.ErrNotFound, keeping the OS error's text.
func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w (%v)", blob.ErrNotFound, err)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
