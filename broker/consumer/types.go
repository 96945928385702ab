package consumer

import (
	"errors"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
)

// Msg is a stored message as the consumer sees it.
type Msg struct {
	// Seq is the stream sequence (1-based, gap-free in the topic).
	Seq uint64
	// Subject is the message's original subject (delivered unchanged).
	Subject string
	// Header is the stored header block ("NATS/1.0␍␊…"), nil when none.
	Header []byte
	// Data is the payload.
	Data []byte
	// Time is the broker's publish time (the ack subject's ts).
	Time time.Time
	// Skip says the message is already acknowledged elsewhere (a
	// replicated subscription's ack set covers it, ARCHITECTURE §4): the
	// consumer acks it unread, like a message its filters exclude, and
	// never delivers it.
	Skip bool
}

// Source is the topic's managed ledger, read side. Calls may block (bookie
// reads); the core calls them synchronously from whichever method needs
// them (New, Pull, Dispatch, Ack, Tick, Persisted, Info).
type Source interface {
	// FirstSeq is the lowest live sequence (LastSeq+1 when empty).
	FirstSeq() uint64
	// LastSeq is the highest confirmed sequence (0 when none ever).
	LastSeq() uint64
	// Load returns a live message. An error that errors.Is ErrGone means
	// the sequence was trimmed: the core skips it and counts it as acked.
	// Any other error stops the dispatch round (see LoadErr); the driver
	// retries later with Dispatch.
	Load(seq uint64) (Msg, error)
	// SeqAtTime is the first sequence stored at or after t (LastSeq+1 when
	// none), for deliver_policy by_start_time.
	SeqAtTime(t time.Time) (uint64, error)
	// LastForSubject is the last sequence of an exact (literal) subject,
	// 0 if none.
	LastForSubject(subject string) uint64
}

// Errors. ErrGone is the one the driver produces (mapping the managed
// ledger's "trimmed" error to it); the others come from New and
// UpdateConfig and are wrapped with the details.
var (
	// ErrGone: the message was trimmed (retention, purge).
	ErrGone = errors.New("consumer: message gone")
	// ErrUnsupported: a configuration the pull core does not serve (push,
	// flow_control acks, last_per_subject, replay original, priority
	// policies other than pinned_client, more than one priority group,
	// headers_only, rate limits). Answer it with 10012.
	ErrUnsupported = errors.New("consumer: unsupported configuration")
	// ErrInvalidConfig: ConsumerConfig.Validate failed, or a filter subject
	// is malformed.
	ErrInvalidConfig = errors.New("consumer: invalid configuration")
	// ErrImmutable: UpdateConfig tried to change a field that cannot be
	// edited.
	ErrImmutable = errors.New("consumer: field cannot be updated")
	// ErrBadState: the persisted State does not decode.
	ErrBadState = errors.New("consumer: invalid persisted state")
	// ErrNoPriorityGroup: Unpin named a group the consumer does not have
	// (CONSUMER.UNPIN answers 10160).
	ErrNoPriorityGroup = errors.New("consumer: no such priority group")
)

// State is the persisted cursor (JSON, snake_case). Snapshot produces it;
// New restores from it. It is a value: the core keeps no reference to it.
type State struct {
	// Config is the configuration in force when the snapshot was taken
	// (informational on restore: New uses its cfg argument).
	Config  jsapi.ConsumerConfig `json:"config"`
	Created time.Time            `json:"created"`
	// MarkDelete is a stream sequence: every sequence <= it is acked
	// (ack_floor.stream_seq). Filtered-out and trimmed messages count as
	// acked.
	MarkDelete uint64 `json:"mark_delete"`
	// AckedAbove is the ackset binary form (internal/ackset) of the acked
	// set, whose ranges are the individually acked sequences above
	// MarkDelete; nil when there are none.
	AckedAbove []byte `json:"acked_above,omitempty"`
	// Delivered is the highest stream sequence dispatched or skipped (the
	// read position - 1).
	Delivered uint64 `json:"delivered"`
	// DSeqReserved is the reserved block of delivery sequences: nothing
	// above it was handed out, and after a restore dseq continues above
	// it, so a dseq never repeats.
	DSeqReserved uint64 `json:"dseq_reserved"`
	// AckFloorDSeq is ack_floor.consumer_seq.
	AckFloorDSeq uint64 `json:"ack_floor_dseq"`
	// Redelivered holds the delivery counts (> 1) of pending messages, so
	// a restart keeps counting.
	Redelivered map[uint64]uint32 `json:"redelivered,omitempty"`
	// Held lists, ascending, the sequences <= Delivered that a key_shared
	// consumer read but has not delivered yet (their key was bound to a
	// puller with no request waiting): after a restore they are still
	// first deliveries, not redeliveries. Priority-group pins are not
	// persisted (nor are they by the reference): a restored consumer
	// starts unpinned.
	Held []uint64 `json:"held,omitempty"`
}

// OutKind says what an Out asks the driver to send.
type OutKind uint8

const (
	// Deliver: send Msg to Reply (the request's inbox) with the ack subject
	// jsapi.FormatAckSubject(Ack) as the reply-to.
	Deliver OutKind = iota + 1
	// Status: send a header-only status message to Reply: Status and
	// Description; for 408 and 409 also Nats-Pending-Messages/-Bytes
	// (PendingMsgs, PendingBytes); for 100 Nats-Last-Consumer/-Stream
	// (LastConsumer, LastStream).
	Status
	// AckReply: send an empty message to Reply (the AckSync reply).
	AckReply
	// Advisory: stream sequence Seq hit max_deliver; publish
	// $JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>
	// (Ack.Delivered is the number of deliveries made).
	Advisory
	// Pinned: priority group Group got pin PinID, given to the request
	// answered to Reply (the Deliver that follows goes there); publish
	// $JS.EVENT.ADVISORY.CONSUMER.PINNED.<stream>.<consumer>.
	Pinned
	// Unpinned: the pin of priority group Group ended, Reason "timeout"
	// (priority_timeout without a pull from the pinned client) or "admin"
	// (Unpin); publish $JS.EVENT.ADVISORY.CONSUMER.UNPINNED.<stream>.<consumer>.
	Unpinned
)

func (k OutKind) String() string {
	switch k {
	case Deliver:
		return "deliver"
	case Status:
		return "status"
	case AckReply:
		return "ack-reply"
	case Advisory:
		return "advisory"
	case Pinned:
		return "pinned"
	case Unpinned:
		return "unpinned"
	}
	return "unknown"
}

// Out is one thing for the driver to put on the wire, in order.
type Out struct {
	Kind OutKind
	// Reply is the request inbox (Deliver, Status) or the AckSync reply
	// (AckReply).
	Reply string
	// Msg is the message to deliver (original subject, header, data).
	Msg Msg
	// Ack is what the $JS.ACK reply subject carries (Deliver), or stream,
	// consumer, sequence and deliveries (Advisory).
	Ack         jsapi.AckMeta
	Status      int
	Description string
	// PendingMsgs and PendingBytes are the Nats-Pending-* headers of 408
	// and 409 statuses: the request's unused batch and bytes.
	PendingMsgs, PendingBytes int
	// LastConsumer and LastStream are the 100 heartbeat's
	// Nats-Last-Consumer and Nats-Last-Stream.
	LastConsumer, LastStream uint64
	// Seq is the stream sequence that hit max_deliver (Advisory).
	Seq uint64
	// PinID is the pin: on a Deliver of a pinned_client consumer, the
	// Nats-Pin-Id header to add to the message; on Pinned, the new pin.
	PinID string
	// Group is the priority group (Pinned, Unpinned).
	Group string
	// Reason says why a pin ended (Unpinned).
	Reason string
}

// DefaultDSeqBlock is how many delivery sequences a persisted reservation
// covers (see Persisted).
const DefaultDSeqBlock = 1000

// Option configures New.
type Option interface{ apply(*options) }

type options struct {
	stream string
	block  uint64
	pinIDs func() string
	topic  string
}

// StreamName is the stream the consumer reads, written into ack subjects
// (and so counted in max_bytes). New requires it.
type StreamName string

func (s StreamName) apply(o *options) { o.stream = string(s) }

// DSeqBlock sets the delivery-sequence reservation block (default
// DefaultDSeqBlock, minimum 2). A bigger block persists less often and
// skips more dseqs after a restart.
type DSeqBlock uint64

func (b DSeqBlock) apply(o *options) { o.block = max(uint64(b), 2) }

// PinIDs supplies the pin ids of a pinned_client consumer (priority
// groups): New requires it for such a consumer. Each call must return a
// new id, unique across the consumer's lives (a restored consumer must
// never hand out an id a client may still hold); the reference uses a
// 22-character NUID. The core keeps no randomness of its own, so tests
// pass a counter.
type PinIDs func() string

func (f PinIDs) apply(o *options) { o.pinIDs = f }

// TopicSubject is the subject "tenant.namespace.topic" of a stream that
// captures its own topic's subjects: a key_shared consumer keyed by
// "subject" then takes as key the tokens after it ("" for the bare topic
// subject). Without it (streams with other subjects) the key is the whole
// subject.
type TopicSubject string

func (t TopicSubject) apply(o *options) { o.topic = string(t) }
