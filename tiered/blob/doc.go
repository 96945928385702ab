// Package blob is the one interface behind which Strata's tier drivers
// sit (ARCHITECTURE §6, CONVENTIONS item 4): Store, a flat namespace of
// immutable objects with atomic Put of a stream, ranged reads, Stat,
// List and Delete. The drivers are sub-packages: memblob (in memory, with
// fault injection, for tests), fsblob (a local directory: the embedded
// default), s3blob (aws-sdk-go-v2: AWS, MinIO, R2, …) and gcsblob
// (cloud.google.com/go/storage). blobopen builds the right one from a
// Config, the Go form of a region's `tier:` in the topology; blobtest is
// the conformance suite all of them pass.
//
// # What it owns
//
//   - The Store contract: Put is atomic (no partial object is ever
//     visible, also when the reader fails or the context is cancelled
//     halfway); reads past the end are cut, reads starting past it fail;
//     List is sorted, complete across backend pages, and filters by a
//     plain string prefix; deleting a missing object succeeds.
//   - Object names (ValidateName): slash-separated segments, no "." or
//     ".." segment, no empty segment, no control characters, UTF-8, at
//     most MaxNameLen bytes — valid alike for files and for S3/GCS keys.
//     fsblob cannot hold an object named like a directory of other
//     objects ("a" and "a/b"); the others can, but portable callers
//     should not rely on it.
//   - Config and its validation (every problem reported, each naming the
//     topology field).
//   - The sentinel errors: ErrNotFound, ErrInvalidName, ErrInvalidRange,
//     ErrSizeMismatch, ErrClosed, ErrInvalidConfig. Drivers wrap them
//     with their detail (operation, name, bucket, the backend's message);
//     callers test with errors.Is. Other errors (network, permissions, a
//     missing bucket) pass through wrapped.
//
// # What it must not do
//
// Know about ledgers, topics, tenants, offload policy or retention: a
// Store moves bytes under names. Layout of objects, indexes and
// verification belong to the offloader in package tiered. No Store
// creates buckets.
//
// # Concurrency
//
// Every Store is safe for concurrent use. Close is idempotent; calls
// after it fail with ErrClosed. Readers returned by NewRangeReader are
// not safe for concurrent use and must be closed by their caller.
package blob
