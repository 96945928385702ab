package storage

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/stratamesh/strata/internal/vfs"
)

// Config configures an Engine. Start from DefaultConfig and set Dir.
type Config struct {
	// Dir is the data directory. The engine keeps journal/, logs/ and
	// index/ under it and creates them on first start. Required.
	Dir string
	// JournalDir is the journal's directory. Default: Dir/journal. Put it
	// on a device of its own (BookKeeper's journalDirectories): every add
	// waits for the journal's fsync, and on a shared disk each of those
	// also flushes what the entry logs and the index wrote since the last
	// one (docs/perf.md). It is tied to Dir by an owner id in both; Open
	// refuses a journal directory that belongs to another data directory
	// (ErrForeignJournal).
	JournalDir string
	// FS is the file system holding Dir. Default: vfs.Default (the OS).
	// Tests pass a vfs.MemFS (crashes) or a vfs.ErrorFS (faults).
	FS vfs.FS

	// JournalGroupWindow is the longest an add that arrives at an idle
	// journal waits for companions before its batch is written and
	// fsynced. Adds arriving while a batch is being written go into the
	// next batch, which is written as soon as the current one completes,
	// so under load the fsync itself is the batching window and this
	// value no longer adds latency. Larger: bigger batches at low load,
	// more latency. Default 1 ms; 0 writes as soon as the disk is free.
	JournalGroupWindow time.Duration
	// JournalGroupBytes ends the window early: a pending batch of at
	// least this many bytes is written at once. Default 512 KiB.
	JournalGroupBytes int
	// JournalMaxPendingBytes bounds the bytes waiting for the journal;
	// Add blocks (back-pressure) while more are pending. Must be at least
	// JournalGroupBytes. Default 16 MiB.
	JournalMaxPendingBytes int
	// JournalMaxFileSize is the size, in bytes, past which the journal
	// rotates to a new file. A file a checkpoint has passed is kept as a
	// spare for a later file to reuse (up to 4 spares) or deleted.
	// Default 64 MiB.
	JournalMaxFileSize int64
	// JournalPreallocate is the chunk, in bytes, in which a background
	// goroutine zero-fills the journal file ahead of the writer (one to
	// two chunks ahead, never past JournalMaxFileSize) and fsyncs the
	// zeros. Batches then overwrite allocated blocks inside the file's
	// size, so each batch's fdatasync(2) flushes data only, with no
	// file-system metadata commit: about half the time of an appending
	// write+fsync on ext4 (docs/perf.md). Costs one extra write of every
	// journal byte, off the add path. 0 disables (batches are appended);
	// unused with DisableFsync. Default 4 MiB.
	JournalPreallocate int64
	// DisableFsync skips every fsync (journal, entry logs, index). Acked
	// adds are then NOT durable. For benchmarks of everything but the
	// disk only. Default false.
	DisableFsync bool
	// EntryLogDirectIO writes entry logs with direct I/O (O_DIRECT) where
	// the file system has it, as BookKeeper's DirectIO entry logger does:
	// a flush then costs about a tenth of the CPU per byte and leaves the
	// page cache alone, but flushed entries are not in the page cache,
	// so reads of recent entries (catch-up, replication) go to the disk.
	// On the bench machine: +10% adds/s at 1,024 in flight, and a fresh
	// sequential reader 15-25% slower (docs/perf.md). Default false.
	EntryLogDirectIO bool

	// WriteCacheBytes is the size of the write cache, in bytes of stored
	// records: past it the cache is flushed to an entry log. Larger:
	// fewer, bigger flushes and longer journal replay. Default 64 MiB.
	WriteCacheBytes int64
	// FlushInterval flushes the write cache (and advances the checkpoint)
	// at least this often. Default 1 s.
	FlushInterval time.Duration
	// EntryLogMaxSize is the size, in bytes, past which a new entry log
	// is started (checked at each flush, so a log may exceed it by one
	// flush). Default 512 MiB.
	EntryLogMaxSize int64
	// MaxEntryBytes is the largest payload Add accepts, in bytes; larger
	// ones fail with ErrInvalid. Default 16 MiB.
	MaxEntryBytes int

	// CompactThreshold: a sealed entry log whose live fraction (bytes of
	// entries of undeleted ledgers / file size) is below this is
	// compacted. 0 compacts only logs with nothing live. Default 0.5.
	CompactThreshold float64
	// CompactInterval is how often background compaction runs. 0
	// disables it (Compact can still be called). Default 5 min.
	CompactInterval time.Duration

	// ReadOnlyThreshold is the disk usage fraction (used/total of the
	// file system holding Dir or of the one holding the journal, whichever
	// is fuller) above which the engine refuses adds with ErrReadOnly.
	// Checked at open, at each flush interval and by Usage.
	// Default 0.95.
	ReadOnlyThreshold float64
	// DiskSpace reports the file system's size; tests fake it. Default:
	// FS.DiskSpace.
	DiskSpace func(dir string) (vfs.DiskSpace, error)

	// IndexCacheBytes is the location index's (pebble) block cache, in
	// bytes. Default 8 MiB.
	IndexCacheBytes int64
	// IndexMemTableBytes is the size of the index's memtables, in bytes
	// (pebble keeps up to two, plus one being flushed). Larger: fewer
	// index flushes and compactions, so less CPU per add, for memory.
	// Default 32 MiB.
	IndexMemTableBytes int64

	// Logger receives the engine's logs. Default: discards.
	Logger *slog.Logger
	// Clock is the engine's time source. Default: RealClock().
	Clock Clock
}

// DefaultConfig returns the defaults documented on Config; Dir is empty.
func DefaultConfig() Config {
	return Config{
		FS:                     vfs.Default,
		JournalGroupWindow:     time.Millisecond,
		JournalGroupBytes:      512 << 10,
		JournalMaxPendingBytes: 16 << 20,
		JournalMaxFileSize:     64 << 20,
		JournalPreallocate:     4 << 20,
		WriteCacheBytes:        64 << 20,
		FlushInterval:          time.Second,
		EntryLogMaxSize:        512 << 20,
		MaxEntryBytes:          16 << 20,
		CompactThreshold:       0.5,
		CompactInterval:        5 * time.Minute,
		ReadOnlyThreshold:      0.95,
		IndexCacheBytes:        8 << 20,
		IndexMemTableBytes:     32 << 20,
		Logger:                 slog.New(slog.NewTextHandler(io.Discard, nil)),
		Clock:                  RealClock(),
	}
}

// Validate returns every problem with c, joined (nil if none). Nil FS,
// Logger, Clock and DiskSpace are allowed: Open uses the defaults.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("storage config: "+format, args...)) }
	if c.Dir == "" {
		bad("Dir is required")
	}
	if c.JournalGroupWindow < 0 {
		bad("JournalGroupWindow %v is negative", c.JournalGroupWindow)
	}
	if c.JournalGroupBytes <= 0 {
		bad("JournalGroupBytes %d must be positive", c.JournalGroupBytes)
	}
	if c.JournalMaxPendingBytes < c.JournalGroupBytes {
		bad("JournalMaxPendingBytes %d is below JournalGroupBytes %d", c.JournalMaxPendingBytes, c.JournalGroupBytes)
	}
	if c.JournalMaxFileSize < 1<<10 {
		bad("JournalMaxFileSize %d is below 1 KiB", c.JournalMaxFileSize)
	}
	if c.JournalPreallocate < 0 {
		bad("JournalPreallocate %d is negative", c.JournalPreallocate)
	}
	if c.WriteCacheBytes <= 0 {
		bad("WriteCacheBytes %d must be positive", c.WriteCacheBytes)
	}
	if c.FlushInterval <= 0 {
		bad("FlushInterval %v must be positive", c.FlushInterval)
	}
	if c.EntryLogMaxSize < 1<<10 {
		bad("EntryLogMaxSize %d is below 1 KiB", c.EntryLogMaxSize)
	}
	if c.MaxEntryBytes <= 0 || c.MaxEntryBytes > maxEntryBytesLimit {
		bad("MaxEntryBytes %d must be in (0, %d]", c.MaxEntryBytes, maxEntryBytesLimit)
	}
	if c.CompactThreshold < 0 || c.CompactThreshold > 1 {
		bad("CompactThreshold %v must be in [0, 1]", c.CompactThreshold)
	}
	if c.CompactInterval < 0 {
		bad("CompactInterval %v is negative", c.CompactInterval)
	}
	if c.ReadOnlyThreshold <= 0 || c.ReadOnlyThreshold > 1 {
		bad("ReadOnlyThreshold %v must be in (0, 1]", c.ReadOnlyThreshold)
	}
	if c.IndexCacheBytes < 0 {
		bad("IndexCacheBytes %d is negative", c.IndexCacheBytes)
	}
	if c.IndexMemTableBytes < 1<<20 || c.IndexMemTableBytes > 1<<30 {
		bad("IndexMemTableBytes %d must be in [1 MiB, 1 GiB]", c.IndexMemTableBytes)
	}
	return errors.Join(errs...)
}

// journalDir is JournalDir or its default.
func (c Config) journalDir() string {
	if c.JournalDir != "" {
		return c.JournalDir
	}
	return filepath.Join(c.Dir, journalDir)
}

// withDefaults fills the optional fields left nil.
func (c Config) withDefaults() Config {
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Clock == nil {
		c.Clock = RealClock()
	}
	if c.DiskSpace == nil {
		c.DiskSpace = c.FS.DiskSpace
	}
	return c
}
