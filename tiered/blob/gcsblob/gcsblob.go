package gcsblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/stratamesh/strata/tiered/blob"
	"github.com/stratamesh/strata/tiered/blob/internal/driver"
)

// DefaultChunkSize is Options.ChunkSize's default: 8 MiB.
const DefaultChunkSize = 8 << 20

// Options configure New.
type Options struct {
	// Bucket is the bucket (it must exist). Required.
	Bucket string
	// Prefix is put before every object name ("a" and "a/" both mean
	// "a/"); see blob.Config.Prefix.
	Prefix string
	// Endpoint is the JSON API's base URL. One with no path (or "/")
	// gets "/storage/v1/" appended, so "http://127.0.0.1:4443" names an
	// emulator the way STORAGE_EMULATOR_HOST does. Default: Google's, or
	// STORAGE_EMULATOR_HOST when set (the library then also skips
	// authentication).
	Endpoint string
	// ClientOptions are passed to storage.NewClient after the store's
	// own: option.WithoutAuthentication() for emulators and tests,
	// option.WithCredentialsFile, storage.WithJSONReads(), … Without
	// them credentials come from Application Default Credentials.
	ClientOptions []option.ClientOption
	// Client, when set, is used as is (the caller owns and closes it);
	// Endpoint and ClientOptions must then be empty.
	Client *storage.Client
	// ChunkSize is, in bytes, how much of an upload the client buffers
	// and sends per request: objects up to it go in one request, larger
	// ones as a resumable upload of such chunks (each retried on
	// transient errors). Default DefaultChunkSize; negative: no
	// buffering, one streaming request without retries.
	ChunkSize int
	// ListPageSize is how many objects one list request asks for;
	// 0 leaves the server's default (1000).
	ListPageSize int
}

// Store is a blob.Store over a GCS bucket.
type Store struct {
	client    *storage.Client
	ownClient bool
	bucket    *storage.BucketHandle
	name      string // bucket name, for messages
	prefix    string // cleaned: "" or "p/"
	chunkSize int
	pageSize  int
	closed    driver.Closed
}

var _ blob.Store = (*Store)(nil)

// New returns a store for o.Bucket. It sends no request (credentials may
// be looked up): a wrong bucket shows up on the first operation.
func New(ctx context.Context, o Options) (*Store, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	prefix, _ := blob.CleanPrefix(o.Prefix) // checked by validate
	s := &Store{name: o.Bucket, prefix: prefix, chunkSize: o.ChunkSize, pageSize: o.ListPageSize}
	switch {
	case s.chunkSize == 0:
		s.chunkSize = DefaultChunkSize
	case s.chunkSize < 0:
		s.chunkSize = 0
	}
	s.client = o.Client
	if s.client == nil {
		var opts []option.ClientOption
		if o.Endpoint != "" {
			opts = append(opts, option.WithEndpoint(endpointURL(o.Endpoint)))
		}
		opts = append(opts, o.ClientOptions...)
		c, err := storage.NewClient(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("gcsblob: %w", err)
		}
		s.client, s.ownClient = c, true
	}
	s.bucket = s.client.Bucket(o.Bucket)
	return s, nil
}

func (o Options) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("gcsblob: %w: "+format, append([]any{blob.ErrInvalidConfig}, args...)...))
	}
	if o.Bucket == "" {
		bad("bucket is required")
	}
	if _, err := blob.CleanPrefix(o.Prefix); err != nil {
		bad("prefix: %v", err)
	}
	if o.Endpoint != "" {
		if u, err := url.Parse(o.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("endpoint %q: want an http:// or https:// URL", o.Endpoint)
		}
	}
	if o.Client != nil && (o.Endpoint != "" || len(o.ClientOptions) > 0) {
		bad("Client and Endpoint/ClientOptions are exclusive")
	}
	if o.ListPageSize < 0 {
		bad("ListPageSize %d is negative", o.ListPageSize)
	}
	return errors.Join(errs...)
}

// endpointURL appends the JSON API path to an endpoint that has none.
func endpointURL(e string) string {
	u, err := url.Parse(e)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return e
	}
	u.Path = "/storage/v1/"
	return u.String()
}

// object checks the store state, ctx and name, and returns the handle.
func (s *Store) object(ctx context.Context, op, name string) (*storage.ObjectHandle, error) {
	if err := s.closed.Check("gcsblob"); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("gcsblob: %s %q: %w", op, name, err)
	}
	k, err := driver.Key(s.prefix, name)
	if err != nil {
		return nil, fmt.Errorf("gcsblob: %s: %w", op, err)
	}
	return s.bucket.Object(k), nil
}

// Put implements blob.Store with a storage.Writer whose context is
// cancelled on any error, which abandons the upload: the object appears
// only when Close succeeds.
func (s *Store) Put(ctx context.Context, name string, r io.Reader, size int64) error {
	o, err := s.object(ctx, "put", name)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := o.NewWriter(wctx)
	w.ChunkSize = s.chunkSize
	if size >= 0 && size < int64(s.chunkSize) {
		w.ChunkSize = int(size) + 1 // one request, and no larger buffer than needed
	}
	if _, err := io.Copy(w, driver.NewBody(ctx, r, size)); err != nil {
		cancel()
		_ = w.Close() // waits for the upload goroutine; fails as cancelled
		return s.wrap("put", name, err)
	}
	if err := w.Close(); err != nil {
		return s.wrap("put", name, err)
	}
	return nil
}

// NewRangeReader implements blob.Store. The reader streams from the
// response: cancelling ctx ends it.
func (s *Store) NewRangeReader(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	o, err := s.object(ctx, "read", name)
	if err != nil {
		return nil, err
	}
	if err := driver.CheckOffset(name, off); err != nil {
		return nil, fmt.Errorf("gcsblob: %w", err)
	}
	if length == 0 {
		return s.emptyRead(ctx, name, off)
	}
	rd, err := o.NewRangeReader(ctx, off, length)
	if err != nil {
		var ge *googleapi.Error
		if errors.As(err, &ge) && ge.Code == http.StatusRequestedRangeNotSatisfiable {
			// Refused: a range at or past the end, also at off == size,
			// which blob.Store reads as empty.
			return s.emptyRead(ctx, name, off)
		}
		return nil, s.wrap("read", name, err)
	}
	return rd, nil
}

// emptyRead answers a read that covers no bytes.
func (s *Store) emptyRead(ctx context.Context, name string, off int64) (io.ReadCloser, error) {
	a, err := s.Stat(ctx, name)
	if err != nil {
		return nil, err
	}
	if _, err := driver.Span(name, off, 0, a.Size); err != nil {
		return nil, fmt.Errorf("gcsblob: %w", err)
	}
	return driver.Empty(), nil
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, name string) (blob.Attrs, error) {
	o, err := s.object(ctx, "stat", name)
	if err != nil {
		return blob.Attrs{}, err
	}
	a, err := o.Attrs(ctx)
	if err != nil {
		return blob.Attrs{}, s.wrap("stat", name, err)
	}
	return blob.Attrs{Name: name, Size: a.Size, Modified: a.Updated}, nil
}

// List implements blob.Store, following every page.
func (s *Store) List(ctx context.Context, prefix string) ([]blob.Attrs, error) {
	if err := s.closed.Check("gcsblob"); err != nil {
		return nil, err
	}
	full, err := driver.ListPrefix(s.prefix, prefix)
	if err != nil {
		return nil, fmt.Errorf("gcsblob: %w", err)
	}
	q := &storage.Query{Prefix: full}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated"}); err != nil {
		return nil, fmt.Errorf("gcsblob: %w", err)
	}
	it := s.bucket.Objects(ctx, q)
	if s.pageSize > 0 {
		it.PageInfo().MaxSize = s.pageSize
	}
	var out []blob.Attrs
	for {
		a, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("gcsblob: list %q in bucket %s: %w", prefix, s.name, err)
		}
		if len(a.Name) < len(full) || a.Name[:len(full)] != full {
			continue
		}
		out = append(out, blob.Attrs{Name: a.Name[len(s.prefix):], Size: a.Size, Modified: a.Updated})
	}
	driver.SortAttrs(out)
	return out, nil
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, name string) error {
	o, err := s.object(ctx, "delete", name)
	if err != nil {
		return err
	}
	if err := o.Delete(ctx); err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return s.wrap("delete", name, err)
	}
	return nil
}

// Close implements blob.Store: it closes the client if the store made it.
func (s *Store) Close() error {
	if s.closed.Close() && s.ownClient {
		if err := s.client.Close(); err != nil {
			return fmt.Errorf("gcsblob: close: %w", err)
		}
	}
	return nil
}

// wrap adds the operation, name and bucket to err, mapping
// storage.ErrObjectNotExist to blob.ErrNotFound.
func (s *Store) wrap(op, name string, err error) error {
	if errors.Is(err, storage.ErrObjectNotExist) {
		return fmt.Errorf("gcsblob: %s %q in bucket %s: %w (%v)", op, name, s.name, blob.ErrNotFound, err)
	}
	return fmt.Errorf("gcsblob: %s %q in bucket %s: %w", op, name, s.name, err)
}
