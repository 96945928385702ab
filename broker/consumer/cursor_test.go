package consumer

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
)

func TestDeliverPolicies(t *testing.T) {
	src := newSource()
	for i, subj := range []string{"ord.a", "ord.b", "ord.a", "ord.b", "inv.x", "ord.c"} {
		src.publish(t0.Add(time.Duration(i)*time.Second), subj, "x")
	}
	src.trim(1)
	at := t0.Add(2500 * time.Millisecond)
	for _, tc := range []struct {
		name  string
		mod   func(*jsapi.ConsumerConfig)
		first uint64 // first sequence delivered, 0 = none yet
		floor uint64
	}{
		{"all", nil, 2, 1},
		{"new", func(c *jsapi.ConsumerConfig) { c.DeliverPolicy = jsapi.DeliverNew }, 0, 6},
		{"last", func(c *jsapi.ConsumerConfig) { c.DeliverPolicy = jsapi.DeliverLast }, 6, 5},
		{"last literal filter", func(c *jsapi.ConsumerConfig) {
			c.DeliverPolicy, c.FilterSubjects = jsapi.DeliverLast, []string{"ord.a", "ord.b"}
		}, 4, 3},
		{"last wildcard filter", func(c *jsapi.ConsumerConfig) { c.DeliverPolicy, c.FilterSubject = jsapi.DeliverLast, "*.x" }, 5, 4},
		{"last no match", func(c *jsapi.ConsumerConfig) { c.DeliverPolicy, c.FilterSubject = jsapi.DeliverLast, "nope.>" }, 0, 6},
		{"by_start_sequence", func(c *jsapi.ConsumerConfig) { c.DeliverPolicy, c.OptStartSeq = jsapi.DeliverByStartSeq, 4 }, 4, 3},
		{"by_start_sequence trimmed", func(c *jsapi.ConsumerConfig) { c.DeliverPolicy, c.OptStartSeq = jsapi.DeliverByStartSeq, 1 }, 2, 0},
		{"by_start_time", func(c *jsapi.ConsumerConfig) { c.DeliverPolicy, c.OptStartTime = jsapi.DeliverByStartTime, &at }, 4, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, src, pullCfg(tc.mod))
			if got := h.c.MarkDelete(); got != tc.floor {
				t.Fatalf("initial mark-delete %d, want %d", got, tc.floor)
			}
			outs := h.pull("a", jsapi.PullRequest{Batch: 1, NoWait: true})
			var got uint64
			if d := kinds(outs, Deliver); len(d) > 0 {
				got = d[0].Ack.StreamSeq
			}
			if got != tc.first {
				t.Fatalf("first delivered %d, want %d (%s)", got, tc.first, fmtOuts(outs))
			}
			h.c.checkInvariants(t)
		})
	}
}

// Filtered-out messages are skipped and count as acked: the floor moves
// past them; num_pending counts only matching messages when it can.
func TestFilter(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(func(c *jsapi.ConsumerConfig) { c.FilterSubject = "ord.a" }))
	for _, s := range []string{"ord.b", "ord.a", "ord.b", "ord.b", "ord.a", "ord.b"} {
		h.publish(s, "x")
	}
	if n := h.c.Info(h.now).NumPending; n != 5 { // capped by the last ord.a
		t.Fatalf("num_pending %d", n)
	}
	outs := h.pull("a", jsapi.PullRequest{Batch: 5, NoWait: true})
	expectOuts(t, outs, "a<-2(d1,n1); a<-5(d2,n1); a<-404 No Messages")
	if outs[0].Ack.Pending != 3 || outs[1].Ack.Pending != 0 {
		t.Fatalf("pending %d %d", outs[0].Ack.Pending, outs[1].Ack.Pending)
	}
	h.ack(outs[0], jsapi.AckAck)
	if md := h.c.MarkDelete(); md != 4 {
		t.Fatalf("mark-delete %d, want 4", md)
	}
	h.ack(outs[1], jsapi.AckAck)
	info := h.c.Info(h.now)
	if info.AckFloor.Stream != 6 || info.Delivered.Stream != 6 || info.NumPending != 0 || info.Delivered.Consumer != 2 {
		t.Fatalf("info floor %+v delivered %+v pending %d", info.AckFloor, info.Delivered, info.NumPending)
	}
	// Wildcards; the filter may be edited.
	if err := h.c.UpdateConfig(pullCfg(func(c *jsapi.ConsumerConfig) { c.FilterSubjects = []string{"ord.*", "inv.>"} })); err != nil {
		t.Fatal(err)
	}
	h.publish("inv", "x")
	h.publish("inv.a.b", "x")
	h.publish("x.ord", "x")
	h.publish("ord.z", "x")
	expectOuts(t, h.pull("b", jsapi.PullRequest{Batch: 5, NoWait: true}), "b<-8(d3,n1); b<-10(d4,n1); b<-404 No Messages")
}

func TestSubjectMatches(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"a.b", "a.b", true}, {"a.b", "a.c", false}, {"a.*", "a.b", true}, {"a.*", "a.b.c", false},
		{"a.>", "a.b.c", true}, {"a.>", "a", false}, {"*", "a", true}, {"*", "a.b", false},
		{">", "a.b", true}, {"a.*.c", "a.b.c", true}, {"a.b.c", "a.b", false}, {"a.b", "a.b.c", false},
	} {
		if got := subjectMatches(tc.p, tc.s); got != tc.want {
			t.Errorf("subjectMatches(%q, %q) = %v", tc.p, tc.s, got)
		}
	}
	for _, f := range []string{"", "a..b", "a.>.b", "a b", ".a"} {
		if validFilter(f) {
			t.Errorf("validFilter(%q)", f)
		}
	}
}

// Trimmed messages are skipped (acked); a Source error stops the round
// and the driver retries.
func TestGoneAndLoadErrors(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(nil))
	h.publishN(6)
	expectOuts(t, h.pull("a", jsapi.PullRequest{Batch: 2}), "a<-1(d1,n1); a<-2(d2,n1)")
	h.src.trim(3) // 1 and 2 pending, 3 unread: all gone
	h.c.Ack(h.now, 1, 1, jsapi.Ack{Kind: jsapi.AckNak}, "")
	boom := errors.New("bookie unavailable")
	h.src.fail[5] = boom
	expectOuts(t, h.pull("b", jsapi.PullRequest{Batch: 5, Expires: time.Minute}), "b<-4(d3,n1)")
	if !errors.Is(h.c.LoadErr(), boom) {
		t.Fatalf("LoadErr %v", h.c.LoadErr())
	}
	if md := h.c.MarkDelete(); md != 1 { // 2 is still pending (in flight)
		t.Fatalf("mark-delete %d", md)
	}
	delete(h.src.fail, 5)
	outs := h.c.Dispatch(h.now)
	expectOuts(t, outs, "b<-5(d4,n1); b<-6(d5,n1)")
	if h.c.LoadErr() != nil {
		t.Fatal("LoadErr not cleared")
	}
	h.c.Ack(h.now, 4, 3, jsapi.Ack{Kind: jsapi.AckAck}, "")
	h.c.Ack(h.now, 5, 4, jsapi.Ack{Kind: jsapi.AckAck}, "")
	h.c.Ack(h.now, 6, 5, jsapi.Ack{Kind: jsapi.AckAck}, "")
	h.advance(2 * time.Second) // 2 expires and is gone: acked on redelivery
	expectOuts(t, h.tick(), "")
	if md := h.c.MarkDelete(); md != 6 {
		t.Fatalf("mark-delete %d, want 6", md)
	}
	h.c.checkInvariants(t)
	// A no_wait request is answered even when the round failed.
	h.publishN(1)
	h.src.fail[7] = boom
	expectOuts(t, h.pull("c", jsapi.PullRequest{Batch: 1, NoWait: true}), "c<-404 No Messages")
}

// Delivery sequences come from a persisted reservation: nothing is
// delivered above it, the snapshot turns dirty half a block ahead, and a
// restored consumer continues above it.
func TestDSeqReservation(t *testing.T) {
	src := newSource()
	c, err := New(pullCfg(nil), nil, t0, src, StreamName("ORDERS"), DSeqBlock(4))
	if err != nil {
		t.Fatal(err)
	}
	src.publish(t0, "a", "1")
	// Not persisted yet: requests wait, a no_wait request too.
	expectOuts(t, c.Pull(t0, "nw", jsapi.PullRequest{Batch: 1, NoWait: true}), "")
	expectOuts(t, c.Pull(t0, "r", jsapi.PullRequest{Batch: 10, Expires: time.Minute}), "")
	st, gen, dirty := c.Snapshot()
	if !dirty || st.DSeqReserved != 4 {
		t.Fatalf("dirty %v reserved %d", dirty, st.DSeqReserved)
	}
	expectOuts(t, c.Persisted(gen), "nw<-1(d1,n1)")
	for i := 0; i < 5; i++ {
		src.publish(t0, "a", "x")
	}
	// dseq 2 is within half a block of 4: reserved 6 (not yet persisted).
	expectOuts(t, c.Dispatch(t0), "r<-2(d2,n1); r<-3(d3,n1); r<-4(d4,n1)")
	st, gen, _ = c.Snapshot()
	if st.DSeqReserved != 8 {
		t.Fatalf("reserved %d", st.DSeqReserved)
	}
	expectOuts(t, c.Persisted(gen), "r<-5(d5,n1); r<-6(d6,n1)")
	// Restore from a snapshot reserved at 10 (raised at dseq 6): dseq
	// continues at 11.
	st, _, _ = c.Snapshot()
	if st.DSeqReserved != 10 {
		t.Fatalf("reserved %d", st.DSeqReserved)
	}
	c2, err := New(pullCfg(nil), &st, t0, src, StreamName("ORDERS"), DSeqBlock(4))
	if err != nil {
		t.Fatal(err)
	}
	expectOuts(t, c2.Pull(t0, "r2", jsapi.PullRequest{Batch: 1, Expires: time.Minute}), "")
	_, gen, _ = c2.Snapshot()
	expectOuts(t, c2.Persisted(gen), "r2<-1(d11,n2)")
}

// After a restart, what was delivered but not acked is redelivered with
// its count kept; persisted acks never come back; unpersisted ones do.
func TestRestore(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(func(c *jsapi.ConsumerConfig) { c.MaxDeliver = 3 }))
	h.publishN(5)
	expectOuts(t, h.pull("a", jsapi.PullRequest{Batch: 4}), "a<-1(d1,n1); a<-2(d2,n1); a<-3(d3,n1); a<-4(d4,n1)")
	h.c.Ack(h.now, 2, 2, jsapi.Ack{Kind: jsapi.AckAck}, "")
	h.c.Ack(h.now, 1, 1, jsapi.Ack{Kind: jsapi.AckNak}, "")
	expectOuts(t, h.pull("a", jsapi.PullRequest{Batch: 1}), "a<-1(d5,n2)")
	h.c.Ack(h.now, 1, 5, jsapi.Ack{Kind: jsapi.AckNak}, "")
	expectOuts(t, h.pull("a", jsapi.PullRequest{Batch: 1}), "a<-1(d6,n3)") // at max_deliver
	h.persist()
	h.c.Ack(h.now, 3, 3, jsapi.Ack{Kind: jsapi.AckAck}, "") // lost in the crash

	h.advance(time.Second)
	h.restart()
	info := h.c.Info(h.now)
	if info.NumAckPending != 3 || info.Delivered.Stream != 4 || info.AckFloor.Stream != 0 || info.Delivered.Consumer != 1000 {
		t.Fatalf("restored info %+v", info)
	}
	if info.AckFloor.Consumer != h.persisted.AckFloorDSeq {
		t.Fatalf("ack floor dseq %d", info.AckFloor.Consumer)
	}
	outs := h.pull("b", jsapi.PullRequest{Batch: 5, NoWait: true})
	expectOuts(t, outs, "") // the reservation is not persisted yet
	outs = h.persist()
	expectOuts(t, outs, "b<-3(d1001,n2); b<-4(d1002,n2); b<-5(d1003,n1); b<-404 No Messages")
	// 1 reached max_deliver: it gets one more ack wait, then stops.
	h.c.Ack(h.now, 1, 0, jsapi.Ack{Kind: jsapi.AckProgress}, "")
	h.advance(2 * time.Second)
	expectOuts(t, h.tick(), "maxdeliver:1(3)")
	h.c.checkInvariants(t)
}

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*jsapi.ConsumerConfig)
		want error
	}{
		{func(c *jsapi.ConsumerConfig) { c.DeliverSubject = "push.x" }, ErrUnsupported},
		{func(c *jsapi.ConsumerConfig) { c.AckPolicy = jsapi.AckFlowControl }, ErrUnsupported},
		{func(c *jsapi.ConsumerConfig) { c.DeliverPolicy = jsapi.DeliverLastPerSubject }, ErrUnsupported},
		{func(c *jsapi.ConsumerConfig) { c.ReplayPolicy = jsapi.ReplayOriginal }, ErrUnsupported},
		{func(c *jsapi.ConsumerConfig) { c.HeadersOnly = true }, ErrUnsupported},
		{func(c *jsapi.ConsumerConfig) {
			c.PriorityPolicy, c.PriorityGroups = jsapi.PriorityOverflow, []string{"g"}
		}, ErrUnsupported},
		{func(c *jsapi.ConsumerConfig) {
			c.PriorityPolicy, c.PriorityGroups = jsapi.PriorityPrioritized, []string{"g"}
		}, ErrUnsupported},
		{func(c *jsapi.ConsumerConfig) {
			c.PriorityPolicy, c.PriorityGroups = jsapi.PriorityPinned, []string{"g", "h"}
		}, ErrUnsupported},
		{func(c *jsapi.ConsumerConfig) {
			c.PriorityPolicy, c.PriorityGroups = jsapi.PriorityPinned, []string{"bad group"}
		}, ErrInvalidConfig},
		{func(c *jsapi.ConsumerConfig) { c.PriorityTimeout = time.Second }, ErrInvalidConfig},
		{func(c *jsapi.ConsumerConfig) { c.Metadata = map[string]string{MetaSubscription: "failover"} }, ErrInvalidConfig},
		{func(c *jsapi.ConsumerConfig) { c.Metadata = map[string]string{MetaKey: "subject"} }, ErrInvalidConfig},
		{func(c *jsapi.ConsumerConfig) {
			c.Metadata = map[string]string{MetaSubscription: "key_shared", MetaKey: "header:"}
		}, ErrInvalidConfig},
		{func(c *jsapi.ConsumerConfig) {
			c.Metadata = map[string]string{MetaSubscription: "key_shared", MetaKey: "payload"}
		}, ErrInvalidConfig},
		{func(c *jsapi.ConsumerConfig) {
			c.Metadata, c.AckPolicy = map[string]string{MetaSubscription: "key_shared"}, jsapi.AckAll
		}, ErrInvalidConfig},
		{func(c *jsapi.ConsumerConfig) {
			c.Metadata = map[string]string{MetaSubscription: "key_shared"}
			c.PriorityPolicy, c.PriorityGroups = jsapi.PriorityPinned, []string{"g"}
		}, ErrInvalidConfig},
		{func(c *jsapi.ConsumerConfig) { c.FilterSubject = "a..b" }, ErrInvalidConfig},
		{func(c *jsapi.ConsumerConfig) { c.DeliverPolicy = jsapi.DeliverByStartSeq }, ErrInvalidConfig},
		{func(c *jsapi.ConsumerConfig) { c.FilterSubject, c.FilterSubjects = "a", []string{"b"} }, ErrInvalidConfig},
	} {
		if _, err := New(pullCfg(tc.mod), nil, t0, newSource(), StreamName("S")); !errors.Is(err, tc.want) {
			t.Errorf("New: %v, want %v", err, tc.want)
		}
	}
	if _, err := New(pullCfg(nil), &State{AckedAbove: []byte{9}}, t0, newSource(), StreamName("S")); !errors.Is(err, ErrBadState) {
		t.Errorf("bad state: %v", err)
	}
	if _, err := New(pullCfg(nil), nil, t0, nil, StreamName("S")); err == nil {
		t.Error("nil source accepted")
	}
	if _, err := New(pullCfg(nil), nil, t0, newSource()); err == nil {
		t.Error("no stream name accepted")
	}
	if _, err := New(pinCfg(nil), nil, t0, newSource(), StreamName("S")); err == nil {
		t.Error("pinned_client without PinIDs accepted")
	}
	if _, err := New(pullCfg(func(c *jsapi.ConsumerConfig) { c.Durable = "" }), nil, t0, newSource(), StreamName("S")); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("unnamed consumer: %v", err)
	}
	src := &timeErrSource{newSource()}
	at := t0
	if _, err := New(pullCfg(func(c *jsapi.ConsumerConfig) {
		c.DeliverPolicy, c.OptStartTime = jsapi.DeliverByStartTime, &at
	}), nil, t0, src, StreamName("S")); err == nil {
		t.Error("SeqAtTime error ignored")
	}
}

type timeErrSource struct{ *fakeSource }

func (timeErrSource) SeqAtTime(time.Time) (uint64, error) { return 0, errors.New("no index") }

func TestUpdateConfig(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(func(c *jsapi.ConsumerConfig) { c.MaxAckPending = 1 }))
	h.publishN(3)
	expectOuts(t, h.pull("a", jsapi.PullRequest{Batch: 3, Expires: time.Minute}), "a<-1(d1,n1)")
	err := h.c.UpdateConfig(pullCfg(func(c *jsapi.ConsumerConfig) { c.AckPolicy = jsapi.AckAll; c.DeliverPolicy = jsapi.DeliverNew }))
	if !errors.Is(err, ErrImmutable) || !strings.Contains(err.Error(), "ack_policy") || !strings.Contains(err.Error(), "deliver_policy") {
		t.Fatalf("UpdateConfig: %v", err)
	}
	if err := h.c.UpdateConfig(pullCfg(func(c *jsapi.ConsumerConfig) { c.DeliverSubject = "x" })); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("UpdateConfig push: %v", err)
	}
	_, _, dirtyBefore := h.c.Snapshot()
	h.persist()
	if err := h.c.UpdateConfig(pullCfg(func(c *jsapi.ConsumerConfig) { c.MaxAckPending = 5; c.Description = "more" })); err != nil {
		t.Fatal(err)
	}
	if st, _, dirty := h.c.Snapshot(); !dirty || st.Config.Description != "more" || !dirtyBefore {
		t.Fatalf("config not persisted: dirty %v %q", dirty, st.Config.Description)
	}
	expectOuts(t, h.c.Dispatch(h.now), "a<-2(d2,n1); a<-3(d3,n1)")
	if got := h.c.Info(h.now).Config.MaxAckPending; got != 5 {
		t.Fatalf("max_ack_pending %d", got)
	}
}

// The persisted state is snake_case JSON and round-trips.
func TestStateJSON(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(nil))
	h.publishN(4)
	h.pull("a", jsapi.PullRequest{Batch: 4})
	h.c.Ack(h.now, 2, 2, jsapi.Ack{Kind: jsapi.AckAck}, "")
	h.c.Ack(h.now, 4, 4, jsapi.Ack{Kind: jsapi.AckNak}, "")
	h.pull("a", jsapi.PullRequest{Batch: 1})
	st, _, _ := h.c.Snapshot()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"config":`, `"created":`, `"mark_delete":0`, `"acked_above":`, `"delivered":4`,
		`"dseq_reserved":1000`, `"ack_floor_dseq":0`, `"redelivered":{"4":2}`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("%s lacks %s", b, key)
		}
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	c2, err := New(pullCfg(nil), &back, t0, h.src, StreamName("ORDERS"))
	if err != nil {
		t.Fatal(err)
	}
	if c2.MarkDelete() != 0 || !c2.acks.Contains(2) || c2.pending[4].count != 2 || len(c2.pending) != 3 {
		t.Fatalf("restored %s pending %d", c2.acks, len(c2.pending))
	}
}

func TestInfo(t *testing.T) {
	h := newHarness(t, newSource(), pullCfg(func(c *jsapi.ConsumerConfig) { c.Durable = ""; c.Name = "eph" }))
	h.publishN(5)
	h.pull("a", jsapi.PullRequest{Batch: 3})
	h.advance(time.Second)
	h.c.Ack(h.now, 2, 2, jsapi.Ack{Kind: jsapi.AckAck}, "")
	h.c.Ack(h.now, 1, 1, jsapi.Ack{Kind: jsapi.AckNak}, "")
	h.pull("b", jsapi.PullRequest{Batch: 1})
	h.pull("c", jsapi.PullRequest{Batch: 9, Expires: time.Minute})
	info := h.c.Info(h.now)
	last := h.now
	ackLast := h.now
	want := jsapi.ConsumerInfo{
		Stream: "ORDERS", Name: "eph", Created: t0, Config: h.c.Config(),
		Delivered: jsapi.SequenceInfo{Consumer: 6, Stream: 5, Last: &last},
		// Pending: 1 (d4), 3 (d3), 4 (d5), 5 (d6): deliveries <= 2 are done.
		AckFloor:      jsapi.SequenceInfo{Consumer: 2, Stream: 0, Last: &ackLast},
		NumAckPending: 4, NumRedelivered: 1, NumWaiting: 1, NumPending: 0, TimeStamp: h.now,
	}
	gb, _ := json.Marshal(info)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Fatalf("info\n got %s\nwant %s", gb, wb)
	}
	if info.Config.InactiveThreshold != jsapi.DefaultEphemeralInactiveThreshold {
		t.Fatalf("defaults not applied: %+v", info.Config)
	}
}
