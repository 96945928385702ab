package blobopen

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"go.uber.org/goleak"
	"google.golang.org/api/option"

	"github.com/stratamesh/strata/tiered/blob"
	"github.com/stratamesh/strata/tiered/blob/fsblob"
	"github.com/stratamesh/strata/tiered/blob/gcsblob"
	"github.com/stratamesh/strata/tiered/blob/memblob"
	"github.com/stratamesh/strata/tiered/blob/s3blob"
)

func TestMain(m *testing.M) {
	// fake-gcs-server pulls in opencensus, whose init starts a worker.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// roundTrip puts, reads, lists and deletes one object through s.
func roundTrip(t *testing.T, s blob.Store) {
	t.Helper()
	ctx := context.Background()
	if err := s.Put(ctx, "ledgers/1", strings.NewReader("entry data"), -1); err != nil {
		t.Fatalf("Put: %v", err)
	}
	rc, err := s.NewRangeReader(ctx, "ledgers/1", 6, -1)
	if err != nil {
		t.Fatalf("NewRangeReader: %v", err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(got) != "data" {
		t.Fatalf("read %q, %v; want \"data\"", got, err)
	}
	as, err := s.List(ctx, "ledgers/")
	if err != nil || len(as) != 1 || as[0].Name != "ledgers/1" || as[0].Size != 10 {
		t.Fatalf("List = %+v, %v", as, err)
	}
	if err := s.Delete(ctx, "ledgers/1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Stat(ctx, "ledgers/1"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Stat after Delete: %v", err)
	}
}

func open(t *testing.T, cfg blob.Config, opts ...Option) blob.Store {
	t.Helper()
	s, err := Open(context.Background(), cfg, opts...)
	if err != nil {
		t.Fatalf("Open(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpenMem(t *testing.T) {
	s := open(t, blob.Config{Kind: blob.KindMem})
	if _, ok := s.(*memblob.Store); !ok {
		t.Fatalf("got %T", s)
	}
	roundTrip(t, s)
}

func TestOpenFSWithPrefix(t *testing.T) {
	dir := t.TempDir()
	s := open(t, blob.Config{Kind: blob.KindFS, Dir: dir, Prefix: "/mesh/us-east/"})
	if _, ok := s.(*fsblob.Store); !ok {
		t.Fatalf("got %T", s)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "x", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "mesh", "us-east", "x")); err != nil {
		t.Fatalf("the prefix is not a sub-directory: %v", err)
	}
	roundTrip(t, s)
}

// fakeS3 starts an in-process S3-compatible server with one bucket.
func fakeS3(t *testing.T, bucket string) string {
	t.Helper()
	be := s3mem.New()
	if err := be.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(be, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(srv.Close)
	return srv.URL
}

// isolateAWS points the SDK's standard chain at test-only values: static
// keys in the environment, no shared files, no instance metadata.
func isolateAWS(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRETENV")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func TestOpenS3StandardChain(t *testing.T) {
	isolateAWS(t)
	url := fakeS3(t, "acme-us-east")
	s := open(t, blob.Config{Kind: blob.KindS3, Bucket: "acme-us-east", Prefix: "us-east", Endpoint: url, PathStyle: true})
	if _, ok := s.(*s3blob.Store); !ok {
		t.Fatalf("got %T", s)
	}
	roundTrip(t, s)
}

func TestOpenS3StaticCredentials(t *testing.T) {
	url := fakeS3(t, "acme")
	s := open(t, blob.Config{Kind: blob.KindS3, Bucket: "acme", Region: "eu-west-1", Endpoint: url, PathStyle: true},
		WithS3Credentials(credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")))
	roundTrip(t, s)
}

func fakeGCS(t *testing.T, bucket string) *fakestorage.Server {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http", Host: "127.0.0.1", PublicHost: "127.0.0.1",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: bucket})
	return srv
}

func TestOpenGCSEndpoint(t *testing.T) {
	srv := fakeGCS(t, "acme-eu-west")
	s := open(t, blob.Config{Kind: blob.KindGCS, Bucket: "acme-eu-west", Prefix: "eu-west", Endpoint: srv.URL()},
		WithGCSClientOptions(option.WithoutAuthentication()))
	if _, ok := s.(*gcsblob.Store); !ok {
		t.Fatalf("got %T", s)
	}
	roundTrip(t, s)
}

func TestOpenGCSHonoursEmulatorHost(t *testing.T) {
	srv := fakeGCS(t, "acme-emu")
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	// No endpoint and no options: the library finds the emulator in the
	// environment and skips authentication.
	t.Setenv("STORAGE_EMULATOR_HOST", u.Host)
	roundTrip(t, open(t, blob.Config{Kind: blob.KindGCS, Bucket: "acme-emu"}))
}

func TestOpenRejectsBadConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  blob.Config
		want string
	}{
		{blob.Config{}, "kind is required"},
		{blob.Config{Kind: "minio"}, `unknown kind "minio"`},
		{blob.Config{Kind: blob.KindS3, Endpoint: "http://127.0.0.1:9000"}, "kind s3: bucket is required"},
		{blob.Config{Kind: blob.KindGCS, Prefix: "p"}, "kind gcs: bucket is required"},
		{blob.Config{Kind: blob.KindFS}, "kind fs: dir is required"},
		{blob.Config{Kind: blob.KindFS, Dir: "/tmp/x", Bucket: "acme"}, "bucket does not apply"},
	} {
		s, err := Open(context.Background(), c.cfg)
		if err == nil {
			s.Close()
		}
		if !errors.Is(err, blob.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%+v) = %v, want ErrInvalidConfig saying %q", c.cfg, err, c.want)
		}
	}
	// A directory that cannot be created.
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), blob.Config{Kind: blob.KindFS, Dir: f}); err == nil || !strings.Contains(err.Error(), "tier kind fs") {
		t.Errorf("Open(fs on a file) = %v, want an error naming the kind", err)
	}
}
