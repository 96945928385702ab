package blobopen

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/aws"
	"google.golang.org/api/option"

	"github.com/stratamesh/strata/tiered/blob"
	"github.com/stratamesh/strata/tiered/blob/fsblob"
	"github.com/stratamesh/strata/tiered/blob/gcsblob"
	"github.com/stratamesh/strata/tiered/blob/memblob"
	"github.com/stratamesh/strata/tiered/blob/s3blob"
)

// Option adjusts how Open builds a driver, beyond what Config (and so the
// topology) can say. Production passes none.
type Option func(*extras)

type extras struct {
	s3Creds    aws.CredentialsProvider
	gcsOptions []option.ClientOption
}

// WithS3Credentials makes an s3 store use creds instead of the SDK's
// standard chain (tests: credentials.NewStaticCredentialsProvider).
func WithS3Credentials(creds aws.CredentialsProvider) Option {
	return func(e *extras) { e.s3Creds = creds }
}

// WithGCSClientOptions passes opts to a gcs store's storage.NewClient
// (tests: option.WithoutAuthentication()).
func WithGCSClientOptions(opts ...option.ClientOption) Option {
	return func(e *extras) { e.gcsOptions = append(e.gcsOptions, opts...) }
}

// Open validates cfg (reporting every problem, each wrapping
// blob.ErrInvalidConfig) and returns the store of its kind. For s3 and
// gcs it sends no request: a missing bucket or bad credentials show up
// on the first operation. The caller must Close the store.
func Open(ctx context.Context, cfg blob.Config, opts ...Option) (blob.Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("blobopen: %w", err)
	}
	var ex extras
	for _, o := range opts {
		o(&ex)
	}
	var (
		s   blob.Store
		err error
	)
	switch cfg.Kind {
	case blob.KindMem:
		s = memblob.New()
	case blob.KindFS:
		prefix, _ := blob.CleanPrefix(cfg.Prefix) // checked by Validate
		s, err = fsblob.New(filepath.Join(cfg.Dir, filepath.FromSlash(prefix)))
	case blob.KindS3:
		s, err = s3blob.New(ctx, s3blob.Options{
			Bucket:      cfg.Bucket,
			Prefix:      cfg.Prefix,
			Region:      cfg.Region,
			Endpoint:    cfg.Endpoint,
			PathStyle:   cfg.PathStyle,
			Credentials: ex.s3Creds,
		})
	case blob.KindGCS:
		s, err = gcsblob.New(ctx, gcsblob.Options{
			Bucket:        cfg.Bucket,
			Prefix:        cfg.Prefix,
			Endpoint:      cfg.Endpoint,
			ClientOptions: ex.gcsOptions,
		})
	default: // Validate rejects it; kept for a kind added there but not here
		err = fmt.Errorf("%w: unknown kind %q", blob.ErrInvalidConfig, cfg.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("blobopen: tier kind %s: %w", cfg.Kind, err)
	}
	return s, nil
}
