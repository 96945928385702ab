package consumer

import (
	"testing"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
)

// TestAckRange: an eviction settles pending deliveries, marks unread
// messages so they are never delivered, keeps the cursor's invariants,
// survives a restore, and leaves messages outside the range alone.
func TestAckRange(t *testing.T) {
	src := newSource()
	h := newHarness(t, src, pullCfg(nil))
	h.publishN(10)
	outs := h.pull("in1", jsapi.PullRequest{Batch: 3})
	if got := seqsOf(outs); len(got) != 3 || got[0] != 1 {
		t.Fatalf("first pull delivered %v", got)
	}
	// 1-3 pending, 4-10 unread: evict 2..6.
	if n := h.c.AckRange(2, 6); n != 5 {
		t.Fatalf("AckRange(2, 6) = %d, want 5", n)
	}
	h.c.checkInvariants(t)
	if md := h.c.MarkDelete(); md != 0 {
		t.Fatalf("mark-delete %d: seq 1 is still pending", md)
	}
	if got := h.c.NextUnacked(1); got != 7 {
		t.Fatalf("NextUnacked(1) = %d, want 7", got)
	}
	if n := h.c.AckRange(2, 6); n != 0 {
		t.Fatalf("repeated AckRange = %d, want 0", n)
	}
	h.persist()
	outs = h.pull("in2", jsapi.PullRequest{Batch: 10, NoWait: true})
	if got := seqsOf(outs); len(got) != 4 || got[0] != 7 || got[3] != 10 {
		t.Fatalf("after the eviction delivered %v, want 7-10", got)
	}
	// The pending seq 1 and everything up to 8: the mark-delete passes
	// the read position's gaps, and a late ack of an evicted one is a
	// no-op.
	if n := h.c.AckRange(1, 8); n != 3 { // 1, 7, 8
		t.Fatalf("AckRange(1, 8) = %d, want 3", n)
	}
	h.c.checkInvariants(t)
	if md := h.c.MarkDelete(); md != 8 {
		t.Fatalf("mark-delete %d, want 8", md)
	}
	h.ack(Out{Ack: jsapi.AckMeta{StreamSeq: 7, ConsumerSeq: 4}}, jsapi.AckAck)
	h.c.checkInvariants(t)
	h.persist()
	h.restart()
	h.c.checkInvariants(t)
	if md := h.c.MarkDelete(); md != 8 {
		t.Fatalf("restored mark-delete %d, want 8", md)
	}
	// Past the read position and the last message: nothing is delivered
	// there later.
	// 9 and 10 are pending (queued for redelivery by the restore).
	h.publishN(4) // 11-14
	if n := h.c.AckRange(9, 12); n != 4 {
		t.Fatalf("AckRange(9, 12) = %d, want 4", n)
	}
	h.c.checkInvariants(t)
	h.persist()
	h.advance(10 * time.Second)
	outs = h.tick()
	outs = append(outs, h.pull("in3", jsapi.PullRequest{Batch: 10, NoWait: true})...)
	if got := seqsOf(outs); len(got) != 2 || got[0] != 13 || got[1] != 14 {
		t.Fatalf("after evicting 9-12 delivered %v, want 13, 14", got)
	}
	if n := h.c.AckRange(5, 3); n != 0 {
		t.Fatalf("inverted range acked %d", n)
	}
	if c := h.c.Created(); !c.Equal(t0) {
		t.Fatalf("Created = %v, want %v", c, t0)
	}
}

// TestAckRangeKeyShared: held key_shared messages in the range are
// dropped (never delivered) and the key bookkeeping stays consistent.
func TestAckRangeKeyShared(t *testing.T) {
	src := newSource()
	cfg := pullCfg(func(c *jsapi.ConsumerConfig) {
		c.Metadata = map[string]string{MetaSubscription: "key_shared", MetaKey: "subject"}
	})
	h := newHarness(t, src, cfg)
	for i := 0; i < 4; i++ {
		h.publish("k.a", "a")
	}
	h.publish("k.b", "b")
	// Puller 1 takes the first "a"; puller 2 can only take "b": the other
	// "a"s are bound to puller 1 and get held.
	outs := h.pull("p1", jsapi.PullRequest{Batch: 1})
	outs = append(outs, h.pull("p2", jsapi.PullRequest{Batch: 5, NoWait: true})...)
	h.c.checkInvariants(t)
	if len(h.c.held) == 0 {
		t.Fatalf("nothing held (deliveries %v)", seqsOf(outs))
	}
	if n := h.c.AckRange(1, 5); n == 0 {
		t.Fatal("nothing acked")
	}
	h.c.checkInvariants(t)
	if len(h.c.held) != 0 || len(h.c.pending) != 0 || h.c.MarkDelete() != 5 {
		t.Fatalf("held %v pending %d md %d", h.c.held, len(h.c.pending), h.c.MarkDelete())
	}
}
