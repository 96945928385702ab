package mledger

import (
	"errors"
	"fmt"
)

// Errors of the managed ledger. Each may come wrapped with detail (the
// topic, the cause); test with errors.Is. The JetStream codes a caller
// maps them to are given for each.
var (
	// ErrExists: Create found metadata for the topic already.
	ErrExists = errors.New("mledger: topic exists")
	// ErrNotFound: no metadata for the topic (Load, Open), or Read of a
	// sequence above the last confirmed one (JetStream 10037).
	ErrNotFound = errors.New("mledger: not found")
	// ErrNotOwner: this ML no longer owns the topic: an ownership-
	// conditioned write failed (*meta.ConflictError), the open ledger was
	// fenced by another owner, or the ML was dropped. Every pending and
	// later call fails with it; the caller forwards to the new owner.
	ErrNotOwner = errors.New("mledger: not the topic's owner")
	// ErrClosed: the ML was closed (Close, DeleteTopic).
	ErrClosed = errors.New("mledger: closed")
	// ErrMsgTooBig: header+data exceed Limits.MaxMsgSize, or the encoded
	// entry exceeds Config.MaxEntrySize (JetStream 10054).
	ErrMsgTooBig = errors.New("mledger: message too big")
	// ErrStoreFull: a DiscardNew limit (MaxMsgs, MaxBytes) refused the
	// message (JetStream 10077).
	ErrStoreFull = errors.New("mledger: store full (discard new)")
	// ErrGone: the sequence is below FirstSeq: purged, trimmed or expired.
	ErrGone = errors.New("mledger: message gone (below first sequence)")
	// ErrNoTier: an offload was requested of a topic whose region has no
	// tier configured.
	ErrNoTier = errors.New("mledger: no tier configured")
	// ErrCorrupt: stored data does not decode or does not match the
	// metadata (an entry's sequence, a ledger list with a hole).
	ErrCorrupt = errors.New("mledger: corrupt")
	// ErrNoLocalStream: an entry holds a compact local-origin record
	// (flagLocalOrigin, entry.go) and its decoder was given no Local to
	// fill in the region and incarnation (the topic's TopicMeta has no
	// Region, or the caller passed the zero Local). Always wrapped
	// together with ErrCorrupt.
	ErrNoLocalStream = errors.New("mledger: compact local-origin record without its topic's local stream")
	// ErrBadOrigin: a replicated publish's or a gap record's origin is
	// malformed (empty region or incarnation, sequence 0, a time outside
	// Unix nanoseconds, a range with first > last, another topic's
	// stream) or names this region (Config.Region): this region's
	// messages are never replicated back to it.
	ErrBadOrigin = errors.New("mledger: bad origin")
)

// OriginGapError refuses a replicated publish or a gap record that starts
// above its origin stream's high-water mark + 1 (a gap, ARCHITECTURE §4):
// the sender must rewind to Expected (the mark + 1, counting replicated
// messages appended but not yet confirmed). Returned as a pointer:
// errors.As(err, &p) with p *OriginGapError.
type OriginGapError struct{ Expected uint64 }

func (e *OriginGapError) Error() string {
	return fmt.Sprintf("mledger: origin sequence gap: expected %d", e.Expected)
}

// WrongLastSeqError is a failed Nats-Expected-Last-Sequence or
// Nats-Expected-Last-Subject-Sequence check (JetStream 10071, "wrong
// last sequence: <Actual>"). Actual counts appended but unconfirmed
// messages. Returned as a pointer: errors.As(err, &p) with p
// *WrongLastSeqError.
type WrongLastSeqError struct{ Actual uint64 }

func (e *WrongLastSeqError) Error() string {
	return fmt.Sprintf("mledger: wrong last sequence: %d", e.Actual)
}

// WrongLastMsgIDError is a failed Nats-Expected-Last-Msg-Id check
// (JetStream 10070). Actual is the Nats-Msg-Id of the last message ("" if
// it had none). Returned as a pointer.
type WrongLastMsgIDError struct{ Actual string }

func (e *WrongLastMsgIDError) Error() string {
	return fmt.Sprintf("mledger: wrong last msg ID: %q", e.Actual)
}
