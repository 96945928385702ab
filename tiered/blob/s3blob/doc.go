// Package s3blob is a blob.Store over an S3 bucket with
// github.com/aws/aws-sdk-go-v2: AWS itself or any S3-compatible service
// (MinIO, R2, …) through Options.Endpoint and PathStyle.
//
// # What it owns
//
// Keys Prefix+name in one bucket (several regions can share a bucket
// with different prefixes), and the requests for them:
//   - Put: bodies up to PartSize (8 MiB) with one PutObject; larger ones,
//     or unknown sizes that turn out larger, with a multipart upload of
//     PartSize parts sent in sequence from one buffer; any error aborts
//     the upload, so neither an object nor stored parts remain. Memory:
//     one part per concurrent Put.
//   - Reads: GetObject with "Range: bytes=off-end" (no header for a whole
//     object); a 416 answer is resolved with a HEAD into an empty read
//     (off == size) or blob.ErrInvalidRange.
//   - List: ListObjectsV2, every page; Delete: DeleteObject.
//
// Credentials come from the SDK's standard chain (environment, shared
// files, SSO, web identity, container and instance roles) unless
// Options.Credentials is set; the region from Options, the chain, else
// us-east-1.
//
// # What it must not do
//
// Create or configure buckets, know about ledgers or topics, or read
// the environment when explicit credentials are given.
//
// # Concurrency and errors
//
// Safe for concurrent use. NoSuchKey and 404 answers map to
// blob.ErrNotFound (NoSuchBucket does not: it is a configuration
// problem; a HEAD of a missing bucket cannot be told from a missing
// key). Other errors are the SDK's, wrapped with the operation, name and
// bucket. The SDK retries transient failures (3 attempts).
package s3blob
