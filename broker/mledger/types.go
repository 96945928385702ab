package mledger

import (
	"time"

	"github.com/stratamesh/strata/replicator"
)

// PublishOptions are a publish's JetStream headers (nats-wire §2.4),
// parsed by the caller. Nil pointers: header absent.
type PublishOptions struct {
	// MsgID is Nats-Msg-Id: within Limits.DuplicateWindow a repeat is
	// not stored and is answered with the original's sequence.
	MsgID string
	// ExpectedLastSeq is Nats-Expected-Last-Sequence: the topic's last
	// sequence (appended, confirmed or not) must equal it.
	ExpectedLastSeq *uint64
	// ExpectedLastSubjectSeq is Nats-Expected-Last-Subject-Sequence: the
	// last sequence of ExpectedLastSubjectSeqSubject (JetStream:
	// Nats-Expected-Last-Subject-Sequence-Subject; default the publish
	// subject) must equal it (0: no message on that subject).
	ExpectedLastSubjectSeq        *uint64
	ExpectedLastSubjectSeqSubject string
	// ExpectedLastMsgID is Nats-Expected-Last-Msg-Id: the last message's
	// Nats-Msg-Id ("" if it had none) must equal it.
	ExpectedLastMsgID *string
	// Origin, when set, makes the publish a replicated one: the message
	// was first published with this origin in another region, and the
	// replicator delivers it here. The receiver rule decides (per origin
	// stream: this topic, Origin.Region, Origin.Incarnation): Origin.Seq at
	// the stream's high-water mark + 1 is stored with this origin (the
	// mark moves); at or below the mark it is a duplicate (PubResult
	// Duplicate, nothing stored); above mark + 1 it is refused with an
	// *OriginGapError. MsgID and the Expected* checks do not apply (the
	// origin checked them): the message's Nats-Msg-Id is not remembered
	// for dedup, and the Expected* fields are ignored. Limits.MaxMsgSize
	// does not apply either (the origin enforced its own); the entry size
	// and DiscardNew limits do. Nil: a local publish, which gets this
	// region's origin (Config.Region) and the next local origin sequence.
	Origin *replicator.Origin
}

// PubResult is a publish's outcome (the PubAck's seq and duplicate).
type PubResult struct {
	// Seq is the message's topic sequence; for a duplicate, the
	// original's: for a Nats-Msg-Id duplicate always, for a replicated
	// duplicate when still known (the last stored message of its origin
	// stream), else 0.
	Seq       uint64
	Duplicate bool
}

// SkipResult is the outcome of SkipOrigin (a gap record).
type SkipResult struct {
	// Duplicate: the range was already at or below the high-water mark;
	// nothing changed.
	Duplicate bool
	// HWM is the stream's confirmed high-water mark after the call.
	HWM uint64
	// Lost is how many origin sequences this call moved the mark past.
	Lost uint64
}

// State is the topic's confirmed state (JetStream StreamState).
type State struct {
	// Msgs is the number of live messages, LastSeq-FirstSeq+1 (exact).
	Msgs uint64
	// Bytes is their size (sum of EncodedSize: each message's record in
	// its entry; approximate after a trim that left a ledger partly live:
	// see the package doc).
	Bytes uint64
	// FirstSeq is the lowest live sequence (LastSeq+1 when empty).
	FirstSeq uint64
	// FirstTime is its publish time (zero when empty, and briefly after
	// a trim to a message not in the cache, until it is read back).
	FirstTime time.Time
	// LastSeq, LastTime: the last confirmed message (kept after purges).
	LastSeq  uint64
	LastTime time.Time
	// NumSubjects is the number of distinct subjects counted (see
	// LastForSubject for what is counted after trims).
	NumSubjects int
	// Incarnation is the topic's incarnation (TopicMeta.Incarnation).
	Incarnation string
	// LastOriginSeq is the last confirmed local origin sequence (0 when
	// none: no Config.Region, or nothing published locally yet).
	LastOriginSeq uint64
	// OriginsLost is the sum of the origin sequences gap records moved
	// the high-water marks past, over every origin stream (ML.Origins has
	// them per stream).
	OriginsLost uint64
}
