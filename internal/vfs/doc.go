// Package vfs is the small file-system interface behind which Strata keeps
// all of its disk I/O, so that tests can swap the disk for one that crashes
// or fails on purpose.
//
// # What it owns
//
//   - FS and File: the operations storage code needs (create, open, remove,
//     rename, list, stat, directory sync, disk space; positional reads,
//     sequential and positional writes, sync, truncate).
//   - OS: the real file system (Default).
//   - Direct I/O (direct.go): DirectCreator, CreateDirect and aligned
//     buffers, for writers that bypass the page cache (O_DIRECT on Linux),
//     with a fallback to Create where the file system cannot. MemFS's
//     direct files refuse misaligned writes, as the kernel does.
//   - MemFS: an in-memory file system that can simulate a crash (Crash,
//     CrashClone, CrashCloneWith), keeping only what was made durable.
//   - ErrorFS: a wrapper that injects errors into chosen operations of any
//     FS (FailNth, FailAll, with Match predicates).
//
// # What it must not do
//
// It knows nothing about journals, entry logs or indexes: names and bytes
// are opaque. It does not buffer: a Write reaches the underlying file
// before it returns (and, on the OS, the page cache).
//
// # Durability model (MemFS)
//
// MemFS follows the strict POSIX reading of durability, which is what a
// crash-safe program must assume:
//
//   - File contents: File.Sync makes the file's current contents and size
//     durable. Writes and truncations after the last Sync are lost by a
//     crash (CrashCloneWith can keep a prefix of the unsynced changes,
//     appended or overwritten, from the first byte that differs, to model
//     a torn write: pages written back before the power went).
//   - Directory entries: creating, renaming and removing a file change the
//     directory's entries; FS.SyncDir(dir) makes dir's current entries
//     durable. A crash restores each directory's entries as of its last
//     SyncDir (a directory never synced holds no files after a crash). A
//     file whose entry survives keeps its last synced contents, even if the
//     file was synced before or after the directory. Renaming onto an
//     existing name, removing and creating are all undone alike.
//   - Directories themselves: MkdirAll and removing an empty directory are
//     durable at once (a simplification: storage code creates its
//     directories once, at first start, and never renames them).
//   - Open files: a removed or renamed file stays readable and writable
//     through handles opened before. After Crash (in place) every handle
//     opened before fails with ErrCrashed.
//
// The OS implementation follows whatever the kernel and file system give;
// on Linux ext4/xfs with fsync and directory fsync it is at least as strong
// as MemFS.
//
// # Concurrency
//
// FS implementations are safe for concurrent use. A File is safe for
// concurrent ReadAt calls alongside one writer; Write advances the handle's
// own offset, so one handle must not be written from two goroutines at once.
//
// # Error injection
//
// NewErrorFS(fs, injector) passes every operation through the Injector
// first; a non-nil error from it fails the operation without touching fs
// (for Write, without writing anything). Injectors: FailNth (the n-th
// matching operation only), FailAll (every matching operation), or any
// func(Op) error. The injector can be swapped at run time (SetInjector), so
// a test can set up state cleanly and then arm the fault.
package vfs
