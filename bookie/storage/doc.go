// Package storage is the bookie's storage engine (BookKeeper's ledger
// storage): it keeps ledger entries durably on one node and answers reads,
// fences and LAC queries. Open returns an *Engine, which implements the
// Storage interface of api.go that the bookie service uses.
//
// # What it owns
//
// Everything under Config.Dir, through the vfs.FS in Config.FS:
//
//   - journal/ — the write-ahead log (journal.go, journal_format.go). One
//     writer goroutine takes the pending batch when groupPolicy (group.go)
//     says so and writes it with one write and one fsync (group commit);
//     an acker goroutine then applies the batch and acks its adds, in
//     batch order, while the writer already writes the next. Fences and
//     deletes are journaled the same way. Batches overwrite space that
//     is already allocated, so their fsync needs no file-system metadata
//     commit: a filler goroutine zero-fills the file ahead of the writer
//     (journal_reserve.go), and files rotate at JournalMaxFileSize and,
//     once a checkpoint passes them, become spares that later files are
//     made from (journal_recycle.go). A spare keeps its old bytes behind
//     the new batches: replay tells new batches by the file id in their
//     header and, from journal version 3, by a CRC salted with the data
//     directory's secret owner id, so that an entry's payload (a client's
//     bytes) cannot pass for a batch. Builds before version 3 refuse
//     version 3 journal files (naming the version): no downgrade.
//   - the write cache (cache.go): acked entries, readable at once, until a
//     flush moves them to an entry log.
//   - logs/ — entry logs (entrylog.go): each flush writes the cache sorted
//     by (ledger, entry), fsyncs, then commits one index batch. With
//     Config.EntryLogDirectIO, logs are written with direct I/O where the
//     file system has it (whole aligned blocks, the partial last one
//     rewritten by the next write): less CPU per flush, but flushed entries
//     are not in the page cache. Range reads read each run of adjacent
//     entries with one read and prefetch what follows (readrun.go).
//   - index/ — the location index, a pebble database (index.go):
//     (ledger, entry) → (log, offset, size), per-ledger records (master
//     key, fenced, LAC, counts), per-log live accounting and the
//     checkpoint: the journal position up to which the index is complete.
//   - compaction (compact.go): rewrites logs whose live fraction fell
//     below CompactThreshold (deleted ledgers, overwritten entries).
//
// Every stored entry carries a CRC32C over (ledger, entry, LAC, payload)
// checked on every read, from the cache as from a log: a mismatch is
// ErrCorrupt and the bytes are never returned (entry_format.go).
//
// # Crash safety
//
// An add is acked only after its journal batch is fsynced. Open loads the
// index, replays the journal from the checkpoint (replay.go, with the same
// applier as the live path, apply.go), truncates a torn tail (a damaged
// last batch of the newest file with nothing valid after it; anything else
// is ErrCorrupt, journal_scan.go), writes what it replayed to an entry log
// and starts a new journal file. Files are made durable before anything
// points at them: entry-log data and directory entry before the index
// commit that references it; the index commit before journal files are
// deleted; compaction's copy before the index moves, and the index move
// before the old log is removed. Files no index record mentions (the
// output of a crashed flush or compaction, a log whose removal was cut
// short) are deleted at Open.
//
// # What it must not do
//
// It knows nothing of topics, tenants, ensembles or quorums: a ledger is
// an id with a master key, entries and a LAC. It does no networking and
// does not decide retention: DeleteLedger is called by its owner.
//
// # Concurrency
//
// All methods are safe for concurrent use. Goroutines: the journal's
// writer, acker and zero-filler (owned by the journal), the flusher and, if
// CompactInterval > 0, the compactor (owned by the Engine). Close stops
// them all and waits; it is idempotent. Add's done callback runs on the
// journal's acker (or on the caller's goroutine for a refusal): it must
// not block, nor call Add, Fence or DeleteLedger (they may wait for the
// acker itself); hand the result to another goroutine instead. Add blocks
// while JournalMaxPendingBytes are waiting (back-pressure).
//
// Locks, in order: Engine.lifecycle (read: operations touching index or
// logs; write: Close) → flushMu (flush, DeleteLedger, compaction commit:
// every index change) → Engine.mu (ledger table) → writeCache.mu →
// journal.mu; logSet.mu is a leaf. The journal writer never holds
// journal.mu while writing or applying, and nothing holding Engine.mu
// blocks on I/O.
//
// Ordering guarantees: records of one ledger enter the journal in the
// order the engine admitted them (admission and submit happen under
// Engine.mu), so every add admitted before a Fence is acked before Fence
// returns, and every add after it is refused unless Recovery is set.
//
// # Caller's duties
//
// Call Close. Keep done callbacks short. Use one Engine per directory
// (pebble's lock refuses a second in the same process).
package storage
