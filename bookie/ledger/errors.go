package ledger

import (
	"errors"

	"github.com/stratamesh/strata/bookie/ledger/core"
)

// Errors of the ledger client. Each is returned wrapped with detail (the
// ledger, the bookies, the counts); test with errors.Is.
var (
	// ErrNoLedger: no metadata for the ledger id in this region's etcd.
	ErrNoLedger = errors.New("ledger: no such ledger")
	// ErrNotEnoughBookies: placement found fewer writable bookies than
	// needed (the message says how many are needed, writable, read-only
	// and excluded), at Create or, after Config.ReplaceTimeout, during an
	// ensemble change (the writer then ends).
	ErrNotEnoughBookies = errors.New("ledger: not enough bookies")
	// ErrBeyondLAC: a read asked for entries past the last add confirmed
	// the Reader knows. Wait for them with WaitLAC.
	ErrBeyondLAC = errors.New("ledger: entry beyond the last add confirmed")
	// ErrWriterClosed: an append to a Writer that Close (or Client.Close)
	// has ended, or an append still unconfirmed when Close gave up.
	ErrWriterClosed = errors.New("ledger: writer closed")
	// ErrClientClosed: a call on a Client after Close.
	ErrClientClosed = errors.New("ledger: client closed")
	// ErrInvalidOptions: quorums that break E ≥ Qw ≥ Qa ≥ 1, a bad id
	// range, a bad Config and the like.
	ErrInvalidOptions = errors.New("ledger: invalid options")
	// ErrEntryTooLarge: an append larger than Config.MaxEntrySize. The
	// writer goes on.
	ErrEntryTooLarge = errors.New("ledger: entry too large")
	// ErrCorruptEntry: a stored entry failed the client's own check of its
	// frame (CRC32C over ledger id, entry id, length and payload; see the
	// package doc). Readers try another bookie; recovery counts the
	// answer as Unknown.
	ErrCorruptEntry = errors.New("ledger: corrupt entry")
	// ErrEntryUnavailable: no bookie of an entry's write set returned it
	// (each error is joined in).
	ErrEntryUnavailable = errors.New("ledger: entry unavailable")
)

// The core's errors, under this package's name for callers' convenience:
// errors.Is(err, ledger.ErrFenced) and errors.Is(err, core.ErrFenced) are
// the same test.
var (
	// ErrFenced: a bookie refused an add as fenced: another client is
	// recovering (taking over) the ledger. The Writer has ended.
	ErrFenced = core.ErrFenced
	// ErrRecovering: the ensemble change's CAS found the ledger
	// IN_RECOVERY. The Writer has ended.
	ErrRecovering = core.ErrRecovering
	// ErrLedgerClosed: the ledger is CLOSED (by recovery, or a CAS found
	// it so). The Writer has ended.
	ErrLedgerClosed = core.ErrLedgerClosed
	// ErrMetadataConflict: the ledger's metadata changed in a way its
	// writer did not make (or it was deleted). The Writer has ended.
	ErrMetadataConflict = core.ErrMetadataConflict
	// ErrUnauthorized: a bookie refused the master key, or
	// OpenForTakeover was given the wrong password.
	ErrUnauthorized = core.ErrUnauthorized
)
