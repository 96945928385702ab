// Package fsblob is a blob.Store over a local directory: the embedded
// default tier of `strata up`. Object "a/b/c" is the file <dir>/a/b/c.
//
// # What it owns
//
// Files and directories under its root, and their durability. Put writes
// a temporary file (named with blob.ReservedPrefix, so never listed and
// never an object name) in the object's directory, fsyncs it, renames it
// over the object and fsyncs the directory; new directories are fsynced
// into their parents. On any error the temporary file is removed and the
// old object, if any, is untouched. Delete removes the file, fsyncs its
// directory and removes the directories it left empty. A crash during a
// Put can leave a temporary file: SweepTemp removes old ones. Readers
// hold the file open, so they finish reading the version they opened
// even if it is overwritten or deleted.
//
// A name cannot be both an object and a directory of other objects
// ("a" and "a/b"): such a Put fails with an error saying so.
//
// # What it must not do
//
// Know about ledgers or topics, or touch files outside its root (List
// never walks above it, names cannot contain "..").
//
// # Concurrency and errors
//
// Safe for concurrent use, also by several processes sharing the
// directory (rename is atomic; a Put racing a Delete that prunes its
// directory re-creates it). Missing files map to blob.ErrNotFound; other
// OS errors pass through wrapped with the operation and name.
package fsblob
