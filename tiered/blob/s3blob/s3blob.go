package s3blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/stratamesh/strata/tiered/blob"
	"github.com/stratamesh/strata/tiered/blob/internal/driver"
)

// Defaults and limits.
const (
	// DefaultRegion is the signing region when neither Options.Region
	// nor the SDK's chain gives one; MinIO and R2 accept it.
	DefaultRegion = "us-east-1"
	// DefaultPartSize is Options.PartSize's default: 8 MiB.
	DefaultPartSize = 8 << 20
	// MinPartSize is S3's smallest multipart part (all but the last): 5 MiB.
	MinPartSize = 5 << 20
	// MaxPartSize is S3's largest part: 5 GiB.
	MaxPartSize = 5 << 30
	// MaxParts is S3's most parts per upload.
	MaxParts = 10000
	// DefaultListPageSize is Options.ListPageSize's default (S3's maximum).
	DefaultListPageSize = 1000
)

// Options configure New.
type Options struct {
	// Bucket is the bucket (it must exist). Required.
	Bucket string
	// Prefix is put before every object name ("a" and "a/" both mean
	// "a/"); see blob.Config.Prefix.
	Prefix string
	// Region is the signing region. Default: the SDK's chain
	// (AWS_REGION, the shared config file), else DefaultRegion.
	Region string
	// Endpoint is the service's base URL (e.g. http://127.0.0.1:9000 for
	// MinIO, https://<account>.r2.cloudflarestorage.com). Default: AWS.
	// With an endpoint set the SDK computes request checksums only where
	// the API requires them, because S3-compatible services differ in
	// which of AWS's newer checksum headers they accept.
	Endpoint string
	// PathStyle addresses the bucket in the URL path. Needed by most
	// self-hosted services and by any endpoint whose host is an IP.
	PathStyle bool
	// Credentials, when set, are used instead of the SDK's standard
	// chain (environment, shared files, SSO, web identity, container and
	// instance roles), and then nothing is read from the environment or
	// ~/.aws: tests pass credentials.NewStaticCredentialsProvider.
	Credentials aws.CredentialsProvider
	// HTTPClient, when set, sends the requests (the caller owns it).
	// Default: a client of the store's own that Close shuts.
	HTTPClient *http.Client
	// PartSize is, in bytes, both the largest object written with one
	// PutObject and the part size of the multipart uploads used above it
	// (unknown sizes included). Put holds one part in memory. Between
	// MinPartSize and MaxPartSize; default DefaultPartSize, which allows
	// objects up to 80 GiB (MaxParts parts).
	PartSize int64
	// ListPageSize is how many keys one ListObjectsV2 request asks for,
	// 1 to 1000; default DefaultListPageSize.
	ListPageSize int32
}

// Store is a blob.Store over an S3 bucket.
type Store struct {
	client   *s3.Client
	bucket   string
	prefix   string // cleaned: "" or "p/"
	partSize int64
	pageSize int32
	ownHTTP  *http.Transport // closed by Close; nil when the caller owns the client
	closed   driver.Closed
}

var _ blob.Store = (*Store)(nil)

// New returns a store for o.Bucket. It sends no request: a wrong bucket
// or bad credentials show up on the first operation.
func New(ctx context.Context, o Options) (*Store, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	prefix, _ := blob.CleanPrefix(o.Prefix) // checked by validate
	s := &Store{bucket: o.Bucket, prefix: prefix, partSize: o.PartSize, pageSize: o.ListPageSize}
	if s.partSize == 0 {
		s.partSize = DefaultPartSize
	}
	if s.pageSize == 0 {
		s.pageSize = DefaultListPageSize
	}
	tune := func(so *s3.Options) {
		so.UsePathStyle = o.PathStyle
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
			so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
		if so.Region == "" {
			so.Region = DefaultRegion
		}
	}
	if o.Credentials != nil {
		s.client = s3.New(s3.Options{
			Region:      o.Region,
			Credentials: o.Credentials,
			HTTPClient:  s.httpClient(o.HTTPClient, nil),
		}, tune)
		return s, nil
	}
	var load []func(*config.LoadOptions) error
	if o.Region != "" {
		load = append(load, config.WithRegion(o.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("s3blob: loading the AWS configuration: %w", err)
	}
	// The loader may have set up a client with a custom CA bundle
	// (AWS_CA_BUNDLE); keep its transport settings in the store's own.
	cfg.HTTPClient = s.httpClient(o.HTTPClient, cfg.HTTPClient)
	s.client = s3.NewFromConfig(cfg, tune)
	return s, nil
}

// httpClient returns the client the store sends with: the caller's, or
// one of the store's own (which Close can shut) over the transport
// settings of loaded, the SDK's default client when nil.
func (s *Store) httpClient(caller *http.Client, loaded aws.HTTPClient) *http.Client {
	if caller != nil {
		return caller
	}
	b, ok := loaded.(*awshttp.BuildableClient)
	if !ok {
		b = awshttp.NewBuildableClient()
	}
	s.ownHTTP = b.GetTransport()
	return &http.Client{
		Transport: s.ownHTTP,
		// Like the SDK's own client: S3 answers redirects with errors
		// the SDK decodes itself.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func (o Options) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("s3blob: %w: "+format, append([]any{blob.ErrInvalidConfig}, args...)...))
	}
	if o.Bucket == "" {
		bad("bucket is required")
	}
	if _, err := blob.CleanPrefix(o.Prefix); err != nil {
		bad("prefix: %v", err)
	}
	if o.Endpoint != "" && !strings.HasPrefix(o.Endpoint, "http://") && !strings.HasPrefix(o.Endpoint, "https://") {
		bad("endpoint %q: want an http:// or https:// URL", o.Endpoint)
	}
	if o.PartSize != 0 && (o.PartSize < MinPartSize || o.PartSize > MaxPartSize) {
		bad("PartSize %d outside %d..%d bytes", o.PartSize, MinPartSize, MaxPartSize)
	}
	if o.ListPageSize < 0 || o.ListPageSize > 1000 {
		bad("ListPageSize %d outside 1..1000", o.ListPageSize)
	}
	return errors.Join(errs...)
}

// key checks the store state, ctx and name, and returns the object key.
func (s *Store) key(ctx context.Context, op, name string) (string, error) {
	if err := s.closed.Check("s3blob"); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("s3blob: %s %q: %w", op, name, err)
	}
	k, err := driver.Key(s.prefix, name)
	if err != nil {
		return "", fmt.Errorf("s3blob: %s: %w", op, err)
	}
	return k, nil
}

// NewRangeReader implements blob.Store with a GET carrying
// "Range: bytes=off-end". The body streams from the response: cancelling
// ctx ends it.
func (s *Store) NewRangeReader(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	key, err := s.key(ctx, "read", name)
	if err != nil {
		return nil, err
	}
	if err := driver.CheckOffset(name, off); err != nil {
		return nil, fmt.Errorf("s3blob: %w", err)
	}
	if length == 0 {
		return s.emptyRead(ctx, name, off)
	}
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &key}
	switch {
	case length > 0:
		in.Range = aws.String("bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+length-1, 10))
	case off > 0:
		in.Range = aws.String("bytes=" + strconv.FormatInt(off, 10) + "-")
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		if isInvalidRange(err) {
			// S3 refuses a range starting at or past the end, also at
			// off == size, which blob.Store reads as empty.
			return s.emptyRead(ctx, name, off)
		}
		return nil, s.wrap("read", name, err)
	}
	return out.Body, nil
}

// emptyRead answers a read that covers no bytes: an empty reader when off
// is within or at the end of the object, else the right error.
func (s *Store) emptyRead(ctx context.Context, name string, off int64) (io.ReadCloser, error) {
	a, err := s.Stat(ctx, name)
	if err != nil {
		return nil, err
	}
	if _, err := driver.Span(name, off, 0, a.Size); err != nil {
		return nil, fmt.Errorf("s3blob: %w", err)
	}
	return driver.Empty(), nil
}

// Stat implements blob.Store with a HEAD request.
func (s *Store) Stat(ctx context.Context, name string) (blob.Attrs, error) {
	key, err := s.key(ctx, "stat", name)
	if err != nil {
		return blob.Attrs{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return blob.Attrs{}, s.wrap("stat", name, err)
	}
	return blob.Attrs{Name: name, Size: aws.ToInt64(out.ContentLength), Modified: aws.ToTime(out.LastModified)}, nil
}

// List implements blob.Store with ListObjectsV2, following every page.
func (s *Store) List(ctx context.Context, prefix string) ([]blob.Attrs, error) {
	if err := s.closed.Check("s3blob"); err != nil {
		return nil, err
	}
	full, err := driver.ListPrefix(s.prefix, prefix)
	if err != nil {
		return nil, fmt.Errorf("s3blob: %w", err)
	}
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket:  &s.bucket,
		Prefix:  aws.String(full),
		MaxKeys: aws.Int32(s.pageSize),
	})
	var out []blob.Attrs
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("s3blob: list %q in bucket %s: %w", prefix, s.bucket, err)
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if !strings.HasPrefix(k, full) {
				continue
			}
			out = append(out, blob.Attrs{
				Name:     k[len(s.prefix):],
				Size:     aws.ToInt64(o.Size),
				Modified: aws.ToTime(o.LastModified),
			})
		}
	}
	driver.SortAttrs(out)
	return out, nil
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, name string) error {
	key, err := s.key(ctx, "delete", name)
	if err != nil {
		return err
	}
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil && !isNotFound(err) {
		return s.wrap("delete", name, err)
	}
	return nil
}

// Close implements blob.Store: it closes the idle connections of the
// store's own HTTP client.
func (s *Store) Close() error {
	if s.closed.Close() {
		s.closeHTTP()
	}
	return nil
}

func (s *Store) closeHTTP() {
	if s.ownHTTP != nil {
		s.ownHTTP.CloseIdleConnections()
	}
}

// wrap adds the operation, name and bucket to err, mapping a missing
// object to blob.ErrNotFound.
func (s *Store) wrap(op, name string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("s3blob: %s %q in bucket %s: %w (%v)", op, name, s.bucket, blob.ErrNotFound, err)
	}
	return fmt.Errorf("s3blob: %s %q in bucket %s: %w", op, name, s.bucket, err)
}

// isNotFound reports a missing key: NoSuchKey, or a 404 (HEAD answers
// carry no code) that is not NoSuchBucket.
func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return true
		case "NoSuchBucket":
			return false
		}
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
}

func isInvalidRange(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "InvalidRange" {
		return true
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable
}
