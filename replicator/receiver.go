package replicator

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/stratamesh/strata/tenancy"
)

// Verdict is a receiver's decision on one offered message or gap record.
type Verdict uint8

const (
	// VerdictStore: the message is HWM+1 (or the gap record reaches
	// HWM+1): the HWM moved; the driver stores the message.
	VerdictStore Verdict = iota + 1
	// VerdictDuplicate: at or below the HWM, already held: answered as a
	// success, nothing changes.
	VerdictDuplicate
	// VerdictGap: above HWM+1: refused; the sender must resend from HWM+1.
	VerdictGap
)

func (v Verdict) String() string {
	switch v {
	case VerdictStore:
		return "store"
	case VerdictDuplicate:
		return "duplicate"
	case VerdictGap:
		return "gap"
	}
	return "unknown"
}

// StreamState is one stream's high-water mark as persisted.
type StreamState struct {
	Stream
	// HWM is the highest origin sequence such that it and every one below
	// it is stored here or covered by an accepted gap record.
	HWM uint64 `json:"hwm"`
	// Lost counts the sequences gap records moved the HWM past: messages
	// trimmed at the origin before they reached this region.
	Lost uint64 `json:"lost,omitempty"`
	// GapRecords counts the gap records accepted.
	GapRecords uint64 `json:"gap_records,omitempty"`
}

// ReceiverState is a receiver's persisted form (JSON, snake_case): every
// stream with an HWM above 0, sorted by topic, region and incarnation.
type ReceiverState struct {
	Streams []StreamState `json:"streams"`
}

// Receiver keeps the high-water marks of the origin streams replicated
// into this region (one per topic, origin region and incarnation), at the
// owner of those topics. See the package documentation for the driver's
// duties: it stores what a call says to store, and persists the State
// with it, before answering.
type Receiver struct {
	marks map[Stream]*mark
	gen   uint64
}

type mark struct{ hwm, lost, gaps uint64 }

// NewReceiver restores a receiver from st (the zero ReceiverState for a
// new one). Errors wrap ErrBadState: a stream named twice or not fully
// named.
func NewReceiver(st ReceiverState) (*Receiver, error) {
	r := &Receiver{marks: make(map[Stream]*mark, len(st.Streams))}
	for _, ss := range st.Streams {
		if err := ss.validate(); err != nil {
			return nil, fmt.Errorf("%w: stream %s: %w", ErrBadState, ss.Stream, err)
		}
		if ss.Lost > ss.HWM {
			return nil, fmt.Errorf("%w: stream %s: lost %d above hwm %d", ErrBadState, ss.Stream, ss.Lost, ss.HWM)
		}
		if _, dup := r.marks[ss.Stream]; dup {
			return nil, fmt.Errorf("%w: stream %s twice", ErrBadState, ss.Stream)
		}
		r.marks[ss.Stream] = &mark{hwm: ss.HWM, lost: ss.Lost, gaps: ss.GapRecords}
	}
	return r, nil
}

// Gen counts the receiver's changes: the driver persists State when it
// moved (with the messages stored meanwhile, in one conditioned write).
func (r *Receiver) Gen() uint64 { return r.gen }

// HWM is stream's high-water mark (0 for a stream never seen: a new
// incarnation starts there).
func (r *Receiver) HWM(s Stream) uint64 {
	if m := r.marks[s]; m != nil {
		return m.hwm
	}
	return 0
}

// Lost is how many sequences of stream gap records moved past.
func (r *Receiver) Lost(s Stream) uint64 {
	if m := r.marks[s]; m != nil {
		return m.lost
	}
	return 0
}

// State returns the persisted form: every stream, sorted.
func (r *Receiver) State() ReceiverState {
	st := ReceiverState{Streams: make([]StreamState, 0, len(r.marks))}
	for s, m := range r.marks {
		st.Streams = append(st.Streams, StreamState{Stream: s, HWM: m.hwm, Lost: m.lost, GapRecords: m.gaps})
	}
	slices.SortFunc(st.Streams, func(a, b StreamState) int { return compareStreams(a.Stream, b.Stream) })
	return st
}

func compareStreams(a, b Stream) int {
	return cmp.Or(cmp.Compare(a.Topic.Tenant, b.Topic.Tenant), cmp.Compare(a.Topic.Namespace, b.Topic.Namespace),
		cmp.Compare(a.Topic.Topic, b.Topic.Topic), cmp.Compare(a.Region, b.Region), cmp.Compare(a.Incarnation, b.Incarnation))
}

// Forget drops stream's high-water mark: for the driver when a topic's
// tombstone arrives (the incarnation is gone for good). A message of a
// forgotten stream would be taken as new, starting at 1.
func (r *Receiver) Forget(s Stream) {
	if _, ok := r.marks[s]; ok {
		delete(r.marks, s)
		r.gen++
	}
}

// Offer decides on the message of topic with origin o: VerdictStore when
// o.Seq is HWM+1 (the HWM moves to it), VerdictDuplicate at or below the
// HWM, VerdictGap above HWM+1. It returns the HWM after the decision, so
// a gap's expected sequence is hwm+1. A sequence 0 is a duplicate.
func (r *Receiver) Offer(topic tenancy.Name, o Origin) (v Verdict, hwm uint64) {
	s := o.Stream(topic)
	h := r.HWM(s)
	switch {
	case o.Seq <= h:
		return VerdictDuplicate, h
	case o.Seq > h+1:
		return VerdictGap, h
	}
	r.set(s, func(m *mark) { m.hwm = o.Seq })
	return VerdictStore, o.Seq
}

// OfferGap decides on a gap record for stream's sequences first..last:
// VerdictDuplicate when last <= HWM, VerdictGap when first > HWM+1, and
// otherwise VerdictStore: the HWM moves to last and the sequences above
// the old HWM count as lost (returned). It returns the HWM after.
func (r *Receiver) OfferGap(s Stream, first, last uint64) (v Verdict, hwm, lost uint64) {
	h := r.HWM(s)
	switch {
	case last <= h:
		return VerdictDuplicate, h, 0
	case first > h+1:
		return VerdictGap, h, 0
	}
	lost = last - h
	r.set(s, func(m *mark) { m.hwm = last; m.lost += lost; m.gaps++ })
	return VerdictStore, last, lost
}

func (r *Receiver) set(s Stream, f func(*mark)) {
	m := r.marks[s]
	if m == nil {
		m = &mark{}
		r.marks[s] = m
	}
	f(m)
	r.gen++
}

// Result is what a receiver decided on a batch.
type Result struct {
	// Answer is the reply for the sender. The driver sends it only after
	// Store is durably appended to the topic and State persisted.
	Answer Answer
	// Store are the messages to append to the topic, in order (the part
	// of the batch above the old HWM).
	Store []Msg
	// Lost is how many sequences the batch's gap record moved past.
	Lost uint64
}

// Receive decides on a whole batch: Duplicate when the remote already
// holds it all, GapRefused when it starts above HWM+1, and otherwise
// Stored, with the messages above the old HWM to store (for a gap record,
// the count it moved past). The HWM moves at once: if storing fails, the
// driver answers Failed and restores the receiver from its last persisted
// State. Errors wrap ErrInvalid (a malformed batch: the answer is Failed).
func (r *Receiver) Receive(b *Batch) (Result, error) {
	if err := b.validate(); err != nil {
		return Result{Answer: Answer{Batch: b.ID, Kind: Failed}}, err
	}
	var res Result
	h := r.HWM(b.Stream)
	switch {
	case b.Last <= h:
		res.Answer = Answer{Batch: b.ID, Kind: Duplicate, HWM: h}
	case b.First > h+1:
		res.Answer = Answer{Batch: b.ID, Kind: GapRefused, HWM: h}
	case b.Gap:
		_, hwm, lost := r.OfferGap(b.Stream, b.First, b.Last)
		res.Answer = Answer{Batch: b.ID, Kind: Stored, HWM: hwm}
		res.Lost = lost
	default:
		res.Store = b.Msgs[h+1-b.First:]
		r.set(b.Stream, func(m *mark) { m.hwm = b.Last })
		res.Answer = Answer{Batch: b.ID, Kind: Stored, HWM: b.Last}
	}
	return res, nil
}
