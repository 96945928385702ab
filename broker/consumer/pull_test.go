package consumer

import (
	"testing"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
)

// §5 item 24: Fetch(2) gets the original subjects and correct metadata.
func TestFetchMetadata(t *testing.T) {
	src := newSource()
	h := newHarness(t, src, pullCfg(nil))
	h.publish("ord.a", "one")
	h.advance(time.Second)
	h.publish("ord.b", "two")
	h.publish("ord.c", "three")

	outs := h.pull("in.1", jsapi.PullRequest{Batch: 2, Expires: 30 * time.Second, IdleHeartbeat: 5 * time.Second})
	expectOuts(t, outs, "in.1<-1(d1,n1); in.1<-2(d2,n1)") // filled exactly: nothing else
	want := []jsapi.AckMeta{
		{Stream: "ORDERS", Consumer: "proc", Delivered: 1, StreamSeq: 1, ConsumerSeq: 1, Timestamp: t0.UnixNano(), Pending: 2},
		{Stream: "ORDERS", Consumer: "proc", Delivered: 1, StreamSeq: 2, ConsumerSeq: 2, Timestamp: t0.Add(time.Second).UnixNano(), Pending: 1},
	}
	for i, o := range outs {
		if o.Ack != want[i] {
			t.Errorf("ack %d = %+v, want %+v", i, o.Ack, want[i])
		}
		if o.Msg.Subject != []string{"ord.a", "ord.b"}[i] || string(o.Msg.Data) != []string{"one", "two"}[i] {
			t.Errorf("msg %d = %q %q", i, o.Msg.Subject, o.Msg.Data)
		}
		subj := jsapi.FormatAckSubject(o.Ack)
		if back, err := jsapi.ParseAckSubject(subj); err != nil || back != o.Ack {
			t.Errorf("ack subject %q does not round-trip: %+v %v", subj, back, err)
		}
	}
	if n := len(h.c.waiting); n != 0 {
		t.Fatalf("%d requests still waiting", n)
	}
	h.c.checkInvariants(t)
}

// §5 item 25: FetchNoWait on empty → 404; with some messages: those, then 404.
func TestNoWait(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(nil))
	expectOuts(t, h.pull("in.1", jsapi.PullRequest{Batch: 3, NoWait: true}), "in.1<-404 No Messages")
	h.publishN(2)
	expectOuts(t, h.pull("in.2", jsapi.PullRequest{Batch: 3, NoWait: true}), "in.2<-1(d1,n1); in.2<-2(d2,n1); in.2<-404 No Messages")
	h.publishN(2)
	expectOuts(t, h.pull("in.3", jsapi.PullRequest{Batch: 2, NoWait: true}), "in.3<-3(d3,n1); in.3<-4(d4,n1)")
	if len(h.c.waiting) != 0 {
		t.Fatal("no_wait request left waiting")
	}
	// Legacy Fetch: no_wait with expires waits for the first message, then
	// returns what there is.
	expectOuts(t, h.pull("in.4", jsapi.PullRequest{Batch: 3, NoWait: true, Expires: 5 * time.Second}), "")
	h.publishN(1)
	expectOuts(t, h.c.Dispatch(h.now), "in.4<-5(d5,n1); in.4<-404 No Messages")
	// Held back by max_ack_pending: 404 at once.
	h2 := newHarness(t, newSource(), pullCfg(func(c *jsapi.ConsumerConfig) { c.MaxAckPending = 1 }))
	h2.publishN(2)
	expectOuts(t, h2.pull("a", jsapi.PullRequest{Batch: 1}), "a<-1(d1,n1)")
	expectOuts(t, h2.pull("b", jsapi.PullRequest{Batch: 1, NoWait: true}), "b<-404 No Messages")
}

// §5 item 26: an idle request expires with 408 and the pending headers.
func TestExpiry(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(nil))
	expectOuts(t, h.pull("in.1", jsapi.PullRequest{Batch: 5, Expires: time.Second}), "")
	if got := h.c.NextDeadline(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("NextDeadline %v", got)
	}
	h.advance(999 * time.Millisecond)
	expectOuts(t, h.tick(), "")
	h.advance(time.Millisecond)
	expectOuts(t, h.tick(), "in.1<-408 Request Timeout [5/0]")
	if !h.c.NextDeadline().IsZero() {
		t.Fatal("deadline left after expiry")
	}
	// Partly served, with max_bytes: the headers carry what is left.
	h.publishN(2)
	outs := h.pull("in.2", jsapi.PullRequest{Batch: 5, Expires: time.Second, MaxBytes: 1000})
	used := 0
	for _, o := range outs {
		used += len(o.Msg.Subject) + len(o.Msg.Data) + len(jsapi.FormatAckSubject(o.Ack))
	}
	h.advance(time.Second)
	outs = h.tick()
	if len(outs) != 1 || outs[0].Status != 408 || outs[0].PendingMsgs != 3 || outs[0].PendingBytes != 1000-used {
		t.Fatalf("got %s, want 408 [3/%d]", fmtOuts(outs), 1000-used)
	}
}

// §5 item 27: a waiting request gets a heartbeat whenever it has been
// silent for idle_heartbeat.
func TestIdleHeartbeat(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(func(c *jsapi.ConsumerConfig) { c.AckWait = time.Minute }))
	h.publishN(1)
	expectOuts(t, h.pull("in.0", jsapi.PullRequest{Batch: 1}), "in.0<-1(d1,n1)")
	expectOuts(t, h.pull("in.1", jsapi.PullRequest{Batch: 10, Expires: 30 * time.Second, IdleHeartbeat: 5 * time.Second}), "")
	if got := h.c.NextDeadline(); !got.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("NextDeadline %v", got)
	}
	h.advance(5 * time.Second)
	outs := h.tick()
	if len(outs) != 1 || outs[0].Status != 100 || outs[0].Description != "Idle Heartbeat" ||
		outs[0].LastConsumer != 1 || outs[0].LastStream != 1 {
		t.Fatalf("heartbeat: %+v", outs)
	}
	h.advance(4 * time.Second)
	expectOuts(t, h.tick(), "")
	h.publishN(1) // a delivery resets the silence
	expectOuts(t, h.c.Dispatch(h.now), "in.1<-2(d2,n1)")
	h.advance(time.Second)
	expectOuts(t, h.tick(), "")
	h.advance(4 * time.Second)
	expectOuts(t, h.tick(), "in.1<-100 Idle Heartbeat")
}

// §5 item 28: a long-lived request survives expiries and sees live
// publishes as soon as the driver dispatches.
func TestConsumeLive(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(nil))
	for round := 0; round < 3; round++ {
		expectOuts(t, h.pull("inbox", jsapi.PullRequest{Batch: 500, Expires: 30 * time.Second}), "")
		h.advance(30 * time.Second)
		expectOuts(t, h.tick(), "inbox<-408 Request Timeout [500/0]")
	}
	h.pull("inbox", jsapi.PullRequest{Batch: 500, Expires: 30 * time.Second})
	h.advance(time.Millisecond)
	seq := h.publish("ord.x", "live")
	outs := h.c.Dispatch(h.now)
	if len(outs) != 1 || outs[0].Ack.StreamSeq != seq || outs[0].Reply != "inbox" {
		t.Fatalf("live publish: %s", fmtOuts(outs))
	}
}

// §5 item 35: FetchBytes below the next message's size gets 409 MaxBytes;
// a batch used up with bytes left gets 409 Batch Completed.
func TestMaxBytes(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(nil))
	h.publish("ord.a", "0123456789")
	outs := h.pull("in.1", jsapi.PullRequest{Batch: 100, MaxBytes: 20, Expires: time.Minute})
	expectOuts(t, outs, "in.1<-409 Message Size Exceeds MaxBytes [100/20]")
	loads := h.src.loads
	// The message was not consumed: the next request gets it (not re-read).
	size := 5 + 10 + len("$JS.ACK.ORDERS.proc.1.1.1.") + len("1772366400000000000") + len(".0")
	outs = h.pull("in.2", jsapi.PullRequest{Batch: 1, MaxBytes: size + 7})
	expectOuts(t, outs, "in.2<-1(d1,n1); in.2<-409 Batch Completed [0/7]")
	if h.src.loads != loads {
		t.Fatalf("message loaded again")
	}
	// Exactly used up: the request ends silently.
	h.publish("ord.a", "0123456789")
	size2 := 5 + 10 + len(jsapi.FormatAckSubject(jsapi.AckMeta{Stream: "ORDERS", Consumer: "proc", Delivered: 1, StreamSeq: 2, ConsumerSeq: 2, Timestamp: t0.UnixNano()}))
	expectOuts(t, h.pull("in.3", jsapi.PullRequest{Batch: 5, MaxBytes: size2}), "in.3<-2(d2,n1)")
	if len(h.c.waiting) != 0 {
		t.Fatal("request left waiting")
	}
}

// §5 item 36: requests from several clients get disjoint messages, the
// oldest request first; pulls from the same reply are separate requests.
func TestSharedRequests(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(nil))
	h.pull("a", jsapi.PullRequest{Batch: 2, Expires: time.Minute})
	h.pull("b", jsapi.PullRequest{Batch: 2, Expires: time.Minute})
	h.pull("a", jsapi.PullRequest{Batch: 1, Expires: time.Minute})
	if n := h.c.Info(h.now).NumWaiting; n != 3 {
		t.Fatalf("num_waiting %d", n)
	}
	h.publishN(6)
	expectOuts(t, h.c.Dispatch(h.now), "a<-1(d1,n1); a<-2(d2,n1); b<-3(d3,n1); b<-4(d4,n1); a<-5(d5,n1)")
	if n := h.c.Info(h.now).NumWaiting; n != 0 {
		t.Fatalf("num_waiting %d", n)
	}
}

// Limits of spec §2.5: 400 and 409 statuses, and max_waiting.
func TestPullValidation(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(func(c *jsapi.ConsumerConfig) {
		c.MaxRequestBatch, c.MaxRequestExpires, c.MaxRequestMaxBytes, c.MaxWaiting = 10, 5*time.Second, 1000, 2
	}))
	for _, tc := range []struct {
		req  jsapi.PullRequest
		want string
	}{
		{jsapi.PullRequest{Batch: 11}, "r<-409 Exceeded MaxRequestBatch of 10 [0/0]"},
		{jsapi.PullRequest{Expires: 6 * time.Second}, "r<-409 Exceeded MaxRequestExpires of 5s [0/0]"},
		{jsapi.PullRequest{MaxBytes: 1001}, "r<-409 Exceeded MaxRequestMaxBytes of 1000 [0/0]"},
		{jsapi.PullRequest{Expires: 4 * time.Second, IdleHeartbeat: 3 * time.Second}, "r<-400 Bad Request - heartbeat value too large"},
		{jsapi.PullRequest{IdleHeartbeat: time.Second}, "r<-400 Bad Request - heartbeat value too large"},
		{jsapi.PullRequest{Batch: -1}, "r<-400 Bad Request - negative value"},
	} {
		expectOuts(t, h.pull("r", tc.req), tc.want)
	}
	expectOuts(t, h.pull("w1", jsapi.PullRequest{Batch: 1, Expires: time.Second}), "")
	expectOuts(t, h.pull("w2", jsapi.PullRequest{Batch: 1, Expires: 2 * time.Second}), "")
	expectOuts(t, h.pull("w3", jsapi.PullRequest{Batch: 1}), "w3<-409 Exceeded MaxWaiting [0/0]")
	h.advance(time.Second) // w1 expired: it makes room
	expectOuts(t, h.pull("w3", jsapi.PullRequest{Batch: 1}), "w1<-408 Request Timeout [1/0]")
	expectOuts(t, h.pull("r", jsapi.PullRequest{}), "r<-409 Exceeded MaxWaiting [0/0]")
	expectOuts(t, h.pull("r", jsapi.PullRequest{NoWait: true}), "r<-404 No Messages")
	h.publishN(1)
	expectOuts(t, h.pull("r", jsapi.PullRequest{NoWait: true}), "r<-409 Exceeded MaxWaiting [0/0]")
	expectOuts(t, h.c.Pull(h.now, "", jsapi.PullRequest{}), "") // no reply: ignored
}

// Stop answers every waiting request, and the consumer stays stopped.
func TestStop(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(nil))
	h.publishN(1)
	d := h.pull("a", jsapi.PullRequest{Batch: 1})
	h.pull("b", jsapi.PullRequest{Batch: 5, MaxBytes: 100, Expires: time.Minute})
	h.pull("c", jsapi.PullRequest{Batch: 2})
	expectOuts(t, h.c.Stop(h.now, jsapi.DescLeadershipChange),
		"b<-409 Leadership Change [5/100]; c<-409 Leadership Change [2/0]")
	expectOuts(t, h.pull("d", jsapi.PullRequest{Batch: 3}), "d<-409 Leadership Change [3/0]")
	expectOuts(t, h.c.Ack(h.now, 1, 1, jsapi.Ack{Kind: jsapi.AckAck}, "sync"), "")
	h.advance(time.Hour)
	expectOuts(t, h.tick(), "")
	expectOuts(t, h.c.Dispatch(h.now), "")
	if !h.c.NextDeadline().IsZero() || h.c.Info(h.now).NumAckPending != 1 {
		t.Fatal("stopped consumer still active")
	}
	_ = d
}

// pause_until holds deliveries back and is a deadline.
func TestPause(t *testing.T) {
	until := t0.Add(10 * time.Second)
	h := newHarness(t, newSource(), pullCfg(func(c *jsapi.ConsumerConfig) { c.PauseUntil = &until }))
	h.publishN(1)
	expectOuts(t, h.pull("a", jsapi.PullRequest{Batch: 1, NoWait: true}), "a<-404 No Messages")
	expectOuts(t, h.pull("b", jsapi.PullRequest{Batch: 1, Expires: time.Minute}), "")
	if info := h.c.Info(h.now); !info.Paused || info.PauseRemaining != 10*time.Second {
		t.Fatalf("info paused %v %v", info.Paused, info.PauseRemaining)
	}
	if got := h.c.NextDeadline(); !got.Equal(until) {
		t.Fatalf("NextDeadline %v", got)
	}
	h.advance(10 * time.Second)
	expectOuts(t, h.tick(), "b<-1(d1,n1)")
}
