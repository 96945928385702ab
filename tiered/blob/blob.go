package blob

import (
	"context"
	"errors"
	"io"
	"time"
)

// Store is one bucket-like namespace of immutable objects, addressed by
// slash-separated names (see ValidateName). Every tier driver implements
// it; callers see no difference between drivers except speed.
//
// All methods are safe for concurrent use. Every method fails with an
// error wrapping ErrInvalidName for a name that ValidateName rejects,
// and with one wrapping ErrClosed after Close.
type Store interface {
	// Put writes object name with the bytes of r, replacing any object of
	// that name. size is the body's length in bytes when known (>= 0) or
	// -1 when unknown; a known size that r does not match exactly fails
	// with ErrSizeMismatch. Put is atomic: readers see the old object or
	// the whole new one, never part of one, and after any error (r
	// failing, ctx cancelled, the backend refusing) no partial object is
	// visible: name holds what it held before (the old object, or none),
	// except that when only the answer to the final commit request was
	// lost (network drivers) the whole new object may be there. Put
	// reads r to EOF or to the first error and does not close it.
	Put(ctx context.Context, name string, r io.Reader, size int64) error

	// NewRangeReader opens object name for reading length bytes starting
	// at byte off (length < 0: to the end). A range reaching past the end
	// is cut at the end: the reader returns the bytes that exist, then
	// io.EOF. off == size (and length == 0) give a reader that returns
	// io.EOF at once. off < 0 or off > size fail with ErrInvalidRange; a
	// missing object with ErrNotFound. The caller must Close the reader.
	// For the network drivers ctx also bounds the reading: cancelling it
	// makes later Reads fail.
	NewRangeReader(ctx context.Context, name string, off, length int64) (io.ReadCloser, error)

	// Stat returns the attributes of object name, or ErrNotFound.
	Stat(ctx context.Context, name string) (Attrs, error)

	// List returns every object whose name starts with prefix (a plain
	// string prefix: "a/b" matches "a/b", "a/bc" and "a/b/c"; "" matches
	// all), sorted by name, across all of the backend's pages. Objects
	// put or deleted while List runs may or may not be in the result.
	List(ctx context.Context, prefix string) ([]Attrs, error)

	// Delete removes object name. Deleting a missing object is not an
	// error.
	Delete(ctx context.Context, name string) error

	// Close releases the store's resources (idle connections, clients it
	// created). It does not delete anything. Close is idempotent; calls
	// made after it fail with ErrClosed. Readers opened before Close
	// should be closed by the caller first.
	Close() error
}

// Attrs describes one object.
type Attrs struct {
	// Name is the object's name as the caller gave it to Put (without the
	// driver's configured prefix).
	Name string
	// Size is the object's length in bytes.
	Size int64
	// Modified is when the object was last written, as the backend
	// records it (S3: second precision; fs: the file's mtime).
	Modified time.Time
}

// Errors. Drivers wrap them with their own detail (name, bucket, backend
// message); test for them with errors.Is.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("blob: object not found")
	// ErrInvalidName: the name breaks ValidateName's rules.
	ErrInvalidName = errors.New("blob: invalid object name")
	// ErrInvalidRange: a read offset below 0 or past the object's end.
	ErrInvalidRange = errors.New("blob: invalid range")
	// ErrSizeMismatch: Put's reader did not yield exactly size bytes.
	ErrSizeMismatch = errors.New("blob: body length differs from the given size")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("blob: store closed")
	// ErrInvalidConfig: a Config (or a driver's options) is unusable.
	ErrInvalidConfig = errors.New("blob: invalid config")
)
