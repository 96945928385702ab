// Package blobtest is the conformance suite that every blob.Store driver
// passes: Run(t, newStore) checks round trips (empty, one byte, several
// MiB, known and unknown sizes), ranged reads and their edges, Stat,
// List (prefix semantics, sorting, more than one backend page), Delete,
// overwrite, ErrNotFound, invalid names and ranges, the atomicity of
// Put when its reader fails or its context is cancelled halfway,
// concurrent puts and reads, and use after Close.
//
// # Duties of the caller
//
// newStore must give a fresh, empty store on each call; the suite closes
// each store at the end of its sub-test, before the cleanups that
// newStore registered (so a fake server may be stopped there). Drivers
// with a multipart threshold should configure it at 5 MiB so that the
// suite's LargeSize objects use the multipart path. The suite holds a
// few objects of up to 14 MiB in memory.
//
// It must not know any driver: driver-specific checks (S3 multipart
// aborts, fs temporary files, memblob faults) live in the drivers' own
// tests.
package blobtest
