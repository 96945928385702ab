// Package memblob is an in-memory blob.Store for tests, with fault
// injection: Inject(Fault{Op: OpPut, Nth: 2}) makes the second Put from
// now fail; AfterBytes makes a Put fail after consuming part of its body
// or a reader fail mid-stream; Calls counts operations (for checks of
// read-ahead and retries).
//
// # What it owns
//
// A map from name to immutable byte slices. Put reads the whole body
// before storing it, so a failed Put never leaves anything; a reader
// keeps reading the version it opened even if the object is overwritten
// or deleted meanwhile. Close drops everything.
//
// # What it must not do
//
// Be used for data that must outlive the process, or know anything of
// ledgers or topics.
//
// # Concurrency and errors
//
// Safe for concurrent use. Errors wrap blob's sentinels, and injected
// faults wrap the Fault's Err (ErrInjected by default).
package memblob
