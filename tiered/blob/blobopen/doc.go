// Package blobopen turns a blob.Config (a region's `tier:` from the
// topology) into a running blob.Store of the configured kind: fs, s3,
// gcs or mem. It lives apart from package blob so that blob itself does
// not import the drivers (which import blob).
//
// # What it owns
//
// Only the mapping from Config to each driver's options: validation is
// Config.Validate's, behaviour is the drivers'. Credentials never come
// from the Config: s3 uses the AWS SDK's standard chain, gcs Application
// Default Credentials (or none when STORAGE_EMULATOR_HOST is set); the
// Options exist for tests that must not read the environment.
//
// # What it must not do
//
// Know about ledgers, topics or offload policy, or create buckets.
//
// # Concurrency
//
// Open may be called concurrently; the stores it returns are safe for
// concurrent use.
package blobopen
