package blob

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Store kinds: the values of Config.Kind.
const (
	KindFS  = "fs"  // a local directory (fsblob)
	KindS3  = "s3"  // an S3-compatible bucket (s3blob): AWS, MinIO, R2, …
	KindGCS = "gcs" // a Google Cloud Storage bucket (gcsblob)
	KindMem = "mem" // in memory, lost on Close (memblob); for tests
)

// Config selects and configures a store. Its fields mirror a region's
// `tier:` in the topology (topology.Tier) plus the test-only kind "mem";
// blobopen.Open turns it into a Store. Fields that do not apply to Kind
// must be empty: Validate reports them rather than ignore a likely typo.
type Config struct {
	// Kind is fs, s3, gcs or mem. Required.
	Kind string
	// Bucket is the S3 or GCS bucket. Required for s3 and gcs; the bucket
	// must exist (the stores never create buckets).
	Bucket string
	// Prefix is put before every object name (s3, gcs: a key prefix, so
	// several regions can share a bucket; fs: a sub-directory of Dir).
	// Leading and trailing slashes are ignored; "us-east" and
	// "us-east/" both store name n as "us-east/n". Default: none.
	Prefix string
	// Region is the S3 signing region. Default: the SDK's standard chain
	// (AWS_REGION, ~/.aws/config), else "us-east-1" (what MinIO and R2
	// accept). s3 only.
	Region string
	// Endpoint is the service's base URL (http:// or https://), for
	// S3-compatible services, proxies and emulators. Default: the
	// provider's public endpoint (gcs: STORAGE_EMULATOR_HOST when set).
	// s3 and gcs only.
	Endpoint string
	// PathStyle makes S3 requests address the bucket in the path
	// (endpoint/bucket/key) instead of the host name (bucket.endpoint);
	// most self-hosted S3-compatible services need it. s3 only.
	PathStyle bool
	// Dir is the directory of an fs store, created if missing. Required
	// for fs.
	Dir string
}

// Validate reports every problem with c, each wrapping ErrInvalidConfig
// and naming the field as the topology spells it (bucket, dir, …).
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	type field struct {
		name string
		set  bool
	}
	fields := []field{
		{"bucket", c.Bucket != ""},
		{"prefix", c.Prefix != ""},
		{"region", c.Region != ""},
		{"endpoint", c.Endpoint != ""},
		{"path_style", c.PathStyle},
		{"dir", c.Dir != ""},
	}
	var allowed []string
	known := true
	switch c.Kind {
	case KindFS:
		allowed = []string{"dir", "prefix"}
		if c.Dir == "" {
			bad("kind fs: dir is required")
		}
	case KindS3, KindGCS:
		allowed = []string{"bucket", "prefix", "endpoint"}
		if c.Kind == KindS3 {
			allowed = append(allowed, "region", "path_style")
		}
		if c.Bucket == "" {
			bad("kind %s: bucket is required", c.Kind)
		} else if err := checkBucket(c.Bucket); err != nil {
			bad("kind %s: bucket %q: %v", c.Kind, truncate(c.Bucket), err)
		}
		if c.Endpoint != "" {
			if err := checkEndpoint(c.Endpoint); err != nil {
				bad("kind %s: endpoint %q: %v", c.Kind, truncate(c.Endpoint), err)
			}
		}
	case KindMem:
	case "":
		known = false
		bad("kind is required: want %s, %s, %s or %s", KindFS, KindS3, KindGCS, KindMem)
	default:
		known = false
		bad("unknown kind %q: want %s, %s, %s or %s", truncate(c.Kind), KindFS, KindS3, KindGCS, KindMem)
	}
	if known {
		for _, f := range fields {
			if f.set && !slices.Contains(allowed, f.name) {
				bad("kind %s: %s does not apply (only %s)", c.Kind, f.name, describe(allowed))
			}
		}
	}
	if c.Prefix != "" {
		if _, err := CleanPrefix(c.Prefix); err != nil {
			bad("prefix: %v", err)
		}
	}
	return errors.Join(errs...)
}

// CleanPrefix returns prefix without leading and trailing slashes and
// with one "/" appended ("" stays ""), or an error wrapping
// ErrInvalidName when what remains is not a valid object name.
func CleanPrefix(prefix string) (string, error) {
	p := strings.Trim(prefix, "/")
	if p == "" {
		return "", nil
	}
	if err := ValidateName(p); err != nil {
		return "", err
	}
	return p + "/", nil
}

func checkBucket(b string) error {
	if len(b) < 3 || len(b) > 222 {
		return fmt.Errorf("%d characters, want 3 to 222", len(b))
	}
	for _, r := range b {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_'
		if !ok {
			return fmt.Errorf("character %q not allowed (lower-case letters, digits, '-', '.', '_')", r)
		}
	}
	return nil
}

func checkEndpoint(e string) error {
	u, err := url.Parse(e)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("want an http:// or https:// URL")
	}
	if u.Host == "" {
		return errors.New("no host")
	}
	return nil
}

func describe(list []string) string {
	if len(list) == 0 {
		return "kind itself"
	}
	return strings.Join(list, ", ")
}
