package core

import "errors"

// Errors of the ledger core. The Writer ends with ErrFenced, ErrRecovering,
// ErrLedgerClosed, ErrMetadataConflict, ErrUnauthorized or
// ErrBookieRefused (all wrapped with detail; test with errors.Is);
// Recovery ends with an error wrapping ErrRetry when it cannot decide.
var (
	// ErrFenced: a bookie answered an add with "fenced": another process
	// has started recovering the ledger (BookKeeper's fencing). The writer
	// ends; it is never treated as a bookie failure.
	ErrFenced = errors.New("ledger: fenced")
	// ErrRecovering: the metadata CAS of an ensemble change found the
	// ledger IN_RECOVERY: another process is taking it over.
	ErrRecovering = errors.New("ledger: in recovery")
	// ErrLedgerClosed: the ledger is CLOSED (a CAS found it so, or
	// BeginRecovery was asked to recover a closed ledger).
	ErrLedgerClosed = errors.New("ledger: closed")
	// ErrMetadataConflict: the metadata CAS found the ledger still OPEN but
	// changed in a way the single writer did not make.
	ErrMetadataConflict = errors.New("ledger: metadata changed under the writer")
	// ErrUnauthorized: a bookie refused the ledger's master key.
	ErrUnauthorized = errors.New("ledger: master key refused")
	// ErrBookieRefused: a bookie refused an add as malformed (a bug on one
	// side; retrying elsewhere would not help).
	ErrBookieRefused = errors.New("ledger: add refused as invalid")
	// ErrClosed: Add or Close on a Writer that Close already ended.
	ErrClosed = errors.New("ledger: writer closed")
	// ErrPending: Close while entries are unconfirmed or an ensemble change
	// is being recorded.
	ErrPending = errors.New("ledger: adds pending")
	// ErrBadReplacement: Replace named a bookie that is not awaiting a
	// replacement, or a replacement already in the ensemble.
	ErrBadReplacement = errors.New("ledger: bad replacement")
	// ErrNoProposal: MetadataCommitted or MetadataConflict without a
	// metadata update handed out (a driver bug).
	ErrNoProposal = errors.New("ledger: no metadata update in flight")
	// ErrInvalidMetadata: Metadata.Validate found a problem, or the
	// metadata is in the wrong state for the operation.
	ErrInvalidMetadata = errors.New("ledger: invalid metadata")
	// ErrInvalidArgument: a negative payload length and the like.
	ErrInvalidArgument = errors.New("ledger: invalid argument")
	// ErrRetry: recovery could not decide (too few fences, bookies
	// unreachable or answering for another instance, no replacement for
	// a bookie failing rewrites, its ensemble change's CAS refused).
	// The ledger stays IN_RECOVERY; the driver starts a new Recovery later.
	// Recovery never closes a ledger short instead.
	ErrRetry = errors.New("ledger: recovery undecidable, retry later")
)
