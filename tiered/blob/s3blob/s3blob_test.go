package s3blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"go.uber.org/goleak"

	"github.com/stratamesh/strata/tiered/blob"
	"github.com/stratamesh/strata/tiered/blob/blobtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeS3 is an in-process S3-compatible server on loopback (real HTTP).
type fakeS3 struct {
	srv     *httptest.Server
	backend *s3mem.Backend
}

func newFakeS3(t *testing.T) *fakeS3 {
	t.Helper()
	be := s3mem.New()
	faker := gofakes3.New(be, gofakes3.WithLogger(gofakes3.DiscardLog()))
	srv := httptest.NewServer(faker.Server())
	t.Cleanup(srv.Close)
	return &fakeS3{srv: srv, backend: be}
}

var bucketSeq atomic.Int64

// bucket creates a new bucket and returns its name.
func (f *fakeS3) bucket(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("bucket-%d", bucketSeq.Add(1))
	if err := f.backend.CreateBucket(name); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return name
}

func (f *fakeS3) options(bucket string) Options {
	return Options{
		Bucket:      bucket,
		Endpoint:    f.srv.URL,
		PathStyle:   true,
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", ""),
		PartSize:    MinPartSize,
	}
}

func (f *fakeS3) store(t *testing.T, o Options) *Store {
	t.Helper()
	s, err := New(context.Background(), o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// raw is a plain SDK client of the fake, to look behind the store.
func (f *fakeS3) raw() *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(f.srv.URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", ""),
	})
}

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store {
		f := newFakeS3(t)
		return f.store(t, f.options(f.bucket(t)))
	})
}

func TestConformanceWithPrefix(t *testing.T) {
	f := newFakeS3(t)
	bucket := f.bucket(t)
	n := 0
	blobtest.Run(t, func(t *testing.T) blob.Store {
		n++
		o := f.options(bucket) // one shared bucket: the prefixes keep the stores apart
		o.Prefix = fmt.Sprintf("/region-%d/", n)
		return f.store(t, o)
	})
}

func TestMultipartAbortLeavesNoUpload(t *testing.T) {
	ctx := context.Background()
	f := newFakeS3(t)
	bucket := f.bucket(t)
	s := f.store(t, f.options(bucket))
	data := blobtest.Data("mp", 3*MinPartSize+123)
	// A reader that breaks in the third part.
	r := &breakAt{r: bytes.NewReader(data), n: 2*MinPartSize + 10}
	if err := s.Put(ctx, "mp", r, -1); !errors.Is(err, errBreak) {
		t.Fatalf("Put: %v, want errBreak", err)
	}
	ups, err := f.raw().ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("ListMultipartUploads: %v", err)
	}
	if len(ups.Uploads) != 0 {
		t.Fatalf("%d multipart uploads left after a failed Put, want 0", len(ups.Uploads))
	}
	// And a whole one of several parts reads back.
	if err := s.Put(ctx, "mp", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put: %v", err)
	}
	rc, err := s.NewRangeReader(ctx, "mp", MinPartSize-5, 2*MinPartSize)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got bytes.Buffer
	if _, err := got.ReadFrom(rc); err != nil || !bytes.Equal(got.Bytes(), data[MinPartSize-5:3*MinPartSize-5]) {
		t.Fatalf("read across parts: %d bytes, %v", got.Len(), err)
	}
}

var errBreak = errors.New("break")

type breakAt struct {
	r *bytes.Reader
	n int
}

func (b *breakAt) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, errBreak
	}
	k, err := b.r.Read(p[:min(len(p), b.n)])
	b.n -= k
	return k, err
}

func TestListPaging(t *testing.T) {
	f := newFakeS3(t)
	o := f.options(f.bucket(t))
	o.ListPageSize = 7
	testListPaging(t, f.store(t, o))
}

// testListPaging lists 50 objects 7 at a time.
func testListPaging(t *testing.T, s blob.Store) {
	ctx := context.Background()
	var want []string
	for i := range 50 {
		name := fmt.Sprintf("p/%02d", i)
		want = append(want, name)
		if err := s.Put(ctx, name, strings.NewReader(name), int64(len(name))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(ctx, "q", strings.NewReader("q"), 1); err != nil {
		t.Fatal(err)
	}
	as, err := s.List(ctx, "p/")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range as {
		got = append(got, a.Name)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
}

func TestPrefixIsolatesStoresInOneBucket(t *testing.T) {
	ctx := context.Background()
	f := newFakeS3(t)
	bucket := f.bucket(t)
	east, west := f.options(bucket), f.options(bucket)
	east.Prefix, west.Prefix = "mesh/us-east", "mesh/eu-west/"
	se, sw := f.store(t, east), f.store(t, west)
	for _, s := range []*Store{se, sw} {
		if err := s.Put(ctx, "ledgers/1", strings.NewReader(s.prefix), int64(len(s.prefix))); err != nil {
			t.Fatal(err)
		}
	}
	as, err := se.List(ctx, "")
	if err != nil || len(as) != 1 || as[0].Name != "ledgers/1" {
		t.Fatalf("east List = %+v, %v", as, err)
	}
	out, err := f.raw().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	if want := []string{"mesh/eu-west/ledgers/1", "mesh/us-east/ledgers/1"}; !slices.Equal(keys, want) {
		t.Fatalf("bucket keys = %q, want %q", keys, want)
	}
	if err := sw.Delete(ctx, "ledgers/1"); err != nil {
		t.Fatal(err)
	}
	if _, err := se.Stat(ctx, "ledgers/1"); err != nil {
		t.Fatalf("east object after deleting west's: %v", err)
	}
}

func TestMissingBucketIsNotNotFound(t *testing.T) {
	ctx := context.Background()
	f := newFakeS3(t)
	s := f.store(t, f.options("no-such-bucket"))
	err := s.Put(ctx, "x", strings.NewReader("x"), 1)
	if err == nil || errors.Is(err, blob.ErrNotFound) || !strings.Contains(err.Error(), "no-such-bucket") {
		t.Fatalf("Put to a missing bucket: %v; want an error naming the bucket, not ErrNotFound", err)
	}
	if _, err := s.List(ctx, ""); err == nil || errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("List of a missing bucket: %v", err)
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{}, "bucket is required"},
		{Options{Bucket: "b", Prefix: "a/../b"}, "prefix"},
		{Options{Bucket: "b", Endpoint: "localhost:9000"}, "want an http:// or https:// URL"},
		{Options{Bucket: "b", PartSize: 1 << 20}, "PartSize"},
		{Options{Bucket: "b", ListPageSize: 5000}, "ListPageSize"},
	} {
		_, err := New(context.Background(), c.o)
		if !errors.Is(err, blob.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig mentioning %q", c.o, err, c.want)
		}
	}
}
