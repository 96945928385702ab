package gcsblob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"go.uber.org/goleak"
	"google.golang.org/api/option"

	"github.com/stratamesh/strata/tiered/blob"
	"github.com/stratamesh/strata/tiered/blob/blobtest"
)

func TestMain(m *testing.M) {
	// fake-gcs-server pulls in opencensus, whose init starts a worker.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// newFakeGCS starts an in-process GCS-compatible server on loopback
// (plain HTTP). Its public host is 127.0.0.1 so that the client's XML
// API reads (http://127.0.0.1:port/bucket/object) are routed to it. It
// keeps objects in memory: its directory backend rewrites a file in
// place, so a read racing an overwrite could see part of both (GCS
// replaces objects atomically; ConcurrentOverwrite checks we rely on
// that). The memory backend is slower to list 1,100 objects.
func newFakeGCS(t *testing.T) *fakestorage.Server {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme:     "http",
		Host:       "127.0.0.1",
		PublicHost: "127.0.0.1",
	})
	if err != nil {
		t.Fatalf("fake GCS: %v", err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

var bucketSeq atomic.Int64

func newBucket(srv *fakestorage.Server) string {
	name := fmt.Sprintf("bucket-%d", bucketSeq.Add(1))
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: name})
	return name
}

func options(srv *fakestorage.Server, bucket string) Options {
	return Options{
		Bucket:        bucket,
		Endpoint:      srv.URL(), // no path: /storage/v1/ is appended
		ClientOptions: []option.ClientOption{option.WithoutAuthentication()},
		ChunkSize:     4 << 20, // LargeSize objects take several chunks
	}
}

func newStore(t *testing.T, o Options) *Store {
	t.Helper()
	s, err := New(context.Background(), o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store {
		srv := newFakeGCS(t)
		return newStore(t, options(srv, newBucket(srv)))
	})
}

func TestConformanceWithPrefix(t *testing.T) {
	srv := newFakeGCS(t)
	bucket := newBucket(srv)
	n := 0
	blobtest.Run(t, func(t *testing.T) blob.Store {
		n++
		o := options(srv, bucket) // one shared bucket: the prefixes keep the stores apart
		o.Prefix = fmt.Sprintf("region-%d", n)
		return newStore(t, o)
	})
}

func TestListPaging(t *testing.T) {
	srv := newFakeGCS(t)
	o := options(srv, newBucket(srv))
	o.ListPageSize = 7
	testListPaging(t, newStore(t, o))
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
	srv := newFakeGCS(t)
	bucket := newBucket(srv)
	east, west := options(srv, bucket), options(srv, bucket)
	east.Prefix, west.Prefix = "mesh/us-east", "/mesh/eu-west/"
	se, sw := newStore(t, east), newStore(t, west)
	for _, s := range []*Store{se, sw} {
		if err := s.Put(ctx, "ledgers/1", strings.NewReader(s.prefix), int64(len(s.prefix))); err != nil {
			t.Fatal(err)
		}
	}
	objs, _, err := srv.ListObjectsWithOptions(bucket, fakestorage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Name)
	}
	slices.Sort(keys)
	if want := []string{"mesh/eu-west/ledgers/1", "mesh/us-east/ledgers/1"}; !slices.Equal(keys, want) {
		t.Fatalf("bucket objects = %q, want %q", keys, want)
	}
	as, err := sw.List(ctx, "")
	if err != nil || len(as) != 1 || as[0].Name != "ledgers/1" {
		t.Fatalf("west List = %+v, %v", as, err)
	}
}

func TestJSONReads(t *testing.T) {
	// The same reads through the JSON API (storage.WithJSONReads) instead
	// of the XML one.
	srv := newFakeGCS(t)
	o := options(srv, newBucket(srv))
	o.ClientOptions = append(o.ClientOptions, storage.WithJSONReads())
	s := newStore(t, o)
	ctx := context.Background()
	data := blobtest.Data("j", 5000)
	if err := s.Put(ctx, "j", strings.NewReader(string(data)), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	rc, err := s.NewRangeReader(ctx, "j", 1000, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	buf := make([]byte, 20)
	n, _ := rc.Read(buf)
	if string(buf[:n]) != string(data[1000:1000+n]) || n == 0 {
		t.Fatalf("JSON ranged read: %d bytes", n)
	}
	if _, err := s.NewRangeReader(ctx, "missing", 0, -1); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("JSON read of a missing object: %v", err)
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{}, "bucket is required"},
		{Options{Bucket: "b", Prefix: "a//b"}, "prefix"},
		{Options{Bucket: "b", Endpoint: "127.0.0.1:4443"}, "want an http:// or https:// URL"},
		{Options{Bucket: "b", ListPageSize: -1}, "ListPageSize"},
	} {
		_, err := New(context.Background(), c.o)
		if !errors.Is(err, blob.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig mentioning %q", c.o, err, c.want)
		}
	}
}

func TestEndpointURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4443":                      "http://127.0.0.1:4443/storage/v1/",
		"http://127.0.0.1:4443/":                     "http://127.0.0.1:4443/storage/v1/",
		"https://storage.googleapis.com/storage/v1/": "https://storage.googleapis.com/storage/v1/",
		"https://proxy.example/gcs/storage/v1/":      "https://proxy.example/gcs/storage/v1/",
	} {
		if got := endpointURL(in); got != want {
			t.Errorf("endpointURL(%q) = %q, want %q", in, got, want)
		}
	}
}
