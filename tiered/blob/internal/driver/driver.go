// Package driver holds the small pieces every blob driver shares: name
// checks, Put's body accounting and range arithmetic. It knows nothing of
// any backend.
package driver

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/stratamesh/strata/tiered/blob"
)

// Key checks name with blob.ValidateName and returns prefix+name, failing
// with blob.ErrInvalidName when the whole key exceeds blob.MaxNameLen.
// prefix must come from blob.CleanPrefix.
func Key(prefix, name string) (string, error) {
	if err := blob.ValidateName(name); err != nil {
		return "", err
	}
	if len(prefix)+len(name) > blob.MaxNameLen {
		return "", fmt.Errorf("%w: prefix %q and name together are %d bytes, the limit is %d",
			blob.ErrInvalidName, prefix, len(prefix)+len(name), blob.MaxNameLen)
	}
	return prefix + name, nil
}

// ListPrefix checks a List prefix (any string without NUL or control
// characters; "" is all) and returns storePrefix+prefix.
func ListPrefix(storePrefix, prefix string) (string, error) {
	for i := 0; i < len(prefix); i++ {
		if c := prefix[i]; c < 0x20 || c == 0x7f {
			return "", fmt.Errorf("%w: list prefix %q contains control character %#02x", blob.ErrInvalidName, prefix, c)
		}
	}
	return storePrefix + prefix, nil
}

// Body wraps Put's reader: it fails Reads once ctx is done and enforces
// the declared size (ErrSizeMismatch for a longer or shorter body). N is
// the number of bytes read so far.
type Body struct {
	ctx  context.Context
	r    io.Reader
	size int64
	N    int64
}

// NewBody wraps r; size < 0 means unknown.
func NewBody(ctx context.Context, r io.Reader, size int64) *Body {
	return &Body{ctx: ctx, r: r, size: size}
}

func (b *Body) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := b.r.Read(p)
	b.N += int64(n)
	if b.size >= 0 {
		if b.N > b.size {
			return n, fmt.Errorf("%w: more than %d bytes", blob.ErrSizeMismatch, b.size)
		}
		if err == io.EOF && b.N < b.size {
			return n, fmt.Errorf("%w: %d bytes, want %d", blob.ErrSizeMismatch, b.N, b.size)
		}
	}
	return n, err
}

// Span checks a read of length bytes at off (length < 0: to the end) of
// an object of size bytes and returns how many bytes it covers, cut at
// the end. off < 0 or off > size fail with blob.ErrInvalidRange.
func Span(name string, off, length, size int64) (int64, error) {
	if off < 0 || off > size {
		return 0, fmt.Errorf("%w: offset %d of %q, size %d", blob.ErrInvalidRange, off, name, size)
	}
	n := size - off
	if length >= 0 && length < n {
		n = length
	}
	return n, nil
}

// CheckOffset rejects a negative offset before any I/O.
func CheckOffset(name string, off int64) error {
	if off < 0 {
		return fmt.Errorf("%w: negative offset %d of %q", blob.ErrInvalidRange, off, name)
	}
	return nil
}

// Empty returns a reader that is at EOF.
func Empty() io.ReadCloser { return io.NopCloser(strings.NewReader("")) }

// SortAttrs sorts by name.
func SortAttrs(as []blob.Attrs) {
	slices.SortFunc(as, func(a, b blob.Attrs) int { return cmp.Compare(a.Name, b.Name) })
}

// Closed is a store's closed flag.
type Closed struct{ closed atomic.Bool }

// Close marks the store closed and reports whether it was open.
func (c *Closed) Close() bool { return c.closed.CompareAndSwap(false, true) }

// Check returns an error wrapping blob.ErrClosed once closed.
func (c *Closed) Check(driver string) error {
	if c.closed.Load() {
		return fmt.Errorf("%s: %w", driver, blob.ErrClosed)
	}
	return nil
}
