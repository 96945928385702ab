package consumer

import (
	"testing"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
)

// §5 item 29: an unacked message comes back after ack_wait with
// delivered=2 and a new dseq; +WPI postpones it.
func TestAckWaitRedelivery(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(nil)) // ack_wait 2s
	h.publishN(2)
	expectOuts(t, h.pull("a", jsapi.PullRequest{Batch: 1}), "a<-1(d1,n1)")
	expectOuts(t, h.pull("b", jsapi.PullRequest{Batch: 5, Expires: time.Minute}), "b<-2(d2,n1)")
	h.advance(1999 * time.Millisecond)
	expectOuts(t, h.tick(), "")
	h.advance(time.Millisecond)
	expectOuts(t, h.tick(), "b<-1(d3,n2); b<-2(d4,n2)")
	if info := h.c.Info(h.now); info.NumRedelivered != 2 || info.NumAckPending != 2 {
		t.Fatalf("info %+v", info)
	}

	// +WPI restarts the timer of the current delivery; a stale WPI (old
	// dseq) does not.
	h.advance(1500 * time.Millisecond)
	h.c.Ack(h.now, 1, 3, jsapi.Ack{Kind: jsapi.AckProgress}, "")
	h.c.Ack(h.now, 2, 2, jsapi.Ack{Kind: jsapi.AckProgress}, "")
	h.advance(500 * time.Millisecond) // seq 2 is due, seq 1 is not
	expectOuts(t, h.tick(), "b<-2(d5,n3)")
	h.advance(1499 * time.Millisecond)
	expectOuts(t, h.tick(), "")
	h.advance(time.Millisecond)
	expectOuts(t, h.tick(), "b<-1(d6,n3)")
}

func TestRedeliveryBeforeNew(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(nil))
	h.publishN(3)
	expectOuts(t, h.pull("a", jsapi.PullRequest{Batch: 2}), "a<-1(d1,n1); a<-2(d2,n1)")
	h.c.Ack(h.now, 2, 2, jsapi.Ack{Kind: jsapi.AckNak}, "")
	h.c.Ack(h.now, 1, 1, jsapi.Ack{Kind: jsapi.AckNak}, "")
	expectOuts(t, h.pull("b", jsapi.PullRequest{Batch: 3}), "b<-1(d3,n2); b<-2(d4,n2); b<-3(d5,n1)")
}

// §5 item 30: Nak redelivers at once; NakWithDelay(d) no sooner than d.
func TestNak(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(func(c *jsapi.ConsumerConfig) { c.AckWait = time.Minute }))
	h.publishN(1)
	expectOuts(t, h.pull("a", jsapi.PullRequest{Batch: 1}), "a<-1(d1,n1)")
	h.pull("b", jsapi.PullRequest{Batch: 5, Expires: time.Minute})
	expectOuts(t, h.c.Ack(h.now, 1, 1, jsapi.Ack{Kind: jsapi.AckNak}, ""), "b<-1(d2,n2)")
	// A duplicate or stale NAK is ignored.
	expectOuts(t, h.c.Ack(h.now, 1, 1, jsapi.Ack{Kind: jsapi.AckNak}, ""), "")
	expectOuts(t, h.c.Ack(h.now, 1, 2, jsapi.Ack{Kind: jsapi.AckNak, Delay: 5 * time.Second}, ""), "")
	if got := h.c.NextDeadline(); !got.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("NextDeadline %v", got)
	}
	expectOuts(t, h.c.Ack(h.now, 1, 2, jsapi.Ack{Kind: jsapi.AckNak}, ""), "") // no longer in flight
	h.advance(4999 * time.Millisecond)
	expectOuts(t, h.tick(), "")
	h.advance(time.Millisecond)
	expectOuts(t, h.tick(), "b<-1(d3,n3)")
	// An ack of the NAKed (delayed) message still counts.
	h.c.Ack(h.now, 1, 3, jsapi.Ack{Kind: jsapi.AckNak, Delay: time.Second}, "")
	h.c.Ack(h.now, 1, 3, jsapi.Ack{Kind: jsapi.AckAck}, "")
	h.advance(time.Hour)
	expectOuts(t, h.tick(), "b<-408 Request Timeout [3/0]")
	if md := h.c.MarkDelete(); md != 1 {
		t.Fatalf("mark-delete %d", md)
	}
}

// §5 item 31: Term is never redelivered; after max_deliver deliveries the
// message stops, with an advisory, and the floor moves past it.
func TestTermAndMaxDeliver(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(func(c *jsapi.ConsumerConfig) { c.MaxDeliver = 2 }))
	h.publishN(2)
	expectOuts(t, h.pull("a", jsapi.PullRequest{Batch: 2}), "a<-1(d1,n1); a<-2(d2,n1)")
	h.c.Ack(h.now, 1, 1, jsapi.Ack{Kind: jsapi.AckTerm, Reason: "poison"}, "")
	h.pull("b", jsapi.PullRequest{Batch: 10, Expires: time.Hour})
	h.advance(2 * time.Second)
	expectOuts(t, h.tick(), "b<-2(d3,n2)")
	h.advance(2 * time.Second)
	expectOuts(t, h.tick(), "maxdeliver:2(2)")
	if info := h.c.Info(h.now); info.AckFloor.Stream != 2 || info.NumAckPending != 0 {
		t.Fatalf("ack floor %+v pending %d", info.AckFloor, info.NumAckPending)
	}
	h.advance(time.Minute)
	expectOuts(t, h.tick(), "")
	// A NAK at max_deliver stops it too.
	h.publishN(1)
	expectOuts(t, h.c.Dispatch(h.now), "b<-3(d4,n1)")
	expectOuts(t, h.c.Ack(h.now, 3, 4, jsapi.Ack{Kind: jsapi.AckNak}, ""), "b<-3(d5,n2)")
	expectOuts(t, h.c.Ack(h.now, 3, 5, jsapi.Ack{Kind: jsapi.AckNak}, ""), "maxdeliver:3(2)")
	if md := h.c.MarkDelete(); md != 3 {
		t.Fatalf("mark-delete %d", md)
	}
}

// §5 item 32: AckSync gets an empty reply once the ack is persisted; a
// second ack is harmless.
func TestAckSync(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(nil))
	h.publishN(2)
	h.pull("a", jsapi.PullRequest{Batch: 2})
	h.persist()
	expectOuts(t, h.c.Ack(h.now, 1, 1, jsapi.Ack{Kind: jsapi.AckAck}, "s1"), "")
	expectOuts(t, h.c.Ack(h.now, 1, 1, jsapi.Ack{Kind: jsapi.AckAck}, "s2"), "") // not persisted yet: waits
	st, gen, dirty := h.c.Snapshot()
	if !dirty || st.MarkDelete != 1 {
		t.Fatalf("snapshot dirty %v md %d", dirty, st.MarkDelete)
	}
	expectOuts(t, h.c.Ack(h.now, 2, 2, jsapi.Ack{Kind: jsapi.AckTerm}, "s3"), "")
	expectOuts(t, h.c.Persisted(gen), "ackok:s1; ackok:s2") // s3 is after gen
	expectOuts(t, h.c.Persisted(gen), "")
	expectOuts(t, h.persist(), "ackok:s3")
	// Persisted and clean: a duplicate is answered at once; so are NAK and
	// WPI of deliveries that are gone, and unknown bodies get nothing.
	expectOuts(t, h.c.Ack(h.now, 1, 1, jsapi.Ack{Kind: jsapi.AckAck}, "s4"), "ackok:s4")
	expectOuts(t, h.c.Ack(h.now, 2, 2, jsapi.Ack{Kind: jsapi.AckNak}, "s5"), "ackok:s5")
	expectOuts(t, h.c.Ack(h.now, 2, 2, jsapi.Ack{Kind: jsapi.AckProgress}, "s6"), "ackok:s6")
	expectOuts(t, h.c.Ack(h.now, 2, 2, jsapi.Ack{Kind: jsapi.AckUnknown}, "s7"), "")
	expectOuts(t, h.c.Ack(h.now, 99, 99, jsapi.Ack{Kind: jsapi.AckAck}, "s8"), "ackok:s8")
}

// §5 item 33: AckAll on sseq N clears everything <= N.
func TestAckAll(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(func(c *jsapi.ConsumerConfig) { c.AckPolicy = jsapi.AckAll }))
	h.publishN(5)
	h.pull("a", jsapi.PullRequest{Batch: 5})
	h.c.Ack(h.now, 3, 3, jsapi.Ack{Kind: jsapi.AckAck}, "")
	info := h.c.Info(h.now)
	if info.AckFloor.Stream != 3 || info.NumAckPending != 2 || info.AckFloor.Consumer != 3 {
		t.Fatalf("after ack 3: floor %+v pending %d", info.AckFloor, info.NumAckPending)
	}
	h.c.Ack(h.now, 9, 9, jsapi.Ack{Kind: jsapi.AckAck}, "") // never delivered: ignored
	h.c.Ack(h.now, 5, 5, jsapi.Ack{Kind: jsapi.AckAck}, "")
	info = h.c.Info(h.now)
	if info.AckFloor.Stream != 5 || info.NumAckPending != 0 || info.AckFloor.Consumer != 5 {
		t.Fatalf("after ack 5: floor %+v pending %d", info.AckFloor, info.NumAckPending)
	}
	h.c.checkInvariants(t)
}

// §5 item 34: max_ack_pending=1 holds back the second message until the
// first is acked or times out; a request waits, then gets 408.
func TestMaxAckPending(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(func(c *jsapi.ConsumerConfig) { c.MaxAckPending = 1; c.AckWait = time.Minute }))
	h.publishN(3)
	expectOuts(t, h.pull("a", jsapi.PullRequest{Batch: 2, Expires: 5 * time.Second}), "a<-1(d1,n1)")
	h.advance(5 * time.Second)
	expectOuts(t, h.tick(), "a<-408 Request Timeout [1/0]")
	h.pull("b", jsapi.PullRequest{Batch: 5, Expires: 2 * time.Minute})
	expectOuts(t, h.c.Ack(h.now, 1, 1, jsapi.Ack{Kind: jsapi.AckAck}, ""), "b<-2(d2,n1)")
	// Timing out does not free the slot, but the redelivery still goes.
	h.advance(time.Minute)
	expectOuts(t, h.tick(), "b<-2(d3,n2)")
	if n := h.c.Info(h.now).NumAckPending; n != 1 {
		t.Fatalf("num_ack_pending %d", n)
	}
}

// ack_policy none: acked at dispatch, still with ack subjects.
func TestAckNone(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(func(c *jsapi.ConsumerConfig) { c.AckPolicy = jsapi.AckNone; c.AckWait = 0 }))
	h.publishN(3)
	outs := h.pull("a", jsapi.PullRequest{Batch: 3})
	expectOuts(t, outs, "a<-1(d1,n1); a<-2(d2,n1); a<-3(d3,n1)")
	if outs[2].Ack.Stream != "ORDERS" || outs[2].Ack.Pending != 0 {
		t.Fatalf("ack meta %+v", outs[2].Ack)
	}
	info := h.c.Info(h.now)
	if info.AckFloor.Stream != 3 || info.AckFloor.Consumer != 3 || info.NumAckPending != 0 {
		t.Fatalf("info %+v", info)
	}
	expectOuts(t, h.c.Ack(h.now, 1, 1, jsapi.Ack{Kind: jsapi.AckNak}, ""), "")
	h.advance(time.Hour)
	expectOuts(t, h.tick(), "")
	if !h.c.NextDeadline().IsZero() {
		t.Fatal("ack none has timers")
	}
}

// backoff[i] is the wait of delivery i+1, the last one repeating.
func TestBackoff(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(func(c *jsapi.ConsumerConfig) {
		c.BackOff = []time.Duration{time.Second, 3 * time.Second}
		c.MaxDeliver = 5
	}))
	h.publishN(1)
	h.pull("a", jsapi.PullRequest{Batch: 10, Expires: time.Hour})
	var got []time.Duration
	last := h.now
	for i := 0; i < 4; i++ {
		next := h.c.NextDeadline()
		got = append(got, next.Sub(last))
		h.now, last = next, next
		h.tick()
	}
	want := []time.Duration{time.Second, 3 * time.Second, 3 * time.Second, 3 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
}

// +NXT acks and pulls to the ack's reply; a bad body gets 400.
func TestAckNext(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(nil))
	h.publishN(3)
	expectOuts(t, h.pull("a", jsapi.PullRequest{Batch: 1}), "a<-1(d1,n1)")
	outs := h.c.Ack(h.now, 1, 1, jsapi.Ack{Kind: jsapi.AckNext, Next: []byte(`{"batch":2}`)}, "nxt")
	expectOuts(t, outs, "nxt<-2(d2,n1); nxt<-3(d3,n1)")
	if h.c.MarkDelete() != 1 {
		t.Fatal("+NXT did not ack")
	}
	expectOuts(t, h.c.Ack(h.now, 2, 2, jsapi.Ack{Kind: jsapi.AckNext, Next: []byte(`{"batch":`)}, "nxt"),
		"nxt<-400 Bad Request - unexpected end of JSON input")
	expectOuts(t, h.c.Ack(h.now, 3, 3, jsapi.Ack{Kind: jsapi.AckNext}, ""), "") // no reply: plain ack
	if h.c.MarkDelete() != 3 {
		t.Fatalf("mark-delete %d", h.c.MarkDelete())
	}
}

// Stale timer and queue items are dropped, so repeated +WPI and NAK/ack
// churn keep the heaps bounded by the pending count.
func TestHeapsStayBounded(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(func(c *jsapi.ConsumerConfig) { c.AckWait = time.Minute }))
	h.publishN(3)
	h.pull("a", jsapi.PullRequest{Batch: 3})
	for i := 0; i < 1000; i++ {
		h.advance(time.Millisecond)
		h.c.Ack(h.now, 1, 1, jsapi.Ack{Kind: jsapi.AckProgress}, "")
	}
	if n := h.c.timers.len(); n > 2*3+64+1 {
		t.Fatalf("%d timer items for 3 pending", n)
	}
	if got, want := h.c.NextDeadline(), t0.Add(time.Minute); !got.Equal(want) { // seq 2 and 3
		t.Fatalf("NextDeadline %v, want %v", got, want)
	}
	// NAK then ack while queued leaves stale queue items behind.
	dseq := uint64(3)
	for i := 0; i < 200; i++ {
		h.publishN(1)
		seq := h.src.LastSeq()
		outs := h.pull("b", jsapi.PullRequest{Batch: 1})
		if len(outs) != 1 || outs[0].Ack.StreamSeq != seq {
			t.Fatalf("round %d: %s", i, fmtOuts(outs))
		}
		dseq = outs[0].Ack.ConsumerSeq
		h.c.Ack(h.now, seq, dseq, jsapi.Ack{Kind: jsapi.AckNak}, "")
		h.c.Ack(h.now, seq, dseq, jsapi.Ack{Kind: jsapi.AckAck}, "")
		h.persist()
	}
	if n := h.c.rdq.len(); n > 2*3+64+1 {
		t.Fatalf("%d queue items for 3 pending", n)
	}
	h.c.checkInvariants(t)
	h.advance(59 * time.Second) // seq 2 and 3 are due, seq 1 (last WPI at +1s) not yet
	expectOuts(t, h.tick(), "")
	expectOuts(t, h.pull("c", jsapi.PullRequest{Batch: 5, NoWait: true}), "c<-2(d204,n2); c<-3(d205,n2); c<-404 No Messages")
	h.advance(time.Second)
	expectOuts(t, h.tick(), "")
	expectOuts(t, h.pull("d", jsapi.PullRequest{Batch: 5, NoWait: true}), "d<-1(d206,n2); d<-404 No Messages")
}

func TestOutKindString(t *testing.T) {
	for k, want := range map[OutKind]string{Deliver: "deliver", Status: "status", AckReply: "ack-reply", Advisory: "advisory", 0: "unknown"} {
		if k.String() != want {
			t.Errorf("%d: %q", k, k.String())
		}
	}
}
