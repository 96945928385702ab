package storage

import (
	"context"
	"errors"
)

// Errors returned by the engine. They cross the wire as distinct bookie.v1
// error codes, so each must stay distinguishable with errors.Is.
var (
	// ErrFenced: the ledger was fenced (BookKeeper's ledger recovery); adds
	// are refused from then on.
	ErrFenced = errors.New("bookie: ledger fenced")
	// ErrMasterKey: the request's master key differs from the one the
	// ledger was first written or fenced with.
	ErrMasterKey = errors.New("bookie: wrong master key")
	// ErrNoLedger: the bookie holds nothing for this ledger.
	ErrNoLedger = errors.New("bookie: no such ledger")
	// ErrNoEntry: the ledger exists here but this entry does not.
	ErrNoEntry = errors.New("bookie: no such entry")
	// ErrCorrupt: stored bytes failed their CRC32C check; the data is never
	// returned.
	ErrCorrupt = errors.New("bookie: corrupt entry")
	// ErrReadOnly: the bookie refuses adds (disk usage over its threshold,
	// or set read-only); reads, fences and recovery adds still work.
	ErrReadOnly = errors.New("bookie: read-only")
	// ErrClosed: the engine is closed.
	ErrClosed = errors.New("bookie: closed")
	// ErrInvalid: the request is malformed (negative ledger or entry id,
	// LAC below NoEntry, payload over Config.MaxEntryBytes).
	ErrInvalid = errors.New("bookie: invalid request")
)

// NoEntry is the LAC of a ledger with no confirmed entry (BookKeeper's -1).
const NoEntry int64 = -1

// AddRequest is one entry to store. EntryID is chosen by the ledger's single
// writer; LAC is the writer's LastAddConfirmed piggybacked on the add.
type AddRequest struct {
	LedgerID  int64
	EntryID   int64
	LAC       int64
	MasterKey []byte
	Payload   []byte
	// Recovery marks an add made by ledger recovery, which is allowed on a
	// fenced ledger (BookKeeper's recovery add).
	Recovery bool
	// Record, when set, is a buffer the engine keeps as the entry's stored
	// form instead of copying Payload into a new one: Payload must be
	// Record[EntryHeaderSize:] (see NewRecord). The engine writes the
	// header and owns Record from the call on; the caller must not touch
	// it again. A Record of another shape is ignored (Payload is copied).
	Record []byte
}

// EntryHeaderSize is the number of bytes a stored entry holds before its
// payload (see AddRequest.Record).
const EntryHeaderSize = entryHeaderSize

// NewRecord returns a buffer for an entry of n payload bytes, for
// AddRequest.Record: the payload goes in rec[EntryHeaderSize:].
func NewRecord(n int) (rec []byte) { return make([]byte, entryHeaderSize+n) }

// Entry is a stored entry as read back (CRC already verified).
type Entry struct {
	LedgerID int64
	EntryID  int64
	LAC      int64 // the LAC the writer piggybacked on this entry
	Payload  []byte
}

// LedgerInfo summarises one ledger held by the bookie.
type LedgerInfo struct {
	LedgerID  int64
	LAC       int64 // highest LAC learned for the ledger (NoEntry if none)
	LastEntry int64 // highest entry id stored here (NoEntry if none)
	Entries   int64 // entries stored here
	Bytes     int64 // payload bytes stored here
	Fenced    bool
}

// Usage is the engine's disk usage.
type Usage struct {
	UsedBytes  int64 // bytes in journal, entry logs and index
	FreeBytes  int64 // free bytes on the data directory's filesystem
	TotalBytes int64
	ReadOnly   bool
	// JournalDir is set when Config.JournalDir names the journal's
	// directory, with the free and total bytes of its file system (both
	// zero when that check failed); empty otherwise.
	JournalDir        string
	JournalFreeBytes  int64
	JournalTotalBytes int64
}

// Storage is what the bookie service needs from the engine. *Engine
// implements it; tests of the service may use a fake.
type Storage interface {
	// Add stores an entry and calls done exactly once: with nil after the
	// entry is in the journal and fsynced (group commit), or with an error
	// (ErrFenced, ErrMasterKey, ErrReadOnly, ErrClosed, I/O errors). done
	// may run on another goroutine and must not block for long. Adds of one
	// ledger may complete out of order. Adding an entry id that is already
	// stored replaces it (as BookKeeper's bookies do: ledger recovery and
	// ensemble changes re-send entries); keeping one writer per ledger, and
	// the same payload per entry id, is the ledger client's contract.
	Add(req AddRequest, done func(error))
	// Read returns one entry: ErrNoLedger, ErrNoEntry or ErrCorrupt when it
	// cannot.
	Read(ledgerID, entryID int64) (Entry, error)
	// ReadRange returns entries first..last in order, stopping early (with
	// what it has, nil error) at maxBytes of payload or at the first
	// missing entry; maxBytes ≤ 0 means no byte limit. An entry that
	// cannot be read (ErrCorrupt, an I/O error) ends the range with that
	// error and the entries before it.
	ReadRange(ledgerID, first, last int64, maxBytes int) ([]Entry, error)
	// Fence marks the ledger fenced (creating its record if the bookie
	// has none) and returns its LAC once the fence is journaled and fsynced.
	Fence(ctx context.Context, ledgerID int64, masterKey []byte) (lac int64, err error)
	// LAC returns the ledger's highest known LAC (ErrNoLedger if unknown).
	LAC(ledgerID int64) (int64, error)
	// WaitLAC blocks until the ledger's LAC is greater than after, or ctx
	// ends (then it returns the current LAC and ctx's error): the long poll
	// behind tailing reads. On a fenced ledger (before or while waiting) it
	// returns the current LAC at once, as BookKeeper's bookies do: its
	// writer is gone, and the reader learns the end from the ledger's
	// metadata. ErrNoLedger if the ledger is unknown or deleted meanwhile.
	WaitLAC(ctx context.Context, ledgerID int64, after int64) (int64, error)
	// DeleteLedger drops the ledger; its space is reclaimed by entry log
	// compaction later.
	DeleteLedger(ledgerID int64) error
	// Ledgers lists the ledgers held, sorted by id.
	Ledgers() []LedgerInfo
	// Usage reports disk usage and the read-only state.
	Usage() Usage
	// Close flushes what it can and releases files; idempotent.
	Close() error
}
