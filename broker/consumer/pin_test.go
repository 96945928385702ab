package consumer

import (
	"errors"
	"testing"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
)

func pinReq(batch int, id string) jsapi.PullRequest {
	return jsapi.PullRequest{Batch: batch, Expires: time.Minute, Group: "g", ID: id}
}

// The first request served gets the pin; its messages carry it; a
// standby (no id) waits; a stale id gets 423 at once; the pin's pulls
// keep it alive.
func TestPinFirstRequestAndStandby(t *testing.T) {
	h := newHarness(t, newSource(), pinCfg(nil), pinCounter("P"))
	expectOuts(t, h.pull("a", pinReq(2, "")), "")
	expectOuts(t, h.pull("b", pinReq(2, "")), "")
	h.publishN(3)
	expectOuts(t, h.c.Dispatch(h.now), "pinned:g=P1>a; a<-1(d1,n1)@P1; a<-2(d2,n1)@P1")
	if ci := h.c.Info(h.now); len(ci.PriorityGroups) != 1 || ci.PriorityGroups[0].PinnedClientID != "P1" ||
		!ci.PriorityGroups[0].PinnedTS.Equal(t0) {
		t.Fatalf("priority_groups %+v", ci.PriorityGroups)
	}
	// b waits while the pin lives, even with a message available.
	if n := len(h.c.waiting); n != 1 {
		t.Fatalf("%d waiting", n)
	}
	expectOuts(t, h.pull("x", pinReq(1, "P9")), "x<-423 Nats-Pin-Id mismatch")
	h.advance(4 * time.Second)
	expectOuts(t, h.pull("a2", pinReq(5, "P1")), "a2<-3(d3,n1)@P1") // refreshes the pin
	if got := h.c.pin.deadline; !got.Equal(t0.Add(9 * time.Second)) {
		t.Fatalf("pin deadline %v, want 9 s", got.Sub(t0))
	}
	h.advance(4 * time.Second) // 1 and 2 are redelivered to the pin
	expectOuts(t, h.tick(), "a2<-1(d4,n2)@P1; a2<-2(d5,n2)@P1; a2<-3(d6,n2)@P1")
	h.publishN(1)
	expectOuts(t, h.c.Dispatch(h.now), "a2<-4(d7,n1)@P1")
	// Without pulls the pin ends at 9 s, before any ack wait.
	if got := h.c.NextDeadline(); !got.Equal(t0.Add(9 * time.Second)) {
		t.Fatalf("NextDeadline %v", got.Sub(t0))
	}
	h.c.checkInvariants(t)
}

// The pinned client stops pulling: after priority_timeout the pin moves
// to the standby, which receives from the first unacked message (the
// old pin's deliveries come back after their ack_wait, before new ones);
// the old client's pulls get 423.
func TestPinFailover(t *testing.T) {
	h := newHarness(t, newSource(), pinCfg(nil), pinCounter("P"))
	h.publishN(4)
	outs := h.pull("a", pinReq(3, ""))
	expectOuts(t, outs, "pinned:g=P1>a; a<-1(d1,n1)@P1; a<-2(d2,n1)@P1; a<-3(d3,n1)@P1")
	h.ack(outs[1], jsapi.AckAck)
	expectOuts(t, h.pull("b", pinReq(10, "")), "")
	// ack_wait (2 s) passes: 2 and 3 are queued, still for the pin.
	h.advance(2 * time.Second)
	expectOuts(t, h.tick(), "")
	h.advance(3 * time.Second) // priority_timeout: 5 s since the pin
	expectOuts(t, h.tick(), "unpinned:g(timeout); pinned:g=P2>b; b<-2(d4,n2)@P2; b<-3(d5,n2)@P2; b<-4(d6,n1)@P2")
	expectOuts(t, h.pull("a2", pinReq(1, "P1")), "a2<-423 Nats-Pin-Id mismatch")
	// A request that arrived with the old pin before it moved gets the
	// wrong-pin 423, with its pending headers, when a message comes.
	h2 := newHarness(t, newSource(), pinCfg(nil), pinCounter("Q"))
	h2.publishN(1)
	expectOuts(t, h2.pull("a", pinReq(1, "")), "pinned:g=Q1>a; a<-1(d1,n1)@Q1")
	expectOuts(t, h2.pull("a", pinReq(4, "Q1")), "")
	outs, err := h2.c.Unpin(h2.now, "g")
	if err != nil {
		t.Fatal(err)
	}
	expectOuts(t, outs, "unpinned:g(admin)")
	expectOuts(t, h2.pull("b", pinReq(1, "")), "")
	h2.publishN(1)
	expectOuts(t, h2.c.Dispatch(h2.now), "a<-423 Nats-Wrong-Pin-Id; pinned:g=Q2>b; b<-2(d2,n1)@Q2")
	if o := h2.c.Dispatch(h2.now); len(o) != 0 {
		t.Fatalf("more outs %s", fmtOuts(o))
	}
	h.c.checkInvariants(t)
	h2.c.checkInvariants(t)
}

func TestPinWrongPinHeaders(t *testing.T) {
	h := newHarness(t, newSource(), pinCfg(nil), pinCounter("P"))
	expectOuts(t, h.pull("a", jsapi.PullRequest{Batch: 4, MaxBytes: 500, Expires: time.Minute, Group: "g", ID: "old"}), "")
	h.publishN(1)
	outs := h.c.Dispatch(h.now)
	expectOuts(t, outs, "a<-423 Nats-Wrong-Pin-Id")
	if o := outs[0]; o.PendingMsgs != 4 || o.PendingBytes != 500 {
		t.Fatalf("pending %d/%d", o.PendingMsgs, o.PendingBytes)
	}
}

// UNPIN: unknown groups fail; with no pin it changes nothing; a pin
// given for a message that does not fit the request is taken back.
func TestPinUnpinAndMaxBytes(t *testing.T) {
	h := newHarness(t, newSource(), pinCfg(nil), pinCounter("P"))
	if _, err := h.c.Unpin(h.now, "other"); !errors.Is(err, ErrNoPriorityGroup) {
		t.Fatalf("unpin of an unknown group: %v", err)
	}
	outs, err := h.c.Unpin(h.now, "g")
	if err != nil || len(outs) != 0 {
		t.Fatalf("unpin without a pin: %s %v", fmtOuts(outs), err)
	}
	h.publish("ord.a", "a long message body")
	expectOuts(t, h.pull("small", jsapi.PullRequest{Batch: 1, MaxBytes: 10, Expires: time.Minute, Group: "g"}),
		"small<-409 Message Size Exceeds MaxBytes [1/10]")
	if h.c.pin.id != "" {
		t.Fatalf("pin %q kept after the message did not fit", h.c.pin.id)
	}
	expectOuts(t, h.pull("b", pinReq(1, "")), "pinned:g=P2>b; b<-1(d1,n1)@P2")
	plain := newHarness(t, newSource(), pullCfg(nil))
	if _, err := plain.c.Unpin(plain.now, "g"); !errors.Is(err, ErrNoPriorityGroup) {
		t.Fatalf("unpin on a consumer without groups: %v", err)
	}
}

// Pull checks, in the reference's order and words.
func TestPinPullChecks(t *testing.T) {
	h := newHarness(t, newSource(), pinCfg(nil), pinCounter("P"))
	expectOuts(t, h.pull("a", jsapi.PullRequest{Batch: 1}), "a<-400 Bad Request - Priority Group missing")
	expectOuts(t, h.pull("a", jsapi.PullRequest{Batch: 1, Group: "h"}), "a<-400 Bad Request - Invalid Priority Group")
	expectOuts(t, h.pull("a", jsapi.PullRequest{Batch: 1, Group: "g", MinPending: 3}), "a<-400 Bad Request - Not a Overflow Priority consumer")
	plain := newHarness(t, newSource(), pullCfg(nil))
	expectOuts(t, plain.pull("a", jsapi.PullRequest{Batch: 1, ID: "x"}), "a<-400 Bad Request - Not a Pinned Client Priority consumer")
	plain.publishN(1)
	// A group on a consumer without groups is ignored, as on the reference.
	expectOuts(t, plain.pull("a", jsapi.PullRequest{Batch: 1, Group: "g"}), "a<-1(d1,n1)")
}

// The pin is not persisted: a restored consumer starts unpinned, and the
// old pin's pulls get the wrong-pin 423 once a message comes.
func TestPinNotPersisted(t *testing.T) {
	h := newHarness(t, newSource(), pinCfg(nil), pinCounter("P"))
	h.publishN(2)
	expectOuts(t, h.pull("a", pinReq(1, "")), "pinned:g=P1>a; a<-1(d1,n1)@P1")
	h.persist()
	h.restart(pinCounter("R"))
	h.persist()
	if ci := h.c.Info(h.now); ci.PriorityGroups[0].PinnedClientID != "" || !ci.PriorityGroups[0].PinnedTS.IsZero() {
		t.Fatalf("restored pin %+v", ci.PriorityGroups)
	}
	expectOuts(t, h.pull("a", pinReq(1, "P1")), "a<-423 Nats-Wrong-Pin-Id")
	expectOuts(t, h.pull("b", pinReq(1, "")), "pinned:g=R1>b; b<-1(d1001,n2)@R1")
}

// priority_timeout is editable; the pin's deadline moves at the next pull.
func TestPinTimeoutUpdate(t *testing.T) {
	h := newHarness(t, newSource(), pinCfg(nil), pinCounter("P"))
	h.publishN(1)
	expectOuts(t, h.pull("a", pinReq(1, "")), "pinned:g=P1>a; a<-1(d1,n1)@P1")
	if err := h.c.UpdateConfig(pinCfg(func(c *jsapi.ConsumerConfig) { c.PriorityTimeout = time.Minute })); err != nil {
		t.Fatal(err)
	}
	expectOuts(t, h.pull("a", pinReq(1, "P1")), "")
	if got := h.c.NextDeadline(); !got.Equal(t0.Add(2 * time.Second)) { // the ack wait comes first
		t.Fatalf("NextDeadline %v", got.Sub(t0))
	}
	if h.c.pin.deadline != t0.Add(time.Minute) {
		t.Fatalf("pin deadline %v", h.c.pin.deadline.Sub(t0))
	}
	for _, bad := range []func(*jsapi.ConsumerConfig){
		func(c *jsapi.ConsumerConfig) { c.PriorityGroups = []string{"h"} },
		func(c *jsapi.ConsumerConfig) { c.PriorityPolicy, c.PriorityGroups, c.PriorityTimeout = "", nil, 0 },
	} {
		if err := h.c.UpdateConfig(pinCfg(bad)); !errors.Is(err, ErrImmutable) {
			t.Fatalf("update: %v", err)
		}
	}
}
