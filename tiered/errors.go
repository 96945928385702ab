package tiered

import (
	"errors"

	"github.com/stratamesh/strata/bookie/ledger"
)

// Errors of package tiered. Each is returned wrapped with detail (the
// object, the ledger, the entry, the offsets); test with errors.Is.
var (
	// ErrCorrupt: bytes read from the tier are not a valid index or data
	// object: truncated, bad magic or version, a CRC32C mismatch, offsets
	// out of order or past the data length, an entry id other than the
	// one expected, counts that cannot be. Bytes that fail a check are
	// never returned as entries.
	ErrCorrupt = errors.New("tiered: corrupt object")
	// ErrBeyondEnd: a read asked for entries past the ledger's last
	// entry. errors.Is(err, ledger.ErrBeyondLAC) also holds, so a caller
	// treats a tiered ledger like a closed one on bookies.
	ErrBeyondEnd error = &aliasError{msg: "tiered: entry beyond the ledger's last entry", alias: ledger.ErrBeyondLAC}
	// ErrInvalid: a bad argument (an id range with first < 0 or last <
	// first, an empty base name, a negative ledger id) or a Config that
	// fails Validate. errors.Is(err, ledger.ErrInvalidOptions) also holds.
	ErrInvalid error = &aliasError{msg: "tiered: invalid argument", alias: ledger.ErrInvalidOptions}
	// ErrEmptyLedger: Offload of a ledger with no entries (last entry id
	// below 0). There is nothing to offload: the caller drops such a
	// ledger instead.
	ErrEmptyLedger = errors.New("tiered: ledger has no entries")
	// ErrEntryTooLarge: Offload met an entry of more than MaxEntryBytes.
	ErrEntryTooLarge = errors.New("tiered: entry too large")
	// ErrSourceMismatch: the EntrySource given to Offload returned other
	// entries than those asked for (a wrong count or id), or the data
	// written does not add up to OffloadOptions.Length.
	ErrSourceMismatch = errors.New("tiered: source returned unexpected entries")
	// ErrVerify: the offload's read-back check failed: the index object
	// read back differs from the one written, or the last entry read
	// through the tiered read path differs from the one written. Both
	// objects have been deleted (best effort).
	ErrVerify = errors.New("tiered: offload verification failed")
	// ErrClosed: a Read on a Reader after Close.
	ErrClosed = errors.New("tiered: reader closed")
)

// aliasError is a sentinel that also matches another package's sentinel
// under errors.Is.
type aliasError struct {
	msg   string
	alias error
}

func (e *aliasError) Error() string        { return e.msg }
func (e *aliasError) Is(target error) bool { return target == e.alias }
