// Package gcsblob is a blob.Store over a Google Cloud Storage bucket with
// cloud.google.com/go/storage.
//
// # What it owns
//
// Objects Prefix+name in one bucket (several regions can share a bucket
// with different prefixes), and the requests for them:
//   - Put: a storage.Writer; objects up to ChunkSize (8 MiB) go in one
//     request, larger ones as a resumable upload of ChunkSize chunks. On
//     any error the Writer's context is cancelled, which abandons the
//     upload: the object appears only when the final request succeeds.
//   - Reads: ranged reads (the library's XML API by default; pass
//     storage.WithJSONReads() in ClientOptions for the JSON API); a 416
//     answer is resolved with an attributes request into an empty read
//     (off == size) or blob.ErrInvalidRange.
//   - List: every page of a prefix query; Delete.
//
// Credentials come from Application Default Credentials unless
// ClientOptions say otherwise; when STORAGE_EMULATOR_HOST is set the
// library talks to that emulator without authentication.
//
// # What it must not do
//
// Create or configure buckets, or know about ledgers or topics.
//
// # Concurrency and errors
//
// Safe for concurrent use. storage.ErrObjectNotExist maps to
// blob.ErrNotFound; other errors are the library's (googleapi.Error for
// HTTP answers), wrapped with the operation, name and bucket. The
// library retries idempotent requests on transient errors.
package gcsblob
