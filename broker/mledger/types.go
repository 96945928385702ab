package mledger

import "time"

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
}

// PubResult is a publish's outcome (the PubAck's seq and duplicate).
type PubResult struct {
	Seq       uint64
	Duplicate bool
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
}
