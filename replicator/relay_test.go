package replicator

import (
	"errors"
	"testing"
	"time"
)

func drain(t *testing.T, m *relayMesh, rounds int) {
	t.Helper()
	for i := 0; i < rounds; i++ {
		m.pump()
		m.deliverAll()
		if ok, _ := m.done(); ok {
			return
		}
		m.tick(500 * time.Millisecond)
	}
	_, why := m.done()
	t.Fatalf("not drained after %d rounds: %s", rounds, why)
}

// learnedAll is the sequences every direct sender learned through a
// third region.
func learnedAll(m *relayMesh) (learned uint64) {
	for _, r := range m.regions {
		for _, s := range r.direct {
			learned += s.Status(m.now).Stats.Learned
		}
	}
	return learned
}

// TestRelayCutLink: with b–c cut, b's messages reach c through a,
// exactly once, and b's cursor towards c reaches b's last sequence
// through the mark a learned from c; a healed link then adds nothing.
func TestRelayCutLink(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AckTimeout, cfg.BackoffInitial, cfg.BackoffMax = 2*time.Second, time.Second, 4*time.Second
	m := newRelayMesh(t, cfg, 3*time.Second, "a", "b", "c")
	m.setCut("b", "c", true)
	m.publish("b", 250)
	started := 0
	for i := 0; i < 200; i++ {
		m.pump()
		started = max(started, len(m.regions["a"].relays))
		m.deliverAll()
		if ok, _ := m.done(); ok {
			break
		}
		m.tick(500 * time.Millisecond)
	}
	if ok, why := m.done(); !ok {
		t.Fatalf("not drained with b–c cut: %s", why)
	}
	if started != 1 {
		t.Errorf("a ran %d relays, want 1 (b's stream to c)", started)
	}
	bc, ba := m.regions["b"].direct["c"].Status(m.now), m.regions["b"].direct["a"].Status(m.now)
	if bc.Stats.Learned != 250 || ba.Stats.Probes == 0 {
		t.Errorf("b's cursor to c: learned %d (want 250); probes to a %d (want > 0)", bc.Stats.Learned, ba.Stats.Probes)
	}
	if n := len(m.regions["c"].copies[m.regions["b"].local.stream].msgs); n != 250 {
		t.Errorf("c holds %d of b's messages, want 250", n)
	}
	m.setCut("b", "c", false)
	m.publish("b", 5)
	drain(t, m, 100)
	for o, k := range m.regions["c"].stored {
		if k != 1 {
			t.Fatalf("c stored %s seq %d %d times", o.Region, o.Seq, k)
		}
	}
}

// TestRelayHealthyMeshNoRelay: in a healthy mesh every region publishes
// and every link delivers within the relay delay: no relay starts and no
// cursor learns through a third region.
func TestRelayHealthyMeshNoRelay(t *testing.T) {
	m := newRelayMesh(t, DefaultConfig(), 5*time.Second, "a", "b", "c")
	for i := 0; i < 100; i++ {
		for _, n := range m.names {
			m.publish(n, 3)
		}
		m.pump()
		m.deliverAll()
		for _, r := range m.regions {
			if len(r.relays) != 0 {
				t.Fatalf("round %d: %s runs relays %v", i, r.name, r.relays)
			}
		}
		m.tick(time.Second)
	}
	drain(t, m, 10)
	if learned := learnedAll(m); learned != 0 {
		t.Errorf("learned %d sequences through a third region in a healthy mesh", learned)
	}
}

// TestRelayPlan drives Relay directly: behind for less than the delay is
// no relay; a remote keeping up with a moving target never relays; a
// stuck one is relayed from its known mark; caught up ends it; the
// origin and this region are never relay targets; Probe for the local
// stream.
func TestRelayPlan(t *testing.T) {
	sb := Stream{Topic: testTopic, Region: "b", Incarnation: "ib"}
	sa := Stream{Topic: testTopic, Region: "a", Incarnation: "ia"}
	r, err := NewRelay("a", []string{"b", "c"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	held := func(h uint64) []StreamState { return []StreamState{{Stream: sb, HWM: h}} }
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	if p := r.Plan(at(0), held(10), sa, 0); len(p.Routes) != 0 || p.Probe {
		t.Fatalf("at 0: %+v", p)
	}
	if p := r.Plan(at(4), held(10), sa, 0); len(p.Routes) != 0 {
		t.Fatalf("behind for 4 s: %+v", p)
	}
	// c keeps up with a moving target: each stretch ends before the delay.
	for s := 1; s <= 20; s++ {
		r.Learn(Mark{Holder: "c", Stream: sb, HWM: uint64(10 * s)})
		if p := r.Plan(at(4+s*3), held(uint64(10*s+10)), sa, 0); len(p.Routes) != 0 {
			t.Fatalf("keeping up, at %d s: %+v", 4+s*3, p)
		}
	}
	// c stops at 200 while a holds 210 and more.
	base := 4 + 20*3
	if p := r.Plan(at(base+4), held(230), sa, 0); len(p.Routes) != 0 {
		t.Fatalf("stuck for 4 s: %+v", p)
	}
	p := r.Plan(at(base+6), held(240), sa, 0)
	if len(p.Routes) != 1 || p.Routes[0] != (Route{Stream: sb, To: "c", From: 200}) {
		t.Fatalf("stuck for 6 s: %+v", p)
	}
	if d := r.NextDeadline(); d.IsZero() {
		t.Errorf("NextDeadline zero with a stretch pending")
	}
	r.Learn(Mark{Holder: "c", Stream: sb, HWM: 100}) // lower: ignored
	if r.Known("c", sb) != 200 {
		t.Errorf("known %d after a lower mark", r.Known("c", sb))
	}
	r.Learn(Mark{Holder: "c", Stream: sb, HWM: 240})
	if p := r.Plan(at(base+7), held(240), sa, 0); len(p.Routes) != 0 {
		t.Fatalf("caught up: %+v", p)
	}
	// The local stream: b behind for the delay sets Probe, no route.
	r.Plan(at(100), nil, sa, 5)
	if p := r.Plan(at(106), nil, sa, 5); !p.Probe || len(p.Routes) != 0 {
		t.Fatalf("local stream behind: %+v", p)
	}
	if got := r.MarksFor("b"); len(got) != 1 || got[0] != (Mark{Holder: "c", Stream: sb, HWM: 240}) {
		t.Errorf("MarksFor(b) = %v", got)
	}
	r.Learn(Mark{Holder: "a", Stream: sb, HWM: 999}) // itself: ignored
	r.Learn(Mark{Holder: "z", Stream: sb, HWM: 999}) // not a remote: ignored
	if len(r.MarksFor("b")) != 1 {
		t.Errorf("MarksFor(b) = %v after marks of a and z", r.MarksFor("b"))
	}
	r.Forget(sb)
	if r.Known("c", sb) != 0 {
		t.Errorf("known after Forget")
	}
	for _, bad := range []struct {
		self    string
		remotes []string
		delay   time.Duration
	}{{"", nil, time.Second}, {"a", []string{"a"}, time.Second}, {"a", []string{""}, time.Second}, {"a", nil, 0}} {
		if _, err := NewRelay(bad.self, bad.remotes, bad.delay); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewRelay(%q, %q, %v): %v", bad.self, bad.remotes, bad.delay, err)
		}
	}
}

// TestRelaySender: a relay sender probes with one message, then opens
// its window; it sends no gap record for copies it lacks; a mark above
// its source is accepted.
func TestRelaySender(t *testing.T) {
	sb := Stream{Topic: testTopic, Region: "b", Incarnation: "ib"}
	src := &originLog{stream: sb}
	for i := 1; i <= 20; i++ {
		src.msgs = append(src.msgs, Msg{Origin: Origin{Region: "b", Incarnation: "ib", Seq: uint64(i), Time: t0}, Data: []byte("x")})
	}
	cfg := DefaultConfig()
	cfg.MaxBatchMsgs = 5
	s, err := NewRelaySender(cfg, sb, "c", 4, src, t0)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := s.Send(t0)
	if err != nil || len(bs) != 1 || bs[0].First != 5 || bs[0].Last != 5 {
		t.Fatalf("probe: %v %v", bs, err)
	}
	if more, _ := s.Send(t0); len(more) != 0 {
		t.Fatalf("sent %v while probing", more)
	}
	if err := s.Answer(t0, Answer{Batch: bs[0].ID, Kind: Stored, HWM: 5}); err != nil {
		t.Fatal(err)
	}
	bs, _ = s.Send(t0)
	if len(bs) != 3 || bs[0].First != 6 || bs[2].Last != 20 {
		t.Fatalf("after the probe: %v", bs)
	}
	if err := s.Answer(t0, Answer{Batch: bs[2].ID, Kind: Duplicate, HWM: 30}); err != nil {
		t.Fatalf("a mark above the relay's source: %v", err)
	}
	if s.Position() != 30 {
		t.Errorf("position %d, want 30", s.Position())
	}
	// Copies trimmed here: no gap record, nothing sent.
	src.first = 10
	r, _ := NewRelaySender(cfg, sb, "c", 2, src, t0)
	if bs, err := r.Send(t0); len(bs) != 0 || err != nil {
		t.Fatalf("relay below its first copy sent %v, %v", bs, err)
	}
	if _, err := NewRelaySender(cfg, sb, "b", 0, src, t0); !errors.Is(err, ErrInvalid) {
		t.Errorf("relay to the origin: %v", err)
	}
	if _, ok := r.Probe(t0); ok {
		t.Errorf("a relay sender probed")
	}
}

// TestSenderLearn: a mark learned through a third region moves the
// position (at most to the source's last), drops covered batches, and a
// lower one changes nothing; Probe resends the message at the position.
func TestSenderLearn(t *testing.T) {
	sa := Stream{Topic: testTopic, Region: "a", Incarnation: "ia"}
	src := &originLog{stream: sa}
	for i := 1; i <= 10; i++ {
		src.msgs = append(src.msgs, Msg{Origin: Origin{Region: "a", Incarnation: "ia", Seq: uint64(i), Time: t0}, Data: []byte("x")})
	}
	s, err := NewSender(DefaultConfig(), sa, "c", SenderState{}, src, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Probe(t0); ok {
		t.Fatalf("probe at position 0")
	}
	if bs, _ := s.Send(t0); len(bs) != 1 {
		t.Fatalf("send: %v", bs)
	}
	if !s.Learn(t0, 7) || s.Position() != 7 || s.Status(t0).Lag.Msgs != 3 {
		t.Fatalf("learn 7: position %d lag %d", s.Position(), s.Status(t0).Lag.Msgs)
	}
	if s.Learn(t0, 5) || s.Position() != 7 {
		t.Fatalf("a lower mark moved the position to %d", s.Position())
	}
	if !s.Learn(t0, 99) || s.Position() != 10 || s.Status(t0).Lag.Msgs != 0 || s.Status(t0).InFlight != 0 {
		t.Fatalf("learn 99: position %d", s.Position())
	}
	b, ok := s.Probe(t0)
	if !ok || b.First != 10 || b.Last != 10 || len(b.Msgs) != 1 {
		t.Fatalf("probe: %v %v", b, ok)
	}
	if err := s.Answer(t0, Answer{Batch: b.ID, Kind: Duplicate, HWM: 10}); err != nil || s.Position() != 10 {
		t.Fatalf("probe answer: %v, position %d", err, s.Position())
	}
}

// TestRelayObserve: a holder's own mark replaces what was known, lower
// or not (a remote rebuilt from empty storage), while a mark learned
// through a third region only raises it; marks of this region or of a
// non-remote are ignored.
func TestRelayObserve(t *testing.T) {
	sa := Stream{Topic: testTopic, Region: "a", Incarnation: "ia"}
	r, err := NewRelay("a", []string{"b", "c"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r.Learn(Mark{Holder: "b", Stream: sa, HWM: 30})
	r.Learn(Mark{Holder: "b", Stream: sa, HWM: 10})
	if got := r.Known("b", sa); got != 30 {
		t.Fatalf("after a lower learned mark: %d, want 30", got)
	}
	r.Observe(Mark{Holder: "b", Stream: sa, HWM: 0}) // b rebuilt: it says it holds nothing
	if got := r.Known("b", sa); got != 0 {
		t.Fatalf("after b's own mark 0: %d, want 0", got)
	}
	r.Observe(Mark{Holder: "a", Stream: sa, HWM: 9})
	r.Observe(Mark{Holder: "z", Stream: sa, HWM: 9})
	if r.Known("a", sa) != 0 || r.Known("z", sa) != 0 {
		t.Fatalf("marks of self or a non-remote kept: a %d z %d", r.Known("a", sa), r.Known("z", sa))
	}
}
