package memblob

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/stratamesh/strata/tiered/blob"
	"github.com/stratamesh/strata/tiered/blob/internal/driver"
)

// Store is an in-memory blob.Store. The zero value is not usable: call New.
type Store struct {
	now    func() time.Time
	closed driver.Closed

	mu      sync.RWMutex
	objects map[string]object
	faults  []*Fault
	calls   map[Op]int
}

// object is immutable once stored: Put stores a fresh slice, so readers
// use data without holding the lock.
type object struct {
	data []byte
	mod  time.Time
}

// Option configures New.
type Option func(*Store)

// WithClock makes the store stamp Attrs.Modified with now() instead of
// time.Now().
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{now: time.Now, objects: map[string]object{}, calls: map[Op]int{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

var _ blob.Store = (*Store)(nil)

// Put implements blob.Store. The body is read whole into memory before
// the object appears; on any error nothing changes.
func (s *Store) Put(ctx context.Context, name string, r io.Reader, size int64) error {
	if err := s.begin(ctx, name); err != nil {
		return fmt.Errorf("memblob: put: %w", err)
	}
	body := driver.NewBody(ctx, r, size)
	if f := s.fault(OpPut, name); f != nil {
		if f.AfterBytes > 0 {
			_, _ = io.CopyN(io.Discard, body, f.AfterBytes)
		}
		return fmt.Errorf("memblob: put %q: %w", name, f.err())
	}
	var buf bytes.Buffer
	if size > 0 {
		buf.Grow(int(min(size, 64<<20)))
	}
	if _, err := io.Copy(&buf, body); err != nil {
		return fmt.Errorf("memblob: put %q: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memblob: put %q: %w", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.closed.Check("memblob"); err != nil {
		return err
	}
	s.objects[name] = object{data: buf.Bytes(), mod: s.now()}
	return nil
}

// NewRangeReader implements blob.Store.
func (s *Store) NewRangeReader(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	if err := s.begin(ctx, name); err != nil {
		return nil, fmt.Errorf("memblob: read: %w", err)
	}
	if err := driver.CheckOffset(name, off); err != nil {
		return nil, fmt.Errorf("memblob: %w", err)
	}
	f := s.fault(OpRead, name)
	if f != nil && f.AfterBytes <= 0 {
		return nil, fmt.Errorf("memblob: read %q: %w", name, f.err())
	}
	s.mu.RLock()
	o, ok := s.objects[name]
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("memblob: read %q: %w", name, blob.ErrNotFound)
	}
	n, err := driver.Span(name, off, length, int64(len(o.data)))
	if err != nil {
		return nil, fmt.Errorf("memblob: %w", err)
	}
	var rd io.Reader = bytes.NewReader(o.data[off : off+n])
	if f != nil {
		rd = io.MultiReader(io.LimitReader(rd, f.AfterBytes), errReader{fmt.Errorf("memblob: read %q: %w", name, f.err())})
	}
	return io.NopCloser(rd), nil
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, name string) (blob.Attrs, error) {
	if err := s.begin(ctx, name); err != nil {
		return blob.Attrs{}, fmt.Errorf("memblob: stat: %w", err)
	}
	if f := s.fault(OpStat, name); f != nil {
		return blob.Attrs{}, fmt.Errorf("memblob: stat %q: %w", name, f.err())
	}
	s.mu.RLock()
	o, ok := s.objects[name]
	s.mu.RUnlock()
	if !ok {
		return blob.Attrs{}, fmt.Errorf("memblob: stat %q: %w", name, blob.ErrNotFound)
	}
	return blob.Attrs{Name: name, Size: int64(len(o.data)), Modified: o.mod}, nil
}

// List implements blob.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]blob.Attrs, error) {
	if err := s.closed.Check("memblob"); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memblob: list: %w", err)
	}
	if _, err := driver.ListPrefix("", prefix); err != nil {
		return nil, fmt.Errorf("memblob: %w", err)
	}
	if f := s.fault(OpList, prefix); f != nil {
		return nil, fmt.Errorf("memblob: list %q: %w", prefix, f.err())
	}
	s.mu.RLock()
	var out []blob.Attrs
	for name, o := range s.objects {
		if strings.HasPrefix(name, prefix) {
			out = append(out, blob.Attrs{Name: name, Size: int64(len(o.data)), Modified: o.mod})
		}
	}
	s.mu.RUnlock()
	driver.SortAttrs(out)
	return out, nil
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := s.begin(ctx, name); err != nil {
		return fmt.Errorf("memblob: delete: %w", err)
	}
	if f := s.fault(OpDelete, name); f != nil {
		return fmt.Errorf("memblob: delete %q: %w", name, f.err())
	}
	s.mu.Lock()
	delete(s.objects, name)
	s.mu.Unlock()
	return nil
}

// Close implements blob.Store: it drops every object.
func (s *Store) Close() error {
	if s.closed.Close() {
		s.mu.Lock()
		s.objects = nil
		s.mu.Unlock()
	}
	return nil
}

// begin runs the checks every named operation starts with.
func (s *Store) begin(ctx context.Context, name string) error {
	if err := s.closed.Check("memblob"); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := driver.Key("", name)
	return err
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
