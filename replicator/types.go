package replicator

import (
	"errors"
	"fmt"
	"time"
)

// Errors, wrapped with details; test them with errors.Is.
var (
	// ErrTrimmed is the one error the driver's Source produces on purpose:
	// the message was removed by retention (or purge) before it was read.
	// The sender then covers it with a gap record.
	ErrTrimmed = errors.New("replicator: message trimmed")
	// ErrInvalid: a malformed Config, topic name (tenancy.Name), Stream, Batch or Answer.
	ErrInvalid = errors.New("replicator: invalid")
	// ErrBadState: a persisted SenderState or ReceiverState does not fit
	// (another incarnation, duplicate streams, impossible values).
	ErrBadState = errors.New("replicator: invalid persisted state")
	// ErrAheadOfSource: the remote claims a high-water mark above the
	// origin's last sequence, which only a reused incarnation can cause.
	// The answer is not applied.
	ErrAheadOfSource = errors.New("replicator: remote is ahead of the source")
)

// Msg is one message of local origin as the sender reads it from the
// managed ledger, and as the receiver hands it back for storing.
type Msg struct {
	// Origin is the message's identity; Origin.Region and
	// Origin.Incarnation are the batch's.
	Origin Origin
	// Subject, Header and Data are the stored message (the header block
	// without Strata-Origin* headers: those are the envelope's).
	Subject string
	Header  []byte
	Data    []byte
	// Size is what the message counts, in bytes, against
	// Config.MaxBatchBytes and in Lag.Bytes: the driver's encoded size
	// (record plus envelope). When 0, len(Subject)+len(Header)+len(Data).
	Size int
}

// Bytes is m.Size, or len(Subject)+len(Header)+len(Data) when Size is 0.
func (m *Msg) Bytes() int {
	if m.Size > 0 {
		return m.Size
	}
	return len(m.Subject) + len(m.Header) + len(m.Data)
}

// Source is the topic's managed ledger, read side, restricted to the
// messages of local origin in the sender's incarnation, addressed by
// origin sequence (the driver maps origin to stream sequences). Calls may
// block (bookie reads); the sender makes them synchronously from Send,
// Tick and Status.
type Source interface {
	// FirstSeq is the lowest origin sequence still stored (LastSeq+1 when
	// none is). Everything below it was trimmed.
	FirstSeq() uint64
	// LastSeq is the highest origin sequence confirmed in the topic (0
	// when none ever was).
	LastSeq() uint64
	// Load returns the message with origin sequence seq, FirstSeq <= seq
	// <= LastSeq. An error that errors.Is ErrTrimmed means retention
	// removed it meanwhile; any other error is transient: the sender backs
	// off and reads it again.
	Load(seq uint64) (Msg, error)
	// Backlog describes the stored messages with origin sequence > after:
	// their total Bytes and the origin time of the first of them (zero
	// when there is none). It feeds Lag and may be an estimate kept by
	// the managed ledger, but never a cached zero.
	Backlog(after uint64) (bytes uint64, oldest time.Time)
}

// Batch is what a sender puts on the wire to its remote, on the
// replication subject of Stream.Topic: either a gap record or a run of
// consecutive messages. The driver encodes it (the topic's definition
// travels with it) and sends it as one request whose reply is an Answer.
type Batch struct {
	// ID names the batch in its Answer. IDs grow by one per batch within
	// a Sender's life and restart with a new Sender: the driver must not
	// hand a new Sender answers meant for an old one (use a fresh reply
	// subject per life).
	ID uint64
	// Stream is the topic and the origin (this region, the incarnation).
	Stream Stream
	// Gap marks a gap record: origin sequences First..Last were trimmed
	// at the origin before the remote acknowledged them, and Msgs is
	// empty.
	Gap bool
	// First and Last are the origin sequences covered, First <= Last.
	First, Last uint64
	// Msgs are the messages First..Last in order (empty for a gap record).
	Msgs []Msg
	// Bytes is the sum of Msgs' Bytes (0 for a gap record).
	Bytes int
}

// Count is the number of origin sequences the batch covers.
func (b *Batch) Count() uint64 { return b.Last - b.First + 1 }

// String is a short form for logs: "#3 msgs 4-6" or "#4 gap 1-3".
func (b *Batch) String() string {
	kind := "msgs"
	if b.Gap {
		kind = "gap"
	}
	return fmt.Sprintf("#%d %s %s", b.ID, kind, seqRange(b.First, b.Last))
}

// ValidateBatch checks a batch as a receiver gets it (what Receiver.Receive
// checks first): a fully named stream, First <= Last, messages exactly
// First..Last of that stream (none for a gap record). Errors wrap
// ErrInvalid.
func ValidateBatch(b *Batch) error { return b.validate() }

// validate checks a batch as a receiver gets it.
func (b *Batch) validate() error {
	if err := b.Stream.validate(); err != nil {
		return err
	}
	switch {
	case b.First == 0 || b.First > b.Last:
		return fmt.Errorf("%w: batch %s: bad range", ErrInvalid, b)
	case b.Gap && len(b.Msgs) != 0:
		return fmt.Errorf("%w: batch %s: a gap record with messages", ErrInvalid, b)
	case !b.Gap && uint64(len(b.Msgs)) != b.Count():
		return fmt.Errorf("%w: batch %s: %d messages", ErrInvalid, b, len(b.Msgs))
	}
	for i := range b.Msgs {
		o := &b.Msgs[i].Origin
		if o.Seq != b.First+uint64(i) || o.Region != b.Stream.Region || o.Incarnation != b.Stream.Incarnation {
			return fmt.Errorf("%w: batch %s: message %d has origin %s/%s seq %d", ErrInvalid, b, i, o.Region, o.Incarnation, o.Seq)
		}
	}
	return nil
}

// AnswerKind is the remote's verdict on a batch.
type AnswerKind uint8

const (
	// Stored: the remote durably stored the batch (or what it lacked of
	// it); HWM >= the batch's Last.
	Stored AnswerKind = iota + 1
	// Duplicate: the remote already held everything in the batch
	// (answered as success); HWM >= the batch's Last.
	Duplicate
	// GapRefused: the batch starts above the remote's HWM+1; nothing of it
	// was stored and the sender must resend from HWM+1 (Expected).
	GapRefused
	// Failed: a transient failure (the remote's store failed, a timeout,
	// no responders); HWM is not meaningful. The driver makes this answer
	// itself for transport errors.
	Failed
)

func (k AnswerKind) String() string {
	switch k {
	case Stored:
		return "stored"
	case Duplicate:
		return "duplicate"
	case GapRefused:
		return "gap-refused"
	case Failed:
		return "failed"
	}
	return "unknown"
}

// Answer is the remote's reply to a batch.
type Answer struct {
	// Batch is the ID of the batch answered.
	Batch uint64
	Kind  AnswerKind
	// HWM is the remote's high-water mark for the batch's stream after
	// handling it (Stored, Duplicate, GapRefused): every origin sequence
	// <= HWM is durably stored there (or covered by a gap record).
	HWM uint64
}

// Expected is the origin sequence the remote wants next (HWM+1).
func (a Answer) Expected() uint64 { return a.HWM + 1 }

func (a Answer) String() string {
	if a.Kind == Failed {
		return fmt.Sprintf("#%d failed", a.Batch)
	}
	return fmt.Sprintf("#%d %s hwm=%d", a.Batch, a.Kind, a.HWM)
}

// seqRange formats [first, last] as "4" or "4-6".
func seqRange(first, last uint64) string {
	if first == last {
		return fmt.Sprint(first)
	}
	return fmt.Sprintf("%d-%d", first, last)
}
