package bookie

import (
	"fmt"

	"github.com/stratamesh/strata/bookie/bookiepb"
	"github.com/stratamesh/strata/bookie/storage"
)

// maxMasterKey is the longest master key accepted, in bytes (BookKeeper's
// keys are 20-byte digests of the password).
const maxMasterKey = 1024

// maxInstance is the longest instance string accepted (a UUID has 36).
const maxInstance = 64

// The checks below are pure: they see only the request and the limits, and
// return an error wrapping ErrInvalid (CODE_INVALID) or nil.

func checkInstance(inst string, optional bool) error {
	switch {
	case inst == "" && !optional:
		return fmt.Errorf("%w: instance is required", ErrInvalid)
	case len(inst) > maxInstance:
		return fmt.Errorf("%w: instance is %d bytes long (at most %d)", ErrInvalid, len(inst), maxInstance)
	}
	return nil
}

func checkLedger(id int64) error {
	if id < 0 {
		return fmt.Errorf("%w: ledger_id %d is negative", ErrInvalid, id)
	}
	return nil
}

func checkMasterKey(k []byte) error {
	switch {
	case len(k) == 0:
		return fmt.Errorf("%w: master_key is required", ErrInvalid)
	case len(k) > maxMasterKey:
		return fmt.Errorf("%w: master_key is %d bytes long (at most %d)", ErrInvalid, len(k), maxMasterKey)
	}
	return nil
}

// errEmptyAdd refuses an AddRequest without entries (AddResponse.code).
var errEmptyAdd = fmt.Errorf("%w: add request without entries", ErrInvalid)

// validateAddBatch checks what an AddRequest's entries share: the
// instance, and the batch bounds (MaxAddBatch entries; MaxAddBatchBytes of
// payload when there is more than one). Its error applies to every entry.
func validateAddBatch(r *bookiepb.AddRequest) error {
	if err := checkInstance(r.GetInstance(), false); err != nil {
		return err
	}
	es := r.GetEntries()
	if len(es) > MaxAddBatch {
		return fmt.Errorf("%w: add request has %d entries (at most %d)", ErrInvalid, len(es), MaxAddBatch)
	}
	if len(es) > 1 {
		total := 0
		for _, e := range es {
			total += len(e.GetPayload())
		}
		if total > MaxAddBatchBytes {
			return fmt.Errorf("%w: add request has %d entries of %d payload bytes in all (at most %d)", ErrInvalid, len(es), total, MaxAddBatchBytes)
		}
	}
	return nil
}

// validateAddEntry checks one entry of an AddRequest.
func validateAddEntry(e *bookiepb.AddEntry, maxEntry int) error {
	if err := checkLedger(e.GetLedgerId()); err != nil {
		return err
	}
	if e.GetEntryId() < 0 {
		return fmt.Errorf("%w: entry_id %d is negative", ErrInvalid, e.GetEntryId())
	}
	// The piggybacked LAC confirms entries before this one, never this one
	// or later: a reader trusts a bookie's LAC to read up to it.
	if e.GetLac() < storage.NoEntry || e.GetLac() >= e.GetEntryId() {
		return fmt.Errorf("%w: lac %d must be in -1..entry_id-1 (entry_id %d)", ErrInvalid, e.GetLac(), e.GetEntryId())
	}
	if err := checkMasterKey(e.GetMasterKey()); err != nil {
		return err
	}
	if len(e.GetPayload()) > maxEntry {
		return fmt.Errorf("%w: payload is %d bytes (at most %d)", ErrInvalid, len(e.GetPayload()), maxEntry)
	}
	return nil
}

func validateRead(r *bookiepb.ReadRequest) error {
	if err := checkInstance(r.GetInstance(), false); err != nil {
		return err
	}
	if err := checkLedger(r.GetLedgerId()); err != nil {
		return err
	}
	first, last := r.GetFirstEntryId(), r.GetLastEntryId()
	switch {
	case first < 0:
		return fmt.Errorf("%w: first_entry_id %d is negative", ErrInvalid, first)
	case last < first:
		return fmt.Errorf("%w: last_entry_id %d is before first_entry_id %d", ErrInvalid, last, first)
	case r.GetMaxBytes() < 0:
		return fmt.Errorf("%w: max_bytes %d is negative", ErrInvalid, r.GetMaxBytes())
	}
	if r.GetFence() {
		if err := checkMasterKey(r.GetMasterKey()); err != nil {
			return fmt.Errorf("fenced read: %w", err)
		}
	}
	return nil
}

func validateReadLAC(r *bookiepb.ReadLACRequest) error {
	if err := checkInstance(r.GetInstance(), false); err != nil {
		return err
	}
	if err := checkLedger(r.GetLedgerId()); err != nil {
		return err
	}
	if r.GetWaitAfter() < storage.NoEntry {
		return fmt.Errorf("%w: wait_after %d is below -1", ErrInvalid, r.GetWaitAfter())
	}
	return nil
}

func validateFence(r *bookiepb.FenceRequest) error {
	if err := checkInstance(r.GetInstance(), false); err != nil {
		return err
	}
	if err := checkLedger(r.GetLedgerId()); err != nil {
		return err
	}
	return checkMasterKey(r.GetMasterKey())
}

func validateInfo(r *bookiepb.InfoRequest) error {
	if err := checkInstance(r.GetInstance(), true); err != nil {
		return err
	}
	if r.GetLedgersFrom() < 0 {
		return fmt.Errorf("%w: ledgers_from %d is negative", ErrInvalid, r.GetLedgersFrom())
	}
	return nil
}
