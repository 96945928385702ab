package quota

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func rateLimits(limit float64) Limits {
	var l Limits
	l.Mesh[PublishRate] = limit
	return l
}

// TestEchoRule: a lease from a coordinator is valid at the broker until
// the broker's own echoed Sent + LendFor, on the broker's clock,
// whatever the coordinator's clock reads.
func TestEchoRule(t *testing.T) {
	l := rateLimits(300)
	b := NewBroker(BrokerConfig{ID: "b0"})
	b.SetTenant("t", l, BrokerBase(l, "a", 3, 1), t0)
	hello := b.Hello(t0)
	// The coordinator's clock is an hour ahead; its message reaches the
	// broker 200 ms after the broker's hello.
	coordNow := t0.Add(time.Hour)
	m := &Msg{From: "region/a", Term: 1, Sent: nanos(coordNow), Echo: hello.Sent, To: "broker/b0",
		Tenants: map[string]*Entry{"t": {Lend: [NumKinds]float64{PublishRate: 50}, LendFor: [NumKinds]int64{PublishRate: int64(time.Second)}}}}
	b.Receive(m, t0.Add(200*time.Millisecond))
	for _, c := range []struct {
		at   time.Duration
		want float64
	}{{200 * time.Millisecond, 150}, {999 * time.Millisecond, 150}, {time.Second, 100}, {time.Hour, 100}} {
		if got, _ := b.Allowance("t", PublishRate, t0.Add(c.at)); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("allowance at +%v = %v, want %v (valid until the echoed hello + 1 s)", c.at, got, c.want)
		}
	}
	// A lease with no echo (the coordinator had nothing from the broker)
	// is not taken.
	b2 := NewBroker(BrokerConfig{ID: "b1"})
	b2.SetTenant("t", l, BrokerBase(l, "a", 3, 1), t0)
	m.Echo = 0
	b2.Receive(m, t0.Add(10*time.Millisecond))
	if got, _ := b2.Allowance("t", PublishRate, t0.Add(20*time.Millisecond)); got != 100 {
		t.Errorf("allowance with an unechoed lease = %v, want the static share 100", got)
	}
}

// TestBrokerLendsAndReleases: a broker lends what it is asked for,
// reserved until LeaseTTL after the coordinator's message it echoes
// arrived; a lower Want releases the leases of reports up to the echo,
// not later ones.
func TestBrokerLendsAndReleases(t *testing.T) {
	l := rateLimits(300)
	b := NewBroker(BrokerConfig{ID: "b0", LeaseTTL: 3 * time.Second})
	b.SetTenant("t", l, BrokerBase(l, "a", 3, 1), t0)
	h := b.Hello(t0)
	want := func(w float64, sent, echo time.Time, at time.Time) {
		b.Receive(&Msg{From: "region/a", Term: 1, Sent: nanos(sent), Echo: nanos(echo),
			Tenants: map[string]*Entry{"t": {Want: [NumKinds]float64{PublishRate: w}}}}, at)
	}
	want(60, t0.Add(100*time.Millisecond), fromNanos(h.Sent), t0.Add(100*time.Millisecond))
	r1 := b.Report(t0.Add(250 * time.Millisecond))
	if len(r1) != 1 || r1[0].Tenants["t"].Lend[PublishRate] != 60 || r1[0].To != "region/a" || r1[0].ToTerm != 1 {
		t.Fatalf("report = %+v, want a lease of 60 to region/a term 1", r1)
	}
	if r1[0].Tenants["t"].LendFor[PublishRate] != int64(3*time.Second) {
		t.Errorf("lend_for = %v, want the lease TTL", time.Duration(r1[0].Tenants["t"].LendFor[PublishRate]))
	}
	if got, _ := b.Allowance("t", PublishRate, t0.Add(300*time.Millisecond)); got != 40 {
		t.Errorf("allowance after lending 60 = %v, want 40", got)
	}
	// Reserved until 3 s after the message it echoes arrived (+100 ms).
	if got, _ := b.Allowance("t", PublishRate, t0.Add(3099*time.Millisecond)); got != 40 {
		t.Errorf("allowance at +3.099 s = %v, want 40", got)
	}
	// Asked for 20 now, by a message that had the report: released to 20.
	want(20, t0.Add(400*time.Millisecond), fromNanos(r1[0].Sent), t0.Add(400*time.Millisecond))
	if got, _ := b.Allowance("t", PublishRate, t0.Add(401*time.Millisecond)); got != 80 {
		t.Errorf("allowance after a release to 20 = %v, want 80", got)
	}
	// A lease made after the echo the release carries is not released.
	want(60, t0.Add(500*time.Millisecond), fromNanos(r1[0].Sent), t0.Add(500*time.Millisecond))
	r2 := b.Report(t0.Add(600 * time.Millisecond))
	if r2[0].Tenants["t"].Lend[PublishRate] != 60 {
		t.Fatalf("second lease = %v, want 60", r2[0].Tenants["t"].Lend[PublishRate])
	}
	want(0, t0.Add(700*time.Millisecond), fromNanos(r1[0].Sent), t0.Add(700*time.Millisecond))
	if got, _ := b.Allowance("t", PublishRate, t0.Add(701*time.Millisecond)); got != 40 {
		t.Errorf("allowance after a release that had not seen the second lease = %v, want 40", got)
	}
}

// coordWithBrokers is a coordinator of region a (of a, b) with brokers
// b0 and b1 reporting cumulative counts every interval.
func reportMsg(id string, sent time.Time, offered, admitted float64) *Msg {
	return &Msg{From: "broker/" + id, Sent: nanos(sent), Tenants: map[string]*Entry{"t": {
		Offered:  [NumKinds]float64{PublishRate: offered},
		Admitted: [NumKinds]float64{PublishRate: admitted}}}}
}

// regionEntry is tenant t's entry in c's message to region r.
func regionEntry(t *testing.T, msgs []*Msg, to string) *Entry {
	t.Helper()
	for _, m := range msgs {
		if m.To == to {
			if e := m.Tenants["t"]; e != nil {
				return e
			}
		}
	}
	t.Fatalf("no entry for t to %s in %d messages", to, len(msgs))
	return nil
}

// TestDemandJumpWithinOneInterval: a jump in a broker's offered rate is
// in the region's demand at the first tick after the report that shows
// it, whatever the rates before.
func TestDemandJumpWithinOneInterval(t *testing.T) {
	c := NewCoordinator(CoordConfig{Region: "a", Regions: []string{"a", "b"}, Term: 1, Brokers: 1}, t0)
	c.SetTenant("t", rateLimits(1000))
	c.Receive(&Msg{From: "region/b", Term: 1, Sent: nanos(t0)}, t0)
	var off float64
	at := t0
	for i := range 8 { // 2 s at 100 msgs/s
		at = t0.Add(time.Duration(i) * 250 * time.Millisecond)
		c.Receive(reportMsg("b0", at, off, off), at)
		off += 25
	}
	c.Receive(&Msg{From: "region/b", Term: 1, Sent: nanos(at)}, at)
	e := regionEntry(t, c.Tick(at.Add(time.Millisecond)), "region/b")
	if math.Abs(e.Demand[PublishRate]-100) > 1 {
		t.Fatalf("demand before the jump = %v, want 100", e.Demand[PublishRate])
	}
	// One interval at 2000 msgs/s.
	at = at.Add(250 * time.Millisecond)
	off += 500 - 25
	c.Receive(reportMsg("b0", at, off, off), at)
	c.Receive(&Msg{From: "region/b", Term: 1, Sent: nanos(at)}, at)
	e = regionEntry(t, c.Tick(at.Add(time.Millisecond)), "region/b")
	if e.Demand[PublishRate] < 1999 {
		t.Errorf("demand one interval after the jump = %v, want ≥ 2000", e.Demand[PublishRate])
	}
}

// TestLostReportLosesNoUse: the counts are cumulative, so a report that
// never arrives costs nothing: the next one carries its publishes, and
// the rate over the gap is right.
func TestLostReportLosesNoUse(t *testing.T) {
	for _, lose := range []bool{false, true} {
		c := NewCoordinator(CoordConfig{Region: "a", Regions: []string{"a", "b"}, Term: 1, Brokers: 1}, t0)
		c.SetTenant("t", rateLimits(1000))
		var n float64
		var at time.Time
		for i := range 8 { // 400 msgs/s
			at = t0.Add(time.Duration(i) * 250 * time.Millisecond)
			if !(lose && i == 6) {
				c.Receive(reportMsg("b0", at, n, n), at)
			}
			n += 100
		}
		u, _ := c.Usage("t", at.Add(time.Millisecond))
		if got := u.Quotas[0].Regions[0].Use; math.Abs(got-400) > 1e-6 {
			t.Errorf("lost report %v: region a's use = %v msgs/s, want 400", lose, got)
		}
	}
}

// TestTermsAreParties: a coordinator takes no leases or echo from a
// message meant for another incarnation of itself, and a broker takes
// no caps from an older coordinator once it has heard a newer one.
func TestTermsAreParties(t *testing.T) {
	c := NewCoordinator(CoordConfig{Region: "a", Regions: []string{"a", "b"}, Term: 2, Brokers: 1}, t0)
	c.SetTenant("t", rateLimits(1000))
	lease := &Msg{From: "region/b", Term: 1, Sent: nanos(t0), Echo: nanos(t0), ToTerm: 1,
		Tenants: map[string]*Entry{"t": {Lend: [NumKinds]float64{PublishRate: 100}, LendFor: [NumKinds]int64{PublishRate: int64(time.Second)}}}}
	c.Receive(lease, t0)
	for _, p := range c.peers {
		if h := p.lentMe["t"]; h != nil && h[PublishRate].at(t0) != 0 {
			t.Errorf("took a lease meant for term 1: %v", h[PublishRate])
		}
		if p.echo != 0 {
			t.Errorf("took an echo meant for term 1: %v", p.echo)
		}
	}
	var l Limits
	l.Mesh[Connections] = 30
	b := NewBroker(BrokerConfig{ID: "b0"})
	b.SetTenant("t", l, BrokerBase(l, "a", 3, 1), t0)
	capMsg := func(term uint64, sent time.Duration, cp float64) *Msg {
		return &Msg{From: "region/a", Term: term, Sent: nanos(t0.Add(sent)),
			Tenants: map[string]*Entry{"t": {Cap: [NumKinds]float64{Connections: cp}, Caps: 1 << Connections}}}
	}
	b.Receive(capMsg(1, 0, 5), t0)
	b.Receive(capMsg(2, time.Second, 7), t0.Add(time.Second)) // another clock: earlier Sent does not matter
	b.Receive(capMsg(1, 2*time.Second, 20), t0.Add(2*time.Second))
	if got, _ := b.Cap("t", Connections); got != 7 {
		t.Errorf("cap = %v, want 7 (term 2's; term 1 superseded)", got)
	}
	// A message with no cap bit leaves the cap as it was.
	b.Receive(&Msg{From: "region/a", Term: 2, Sent: nanos(t0.Add(3 * time.Second)), Tenants: map[string]*Entry{"t": {}}}, t0.Add(3*time.Second))
	if got, _ := b.Cap("t", Connections); got != 7 {
		t.Errorf("cap after a message without caps = %v, want 7", got)
	}
}

// TestTickFindsEveryRegion: a coordinator says hello to every other
// region it has not heard from lately, so a healed link is found again.
func TestTickFindsEveryRegion(t *testing.T) {
	c := NewCoordinator(CoordConfig{Region: "a", Regions: []string{"c", "a", "b"}, Term: 1, Brokers: 1}, t0)
	c.SetTenant("t", rateLimits(1000))
	c.Receive(&Msg{From: "region/b", Term: 4, Sent: 1}, t0)
	msgs := c.Tick(t0.Add(10 * time.Second)) // b long silent, c never heard
	got := map[string]uint64{}
	for _, m := range msgs {
		got[m.To] = m.ToTerm
	}
	if len(got) != 2 || got["region/b"] != 4 || got["region/c"] != 0 {
		t.Errorf("messages to %v, want region/b (term 4) and region/c (term 0)", got)
	}
}

// TestStaticShares: the static shares split the limit evenly, a cap
// holds a region down and the others share what it leaves.
func TestStaticShares(t *testing.T) {
	l := rateLimits(1000)
	l.Regions = map[string][NumKinds]float64{"a": {PublishRate: 100}, "b": {PublishRate: 500}}
	want := map[string]float64{"a": 100, "b": 450, "c": 450}
	var sum float64
	for r, w := range want {
		if got := staticShare(l, r, PublishRate, 3); math.Abs(got-w) > 1e-9 {
			t.Errorf("static share of %s = %v, want %v", r, got, w)
		}
		sum += staticShare(l, r, PublishRate, 3)
	}
	if math.Abs(sum-1000) > 1e-9 {
		t.Errorf("static shares sum to %v, want the limit", sum)
	}
	l.Regions = map[string][NumKinds]float64{"a": {PublishRate: 100}, "b": {PublishRate: 100}, "c": {PublishRate: 100}}
	if got := staticShare(l, "c", PublishRate, 3); got != 100 {
		t.Errorf("all capped: static share of c = %v, want its cap", got)
	}
	if got := BrokerBase(rateLimits(900), "a", 3, 2)[PublishRate]; got != 150 {
		t.Errorf("broker base = %v, want 150", got)
	}
}
