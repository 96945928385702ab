package consumer

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/internal/ackset"
)

// world is a driver and its clients around one consumer, with a model of
// what they may observe. It crashes and restores the consumer from what
// was persisted, and checks every Out against the model:
//   - dseq strictly increases, across restores too, and never goes above
//     the persisted reservation;
//   - a message acked (or termed, or stopped at max_deliver) is not
//     redelivered in the same life, and one whose ack was persisted never
//     again; an ack_wait, +WPI or NAK delay is respected;
//   - delivery counts grow per message, survive a restore and never pass
//     max_deliver; only matching messages are delivered;
//   - a request never gets more than its batch or max_bytes, nor
//     anything after it ended, and its statuses fit it;
//   - an AckSync reply comes only once its ack is persisted;
//   - mark-delete only moves up (in a life, and in what is persisted);
//   - in the end every live matching message is delivered and acked.
//
// The consumer is one of three kinds (drawn): plain (Shared), pinned_client
// (Exclusive/Failover) or key_shared. For pinned_client it checks that
// there is at most one pin at a time, that every message carries the
// current pin and goes to a request with that pin (a standby gets the pin
// only when it is free), that a pin ends only after priority_timeout
// without a pull from its client or on Unpin, and that stale pulls get
// 423. For key_shared, with three pullers that reuse their reply subject:
// a key is never in flight at two pullers, and per key the first
// deliveries go in stream order.
type world struct {
	t      *rapid.T
	cfg    jsapi.ConsumerConfig
	block  uint64
	src    *fakeSource
	c      *Consumer
	now    time.Time
	serial int

	persisted     State
	persistedAcks *ackset.Set
	inflight      *snap // a snapshot being written
	reservedOK    uint64
	lastPersistMD uint64
	lifeMD        uint64
	maxDSeq       uint64
	restored      State // the state this life started from (zero if fresh)
	restoredLife  bool
	lifeAcked     map[uint64]bool
	lifeAckedUpTo uint64
	cur           map[uint64]*curDelivery // this life's latest delivery per seq
	everDelivered map[uint64]bool
	reqs          map[string]*mreq
	syncs         map[string]syncCheck // AckSync reply -> its ack, until answered
	deliveries    []Out                // every delivery, for clients to ack
	lostSyncs     map[string]bool

	kind worldKind
	life int

	// pinned_client
	curPin      string          // the pin, "" when none
	pinDeadline time.Time       // the pin may end from here on
	seenPins    map[string]bool // every pin ever given
	lastPin     string          // the latest pin a client saw
	unpinning   bool            // an Unpin call is being handled

	// key_shared
	keyOf     map[uint64]string // the key of each published message
	lastFirst map[string]uint64 // per key, the latest first delivery of this life
}

type worldKind uint8

const (
	plainKind worldKind = iota
	pinnedKind
	keyedKind
)

// pullers are the key_shared world's puller identities (reply subjects).
var pullers = []string{"p1", "p2", "p3"}

type syncCheck struct {
	seq  uint64
	acks bool // the ack leaves seq acked (policy explicit/all, seq delivered)
}

type snap struct {
	st  State
	gen uint64
}

type curDelivery struct {
	dseq     uint64
	count    uint64
	deadline time.Time
	inFlight bool
	earliest time.Time // no redelivery before
	reply    string
}

type mreq struct {
	batch, maxBytes, got, bytes int
	noWait, ended, completed    bool
	expires                     time.Time
	hb                          bool
	id                          string // pin id sent or given (pinned_client)
	mismatch                    bool   // expects "423 Nats-Pin-Id mismatch" at once
}

func TestProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld(t)
		t.Repeat(map[string]func(*rapid.T){
			"publish":   w.publish,
			"pull":      w.pull,
			"ack":       w.ack,
			"tick":      w.tick,
			"dispatch":  func(t *rapid.T) { w.handle(w.c.Dispatch(w.now)) },
			"snapshot":  w.snapshot,
			"persisted": w.persistDone,
			"persist":   func(t *rapid.T) { w.snapshot(t); w.persistDone(t) },
			"crash":     w.crash,
			"trim":      w.trim,
			"fail":      w.fail,
			"unpin":     w.unpin,
			"":          w.check,
		})
		w.drain()
	})
}

func newWorld(t *rapid.T) *world {
	cfg := jsapi.ConsumerConfig{Durable: "proc"}
	kind := rapid.SampledFrom([]worldKind{plainKind, plainKind, pinnedKind, keyedKind}).Draw(t, "kind")
	cfg.AckPolicy = rapid.SampledFrom([]jsapi.AckPolicy{jsapi.AckExplicit, jsapi.AckAll, jsapi.AckNone}).Draw(t, "ack_policy")
	switch kind {
	case pinnedKind:
		cfg.PriorityPolicy, cfg.PriorityGroups = jsapi.PriorityPinned, []string{"g"}
		cfg.PriorityTimeout = time.Duration(rapid.IntRange(1, 4).Draw(t, "priority_timeout_s")) * time.Second
	case keyedKind:
		cfg.AckPolicy = jsapi.AckExplicit
		cfg.Metadata = map[string]string{MetaSubscription: SubscriptionKeyShared}
		if rapid.Bool().Draw(t, "key_header") {
			cfg.Metadata[MetaKey] = "header:K"
		}
	}
	if cfg.AckPolicy != jsapi.AckNone {
		cfg.AckWait = time.Duration(rapid.IntRange(1, 3).Draw(t, "ack_wait_s")) * time.Second
		if rapid.Bool().Draw(t, "backoff") {
			cfg.BackOff = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
		}
		cfg.MaxAckPending = rapid.SampledFrom([]int{0, 1, 3, -1}).Draw(t, "max_ack_pending")
	}
	cfg.MaxDeliver = rapid.SampledFrom([]int{-1, 2, 3}).Draw(t, "max_deliver")
	switch rapid.IntRange(0, 3).Draw(t, "filter") {
	case 1:
		cfg.FilterSubject = "s.a"
	case 2:
		cfg.FilterSubject = "s.*"
	case 3:
		cfg.FilterSubjects = []string{"s.a", "t.a"}
	}
	w := &world{t: t, cfg: cfg, block: uint64(rapid.IntRange(2, 8).Draw(t, "dseq_block")),
		src: newSource(), now: t0, reqs: map[string]*mreq{}, syncs: map[string]syncCheck{},
		lostSyncs: map[string]bool{}, everDelivered: map[uint64]bool{},
		kind: kind, seenPins: map[string]bool{}, keyOf: map[uint64]string{}}
	c, err := New(cfg, nil, w.now, w.src, w.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	w.c = c
	w.persistedAcks = ackset.New(0)
	// The driver persists the consumer as it creates it.
	st, gen, _ := c.Snapshot()
	w.inflight = &snap{st, gen}
	w.persistDoneNow()
	w.newLife()
	return w
}

// opts are New's options for this life (pin ids unique across lives).
func (w *world) opts() []Option {
	life := w.life
	return []Option{StreamName("S"), DSeqBlock(w.block), PinIDs(pinCounter(fmt.Sprintf("L%d.", life)))}
}

func (w *world) newLife() {
	w.lifeAcked = map[uint64]bool{}
	w.lifeAckedUpTo = 0
	w.cur = map[uint64]*curDelivery{}
	w.lifeMD = w.c.MarkDelete()
	w.curPin = ""
	w.lastFirst = map[string]uint64{}
}

func (w *world) ackWait(count uint64) time.Duration {
	if n := len(w.cfg.BackOff); n > 0 {
		return w.cfg.BackOff[min(int(count), n)-1]
	}
	return w.cfg.AckWait
}

func (w *world) publish(t *rapid.T) {
	subj := rapid.SampledFrom([]string{"s.a", "s.b", "t.a"}).Draw(t, "subject")
	data := rapid.StringN(0, 40, -1).Draw(t, "data")
	seq := w.src.publish(w.now, subj, data)
	key := subj
	if w.cfg.Metadata[MetaKey] == "header:K" {
		key = rapid.SampledFrom([]string{"", "1", "2"}).Draw(t, "key")
		if key != "" {
			w.src.msgs[seq-1].Header = []byte("NATS/1.0\r\nK: " + key + "\r\n\r\n")
		}
	}
	w.keyOf[seq] = key
	if rapid.Bool().Draw(t, "dispatch") {
		w.handle(w.c.Dispatch(w.now))
	}
}

func (w *world) pull(t *rapid.T) {
	w.serial++
	reply := fmt.Sprintf("r%d", w.serial)
	if w.kind == keyedKind {
		// A puller keeps its reply subject; one request at a time each.
		reply = rapid.SampledFrom(pullers).Draw(t, "puller")
		if r := w.reqs[reply]; r != nil && !r.ended {
			return
		}
	}
	req := jsapi.PullRequest{Batch: rapid.IntRange(1, 5).Draw(t, "batch"), NoWait: rapid.Bool().Draw(t, "no_wait")}
	if rapid.Bool().Draw(t, "max_bytes") {
		req.MaxBytes = rapid.IntRange(30, 200).Draw(t, "bytes")
	}
	if !req.NoWait || rapid.Bool().Draw(t, "no_wait_expires") {
		req.Expires = time.Duration(rapid.IntRange(0, 10).Draw(t, "expires_s")) * time.Second
		if req.Expires > 0 && rapid.Bool().Draw(t, "hb") {
			req.IdleHeartbeat = req.Expires / 2
		}
	}
	if w.kind == pinnedKind {
		req.Group = "g"
		if rapid.IntRange(0, 20).Draw(t, "no_group") == 0 {
			req.Group = ""
		}
		switch rapid.IntRange(0, 3).Draw(t, "pin_id") {
		case 1:
			req.ID = w.lastPin
		case 2:
			req.ID = w.curPin // a client that knows the pin
		case 3:
			req.ID = "stale"
		}
	}
	r := w.addReq(reply, req)
	if req.Group != "" && w.curPin != "" {
		if req.ID == w.curPin {
			w.pinDeadline = w.now.Add(w.cfg.PriorityTimeout)
		} else if req.ID != "" {
			r.mismatch = true
		}
	}
	w.handle(w.c.Pull(w.now, reply, req))
	if r.mismatch && !r.ended {
		t.Fatalf("pull with pin %q while %q is pinned not refused", req.ID, w.curPin)
	}
	w.checkNoWait(reply)
}

func (w *world) unpin(t *rapid.T) {
	if w.kind != pinnedKind || rapid.IntRange(0, 3).Draw(t, "unpin_rarely") != 0 {
		return
	}
	had := w.curPin
	w.unpinning = true
	outs, err := w.c.Unpin(w.now, "g")
	if err != nil {
		t.Fatal(err)
	}
	w.handle(outs)
	w.unpinning = false
	if had != "" && w.curPin == had {
		t.Fatalf("Unpin kept pin %s", had)
	}
}

func (w *world) addReq(reply string, req jsapi.PullRequest) *mreq {
	r := &mreq{batch: max(req.Batch, 1), maxBytes: req.MaxBytes, noWait: req.NoWait, hb: req.IdleHeartbeat > 0, id: req.ID}
	if req.Expires > 0 {
		r.expires = w.now.Add(req.Expires)
	}
	w.reqs[reply] = r
	return r
}

// checkNoWait: a no_wait request without expiry is answered within the
// call unless the dseq reservation stalls dispatch.
func (w *world) checkNoWait(reply string) {
	r := w.reqs[reply]
	if r.noWait && r.expires.IsZero() && !r.ended && w.c.dseq < w.c.persistedReserved {
		w.t.Fatalf("no_wait request %s left waiting", reply)
	}
}

func (w *world) ack(t *rapid.T) {
	if len(w.deliveries) == 0 {
		return
	}
	// Mostly one of the latest deliveries (in flight), sometimes any.
	recent := w.deliveries[max(0, len(w.deliveries)-3):]
	if rapid.IntRange(0, 3).Draw(t, "stale") == 0 {
		recent = w.deliveries
	}
	d := rapid.SampledFrom(recent).Draw(t, "delivery")
	s, dseq := d.Ack.StreamSeq, d.Ack.ConsumerSeq
	kind := rapid.SampledFrom([]jsapi.AckKind{jsapi.AckAck, jsapi.AckAck, jsapi.AckNak, jsapi.AckProgress,
		jsapi.AckTerm, jsapi.AckNext, jsapi.AckUnknown}).Draw(t, "kind")
	a := jsapi.Ack{Kind: kind}
	if kind == jsapi.AckNak && rapid.Bool().Draw(t, "nak_delay") {
		a.Delay = time.Duration(rapid.IntRange(1, 5).Draw(t, "delay_s")) * time.Second
	}
	// The model's view of what the ack does.
	effective := w.cfg.AckPolicy != jsapi.AckNone && s <= w.c.delivered
	reply := ""
	w.serial++
	switch {
	case kind == jsapi.AckNext && w.kind == plainKind && rapid.Bool().Draw(t, "nxt_pull"):
		reply = fmt.Sprintf("x%d", w.serial)
		n := rapid.IntRange(1, 3).Draw(t, "nxt_batch")
		a.Next = fmt.Appendf(nil, `{"batch":%d}`, n)
		w.addReq(reply, jsapi.PullRequest{Batch: n})
	case (kind == jsapi.AckAck || kind == jsapi.AckTerm) && rapid.Bool().Draw(t, "sync"):
		reply = fmt.Sprintf("s%d", w.serial)
		w.syncs[reply] = syncCheck{s, effective}
	}
	cd := w.cur[s]
	switch kind {
	case jsapi.AckAck, jsapi.AckTerm, jsapi.AckNext:
		if effective && w.cfg.AckPolicy == jsapi.AckAll {
			w.lifeAckedUpTo = max(w.lifeAckedUpTo, s)
		} else if effective {
			w.lifeAcked[s] = true
		}
	case jsapi.AckNak:
		if cd != nil && cd.inFlight && cd.dseq == dseq && !w.acked(s) {
			cd.inFlight = false
			cd.earliest = w.now.Add(a.Delay)
		}
	case jsapi.AckProgress:
		if cd != nil && cd.inFlight && cd.dseq == dseq && !w.acked(s) {
			cd.deadline = w.now.Add(w.ackWait(cd.count))
			cd.earliest = cd.deadline
		}
	}
	w.handle(w.c.Ack(w.now, s, dseq, a, reply))
}

func (w *world) acked(s uint64) bool { return w.lifeAcked[s] || s <= w.lifeAckedUpTo }

func (w *world) tick(t *rapid.T) {
	w.now = w.now.Add(time.Duration(rapid.IntRange(0, 3000).Draw(t, "advance_ms")) * time.Millisecond)
	if rapid.Bool().Draw(t, "to_deadline") {
		if next := w.c.NextDeadline(); next.After(w.now) {
			w.now = next
		}
	}
	w.ackWaitsEnd()
	pin := w.curPin
	w.handle(w.c.Tick(w.now))
	if pin != "" && !w.now.Before(w.pinDeadline) && w.curPin == pin {
		t.Fatalf("pin %s outlived its priority_timeout (%v)", pin, w.pinDeadline.Sub(t0))
	}
}

// ackWaitsEnd ends, in the model, the deliveries whose ack wait is over
// (before a Tick at w.now).
func (w *world) ackWaitsEnd() {
	for _, cd := range w.cur {
		if cd.inFlight && !w.now.Before(cd.deadline) {
			cd.inFlight = false
		}
	}
}

func (w *world) snapshot(t *rapid.T) {
	if w.inflight != nil {
		return
	}
	if st, gen, dirty := w.c.Snapshot(); dirty {
		w.inflight = &snap{st, gen}
	}
}

func (w *world) persistDone(t *rapid.T) {
	if w.inflight == nil {
		return
	}
	w.write(w.inflight.st)
	gen := w.inflight.gen
	w.inflight = nil
	w.reservedOK = max(w.reservedOK, w.persisted.DSeqReserved)
	w.handle(w.c.Persisted(gen))
}

// write is the driver's persist of st completing.
func (w *world) write(st State) {
	if st.MarkDelete < w.lastPersistMD {
		w.t.Fatalf("persisted mark-delete went down: %d -> %d", w.lastPersistMD, st.MarkDelete)
	}
	w.lastPersistMD = st.MarkDelete
	w.persisted = st
	acks := ackset.New(st.MarkDelete)
	if len(st.AckedAbove) > 0 {
		if err := acks.UnmarshalBinary(st.AckedAbove); err != nil {
			w.t.Fatal(err)
		}
	}
	w.persistedAcks = acks
}

func (w *world) crash(t *rapid.T) {
	if w.inflight != nil && rapid.Bool().Draw(t, "write_completed") {
		w.write(w.inflight.st)
	}
	w.inflight = nil
	for _, r := range w.reqs {
		r.ended = true
	}
	for reply := range w.syncs {
		w.lostSyncs[reply] = true
		delete(w.syncs, reply)
	}
	st := w.persisted
	w.life++
	c, err := New(w.cfg, &st, w.now, w.src, w.opts()...)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	w.c = c
	w.reservedOK = st.DSeqReserved
	w.restored, w.restoredLife = st, true
	w.newLife()
}

func (w *world) trim(t *rapid.T) {
	if rapid.IntRange(0, 3).Draw(t, "trim_rarely") != 0 || w.src.LastSeq() == 0 {
		return
	}
	w.src.trim(w.src.first + uint64(rapid.IntRange(0, 2).Draw(t, "trim_n")))
}

func (w *world) fail(t *rapid.T) {
	if len(w.src.fail) > 0 {
		clear(w.src.fail)
		return
	}
	if last := w.src.LastSeq(); last > 0 {
		w.src.fail[rapid.Uint64Range(1, last+2).Draw(t, "fail_seq")] = errors.New("bookie down")
	}
}

// handle checks each Out against the model.
func (w *world) handle(outs []Out) {
	t := w.t
	for _, o := range outs {
		switch o.Kind {
		case Deliver:
			w.checkDelivery(o)
		case Status:
			w.checkStatus(o)
		case AckReply:
			sc, ok := w.syncs[o.Reply]
			if !ok {
				t.Fatalf("unexpected ack reply %s (lost %v)", o.Reply, w.lostSyncs[o.Reply])
			}
			delete(w.syncs, o.Reply)
			// An ack of a delivered message leaves it acked: the reply
			// must wait until that is persisted.
			if s := sc.seq; sc.acks && !w.persistedAcks.Contains(s) {
				t.Fatalf("AckSync %s for %d answered before the ack was persisted", o.Reply, s)
			}
		case Advisory:
			if w.cfg.MaxDeliver <= 0 || o.Ack.Delivered < uint64(w.cfg.MaxDeliver) {
				t.Fatalf("advisory %+v below max_deliver %d", o, w.cfg.MaxDeliver)
			}
			w.lifeAcked[o.Seq] = true
		case Pinned:
			r := w.reqs[o.Reply]
			switch {
			case w.kind != pinnedKind || w.curPin != "":
				t.Fatalf("pin %s given while %q is pinned", o.PinID, w.curPin)
			case o.PinID == "" || w.seenPins[o.PinID] || o.Group != "g":
				t.Fatalf("pin %+v not new", o)
			case r == nil || r.ended || r.id != "":
				t.Fatalf("pin %s given to request %s %+v", o.PinID, o.Reply, r)
			}
			w.curPin, w.seenPins[o.PinID], r.id = o.PinID, true, o.PinID
			w.pinDeadline = w.now.Add(w.cfg.PriorityTimeout)
		case Unpinned:
			switch {
			case w.curPin == "":
				t.Fatalf("unpinned without a pin")
			case o.Reason == "admin" && !w.unpinning, o.Reason == "timeout" && w.now.Before(w.pinDeadline),
				o.Reason != "admin" && o.Reason != "timeout":
				t.Fatalf("unpinned (%s) at %v, pin deadline %v", o.Reason, w.now.Sub(t0), w.pinDeadline.Sub(t0))
			}
			w.curPin = ""
		default:
			t.Fatalf("bad out %+v", o)
		}
	}
	w.check(t)
}

func (w *world) checkDelivery(o Out) {
	t, m := w.t, o.Ack
	s := m.StreamSeq
	if m.ConsumerSeq <= w.maxDSeq {
		t.Fatalf("dseq %d not above %d", m.ConsumerSeq, w.maxDSeq)
	}
	w.maxDSeq = m.ConsumerSeq
	if m.ConsumerSeq > w.reservedOK {
		t.Fatalf("dseq %d above the persisted reservation %d", m.ConsumerSeq, w.reservedOK)
	}
	if w.acked(s) || w.persistedAcks.Contains(s) {
		t.Fatalf("seq %d redelivered after its ack (life %v, persisted %v)", s, w.acked(s), w.persistedAcks.Contains(s))
	}
	if !w.c.matches(o.Msg.Subject) || o.Msg.Seq != s || s < w.src.first || s > w.src.LastSeq() {
		t.Fatalf("delivered %+v (first %d)", o.Msg, w.src.first)
	}
	if w.cfg.MaxDeliver > 0 && m.Delivered > uint64(w.cfg.MaxDeliver) {
		t.Fatalf("seq %d delivered %d times, max_deliver %d", s, m.Delivered, w.cfg.MaxDeliver)
	}
	if cd := w.cur[s]; cd != nil {
		if m.Delivered <= cd.count {
			t.Fatalf("seq %d delivery count %d after %d", s, m.Delivered, cd.count)
		}
		if w.now.Before(cd.earliest) {
			t.Fatalf("seq %d redelivered at %v, not before %v", s, w.now.Sub(t0), cd.earliest.Sub(t0))
		}
	} else if w.restoredLife && s <= w.restored.Delivered && !slices.Contains(w.restored.Held, s) {
		if m.Delivered < max(2, uint64(w.restored.Redelivered[s])+1) {
			t.Fatalf("seq %d restored delivery count %d (stored %d)", s, m.Delivered, w.restored.Redelivered[s])
		}
	} else if m.Delivered != 1 {
		t.Fatalf("seq %d first delivery count %d", s, m.Delivered)
	}
	w.checkKinds(o)
	deadline := w.now.Add(w.ackWait(m.Delivered))
	w.cur[s] = &curDelivery{dseq: m.ConsumerSeq, count: m.Delivered, deadline: deadline, inFlight: true, earliest: deadline, reply: o.Reply}
	if w.cfg.AckPolicy == jsapi.AckNone {
		w.lifeAcked[s] = true
	}
	w.everDelivered[s] = true
	w.deliveries = append(w.deliveries, o)

	r := w.reqs[o.Reply]
	if r == nil || r.ended {
		t.Fatalf("delivery to ended or unknown request %s", o.Reply)
	}
	size := len(o.Msg.Subject) + len(o.Msg.Header) + len(o.Msg.Data) + len(jsapi.FormatAckSubject(m))
	r.got++
	r.bytes += size
	if r.got > r.batch || (r.maxBytes > 0 && r.bytes > r.maxBytes) {
		t.Fatalf("request %s got %d msgs %d bytes of %d/%d", o.Reply, r.got, r.bytes, r.batch, r.maxBytes)
	}
	if r.got == r.batch || (r.maxBytes > 0 && r.bytes == r.maxBytes) {
		r.ended, r.completed = true, r.got == r.batch
	}
}

func (w *world) checkStatus(o Out) {
	t := w.t
	r := w.reqs[o.Reply]
	if r == nil {
		t.Fatalf("status to unknown request %+v", o)
	}
	if r.ended {
		if r.completed && o.Status == 409 && o.Description == jsapi.DescBatchCompleted {
			r.completed = false
			if r.maxBytes == 0 || o.PendingBytes != r.maxBytes-r.bytes || o.PendingBytes <= 0 || o.PendingMsgs != 0 {
				t.Fatalf("batch completed %+v for %+v", o, r)
			}
			return
		}
		t.Fatalf("status %d %s to ended request %s", o.Status, o.Description, o.Reply)
	}
	left, bytesLeft := r.batch-r.got, 0
	if r.maxBytes > 0 {
		bytesLeft = r.maxBytes - r.bytes
	}
	switch {
	case o.Status == 100:
		if !r.hb {
			t.Fatalf("heartbeat to %s without idle_heartbeat", o.Reply)
		}
		return
	case o.Status == 400 && o.Description == jsapi.DescBadRequest("Priority Group missing"):
		if w.kind != pinnedKind || r.got > 0 {
			t.Fatalf("%+v to %+v", o, r)
		}
		r.ended = true
		return
	case o.Status == 423 && o.Description == jsapi.DescPinIDMismatch:
		if !r.mismatch || r.got > 0 {
			t.Fatalf("%+v to %+v (pin %q)", o, r, w.curPin)
		}
		r.ended = true
		return
	case o.Status == 423 && o.Description == jsapi.DescWrongPinID:
		if r.id == "" || r.id == w.curPin {
			t.Fatalf("%+v to %+v (pin %q)", o, r, w.curPin)
		}
	case o.Status == 408:
		if r.expires.IsZero() || w.now.Before(r.expires) {
			t.Fatalf("408 to %s before expiry", o.Reply)
		}
	case o.Status == 404:
		if !r.noWait {
			t.Fatalf("404 to waiting request %s", o.Reply)
		}
	case o.Status == 409 && o.Description == jsapi.DescMaxBytesExceeded:
		if r.maxBytes == 0 {
			t.Fatalf("max bytes status without max_bytes")
		}
	default:
		t.Fatalf("unexpected status %+v", o)
	}
	if o.Status != 404 && (o.PendingMsgs != left || o.PendingBytes != bytesLeft) {
		t.Fatalf("status %d pending %d/%d, want %d/%d", o.Status, o.PendingMsgs, o.PendingBytes, left, bytesLeft)
	}
	r.ended = true
}

// checkKinds checks a delivery against the pinned_client and key_shared
// rules.
func (w *world) checkKinds(o Out) {
	t, s := w.t, o.Ack.StreamSeq
	r := w.reqs[o.Reply]
	switch w.kind {
	case pinnedKind:
		if o.PinID == "" || o.PinID != w.curPin || r == nil || r.id != w.curPin {
			t.Fatalf("delivery %d with pin %q to %s %+v; pinned %q", s, o.PinID, o.Reply, r, w.curPin)
		}
		w.lastPin = o.PinID
	case keyedKind:
		key := w.keyOf[s]
		for s2, cd := range w.cur {
			if s2 != s && cd.inFlight && !w.acked(s2) && w.keyOf[s2] == key && cd.reply != o.Reply {
				t.Fatalf("key %q: %d to %s while %d is in flight at %s", key, s, o.Reply, s2, cd.reply)
			}
		}
		if o.Ack.Delivered == 1 {
			if last, ok := w.lastFirst[key]; ok && s <= last {
				t.Fatalf("key %q: first delivery of %d after %d", key, s, last)
			}
			w.lastFirst[key] = s
		}
	default:
		if o.PinID != "" {
			t.Fatalf("pin %q on a plain consumer", o.PinID)
		}
	}
}

func (w *world) check(t *rapid.T) {
	w.c.checkInvariants(t)
	md := w.c.MarkDelete()
	if md < w.lifeMD {
		t.Fatalf("mark-delete went down: %d -> %d", w.lifeMD, md)
	}
	w.lifeMD = md
	if mp := w.cfg.MaxAckPending; mp > 0 && len(w.c.pending) > mp {
		t.Fatalf("num_ack_pending %d above %d", len(w.c.pending), mp)
	}
	if n := len(w.c.held); n > w.c.maxHeld() {
		t.Fatalf("%d messages held, at most %d", n, w.c.maxHeld())
	}
}

// drain heals the world and consumes everything: every live matching
// message must end up delivered and acked, every AckSync answered.
func (w *world) drain() {
	t := w.t
	clear(w.src.fail)
	if w.inflight != nil {
		w.persistDoneNow()
	}
	acked := len(w.deliveries)
	// settle handles outs, then acks every new delivery and persists
	// until nothing changes.
	settle := func(outs []Out) {
		w.handle(outs)
		for n := 0; n < 10000; n++ {
			if acked < len(w.deliveries) {
				d := w.deliveries[acked]
				acked++
				if w.cfg.AckPolicy != jsapi.AckNone {
					w.lifeAcked[d.Ack.StreamSeq] = true
				}
				w.handle(w.c.Ack(w.now, d.Ack.StreamSeq, d.Ack.ConsumerSeq, jsapi.Ack{Kind: jsapi.AckAck}, ""))
				continue
			}
			st, gen, dirty := w.c.Snapshot()
			if !dirty {
				return
			}
			w.inflight = &snap{st, gen}
			w.persistDoneNow()
		}
		t.Fatal("drain does not settle")
	}
	for i := 0; i < 1000; i++ {
		settle(nil)
		if w.c.MarkDelete() == w.src.LastSeq() && len(w.c.pending) == 0 && len(w.syncs) == 0 {
			break
		}
		w.serial++
		reply := fmt.Sprintf("d%d", w.serial)
		req := jsapi.PullRequest{Batch: 100, NoWait: true}
		if w.kind == pinnedKind {
			req.Group = "g"
			if w.curPin != "" { // the drainer takes the pin over
				w.unpinning = true
				outs, _ := w.c.Unpin(w.now, "g")
				w.handle(outs)
				w.unpinning = false
			}
		}
		w.addReq(reply, req)
		settle(w.c.Pull(w.now, reply, req))
		w.now = w.now.Add(5 * time.Second)
		w.ackWaitsEnd()
		settle(w.c.Tick(w.now))
	}
	if md, last := w.c.MarkDelete(), w.src.LastSeq(); md != last || len(w.c.pending) != 0 {
		t.Fatalf("drained to mark-delete %d of %d, %d pending", md, last, len(w.c.pending))
	}
	if len(w.syncs) != 0 {
		t.Fatalf("AckSyncs never answered: %v", w.syncs)
	}
	for s := w.src.first; s <= w.src.LastSeq(); s++ {
		if w.c.matches(w.src.msgs[s-1].Subject) && !w.everDelivered[s] {
			t.Fatalf("live matching seq %d never delivered", s)
		}
	}
}

func (w *world) persistDoneNow() {
	w.write(w.inflight.st)
	gen := w.inflight.gen
	w.inflight = nil
	w.reservedOK = max(w.reservedOK, w.persisted.DSeqReserved)
	w.handle(w.c.Persisted(gen))
}
