package tiered

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// ObjectStore is what offload and tiered reads need of a blob store
// (tiered/blob.Store has these methods, so every tier driver satisfies it).
// Names are slash-separated keys. Implementations are safe for concurrent
// use.
type ObjectStore interface {
	// Put writes object name from r: size bytes if size ≥ 0, else
	// until r's EOF. Atomic: after an error nothing, no partial object,
	// is visible under name. A failing r (its error returned) fails the
	// Put.
	Put(ctx context.Context, name string, r io.Reader, size int64) error
	// NewRangeReader reads length bytes of object name from byte offset
	// off (length -1: to the end).
	NewRangeReader(ctx context.Context, name string, off, length int64) (io.ReadCloser, error)
	// Delete removes object name; a missing object is not an error.
	Delete(ctx context.Context, name string) error
}

// Delete removes base's index object, then its data object (so that no
// new Reader opens while the data goes). Both are attempted; the errors
// are joined. Deleting objects that do not exist is not an error. Readers
// still open on base fail on blocks they have not cached; call
// BlockCache.Drop(DataObjectName(base)) on a shared cache afterwards.
func Delete(ctx context.Context, store ObjectStore, base string) error {
	if base == "" {
		return fmt.Errorf("%w: empty base name", ErrInvalid)
	}
	var errs []error
	for _, name := range []string{IndexObjectName(base), DataObjectName(base)} {
		if err := store.Delete(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("tiered: delete %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// maxIndexBytes is the largest index object DecodeIndex accepts.
const maxIndexBytes = IndexHeaderSize + IndexPointSize*MaxIndexPoints

// readIndexObject reads and decodes index object name, reading at most
// maxIndexBytes+1 bytes whatever the store holds.
func readIndexObject(ctx context.Context, store ObjectStore, name string) ([]byte, Index, error) {
	rc, err := store.NewRangeReader(ctx, name, 0, -1)
	if err != nil {
		return nil, Index{}, fmt.Errorf("tiered: read %s: %w", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxIndexBytes+1))
	if err != nil {
		return nil, Index{}, fmt.Errorf("tiered: read %s: %w", name, err)
	}
	if len(b) > maxIndexBytes {
		return nil, Index{}, fmt.Errorf("%w: %s: larger than %d bytes", ErrCorrupt, name, maxIndexBytes)
	}
	ix, err := DecodeIndex(b)
	if err != nil {
		return nil, Index{}, fmt.Errorf("%s: %w", name, err)
	}
	return b, ix, nil
}
