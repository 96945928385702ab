package replicator

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// relayMesh is a small simulated mesh for relays: three regions, one
// topic, each region with its own origin log, a receiver and the copies
// it stored, a direct sender per remote, a Relay and its relay senders.
// Links are FIFO queues per direction; a cut drops what is queued and
// everything sent while cut. Answers carry marks as the driver's do: the
// receiver's own marks and what it knows others hold of the batch's
// origin.
type relayMesh struct {
	t       interface{ Fatalf(string, ...any) }
	cfg     Config
	delay   time.Duration
	now     time.Time
	names   []string
	regions map[string]*relayRegion
	queues  map[[2]string][]relayPacket
	cut     map[[2]string]bool
}

type relayRegion struct {
	name      string
	local     *originLog
	rcv       *Receiver
	copies    map[Stream]*originLog // copies of other origins, as stored
	stored    map[Origin]int        // times each copy was stored (Origin without Time)
	direct    map[string]*Sender
	relay     *Relay
	relays    map[routeKey]*Sender
	lastProbe time.Time
}

type routeKey struct {
	stream Stream
	to     string
}

type relayPacket struct {
	batch  *Batch
	answer *Answer
	marks  []Mark
	key    routeKey // the sender: direct when key.stream is the sender's local stream
}

func newRelayMesh(t interface{ Fatalf(string, ...any) }, cfg Config, delay time.Duration, names ...string) *relayMesh {
	m := &relayMesh{t: t, cfg: cfg, delay: delay, now: t0, names: names, regions: map[string]*relayRegion{},
		queues: map[[2]string][]relayPacket{}, cut: map[[2]string]bool{}}
	for _, n := range names {
		var remotes []string
		for _, o := range names {
			if o != n {
				remotes = append(remotes, o)
			}
		}
		rl, err := NewRelay(n, remotes, delay)
		must(err)
		rc, err := NewReceiver(ReceiverState{})
		must(err)
		r := &relayRegion{name: n, local: &originLog{stream: Stream{Topic: testTopic, Region: n, Incarnation: "inc-" + n}},
			rcv: rc, copies: map[Stream]*originLog{}, stored: map[Origin]int{}, direct: map[string]*Sender{}, relay: rl, relays: map[routeKey]*Sender{}}
		for _, o := range remotes {
			s, err := NewSender(cfg, r.local.stream, o, SenderState{}, r.local, m.now)
			must(err)
			r.direct[o] = s
		}
		m.regions[n] = r
	}
	return m
}

func (m *relayMesh) publish(n string, count int) {
	o := m.regions[n].local
	for range count {
		seq := uint64(len(o.msgs) + 1)
		o.msgs = append(o.msgs, Msg{Origin: Origin{Region: n, Incarnation: o.stream.Incarnation, Seq: seq, Time: m.now}, Data: []byte("m")})
	}
}

func (m *relayMesh) setCut(a, b string, cut bool) {
	for _, d := range [][2]string{{a, b}, {b, a}} {
		m.cut[d] = cut
		if cut {
			m.queues[d] = nil
		}
	}
}

func (m *relayMesh) send(from, to string, p relayPacket) {
	if !m.cut[[2]string{from, to}] {
		m.queues[[2]string{from, to}] = append(m.queues[[2]string{from, to}], p)
	}
}

// pump runs every region's driver step: plan relays, probe, send.
func (m *relayMesh) pump() {
	for _, n := range m.names {
		r := m.regions[n]
		for o, s := range r.direct {
			r.relay.Learn(Mark{Holder: o, Stream: r.local.stream, HWM: s.Position()})
		}
		plan := r.relay.Plan(m.now, r.rcv.State().Streams, r.local.stream, r.local.LastSeq())
		want := map[routeKey]Route{}
		for _, rt := range plan.Routes {
			want[routeKey{rt.Stream, rt.To}] = rt
		}
		for k := range r.relays {
			if _, ok := want[k]; !ok {
				delete(r.relays, k)
			}
		}
		for k, rt := range want {
			if r.relays[k] == nil {
				s, err := NewRelaySender(m.cfg, rt.Stream, rt.To, rt.From, r.copies[rt.Stream], m.now)
				must(err)
				r.relays[k] = s
			}
		}
		if plan.Probe && m.now.Sub(r.lastProbe) >= m.delay {
			r.lastProbe = m.now
			for o, s := range r.direct {
				if b, ok := s.Probe(m.now); ok {
					m.send(n, o, relayPacket{batch: &b, key: routeKey{r.local.stream, o}})
				}
			}
		}
		for o, s := range r.direct {
			m.sendAll(n, o, s, routeKey{r.local.stream, o})
		}
		for k, s := range r.relays {
			m.sendAll(n, k.to, s, k)
		}
	}
}

func (m *relayMesh) sendAll(from, to string, s *Sender, k routeKey) {
	bs, _ := s.Send(m.now)
	for i := range bs {
		m.send(from, to, relayPacket{batch: &bs[i], key: k})
	}
}

// deliver hands the first packet queued from→to to its destination.
func (m *relayMesh) deliver(from, to string) bool {
	q := m.queues[[2]string{from, to}]
	if len(q) == 0 {
		return false
	}
	p := q[0]
	m.queues[[2]string{from, to}] = q[1:]
	r := m.regions[to]
	if p.batch != nil {
		res, err := r.rcv.Receive(p.batch)
		must(err)
		for _, msg := range res.Store {
			o := msg.Origin
			o.Time = time.Time{}
			r.stored[o]++
			s := o.Stream(testTopic)
			if r.copies[s] == nil {
				r.copies[s] = &originLog{stream: s}
			}
			c := r.copies[s]
			if msg.Origin.Seq != uint64(len(c.msgs)+1) {
				m.t.Fatalf("%s stored %s seq %d after %d", to, s, msg.Origin.Seq, len(c.msgs))
			}
			c.msgs = append(c.msgs, msg)
		}
		var marks []Mark
		for _, ss := range r.rcv.State().Streams {
			marks = append(marks, Mark{Holder: to, Stream: ss.Stream, HWM: ss.HWM})
		}
		marks = append(marks, r.relay.MarksFor(p.batch.Stream.Region)...)
		a := res.Answer
		m.send(to, from, relayPacket{answer: &a, marks: marks, key: p.key})
		return true
	}
	var s *Sender
	if p.key.stream == r.local.stream {
		s = r.direct[p.key.to]
	} else {
		s = r.relays[p.key]
	}
	if s != nil {
		_ = s.Answer(m.now, *p.answer)
	}
	for _, mk := range p.marks {
		r.relay.Learn(mk)
		if mk.Stream == r.local.stream && r.direct[mk.Holder] != nil {
			r.direct[mk.Holder].Learn(m.now, mk.HWM)
		}
	}
	return true
}

func (m *relayMesh) tick(d time.Duration) {
	m.now = m.now.Add(d)
	for _, n := range m.names {
		r := m.regions[n]
		for _, s := range r.direct {
			s.Tick(m.now)
		}
		for _, s := range r.relays {
			s.Tick(m.now)
		}
	}
}

func (m *relayMesh) deliverAll() {
	for moved := true; moved; {
		moved = false
		for _, a := range m.names {
			for _, b := range m.names {
				if a != b && m.deliver(a, b) {
					moved = true
				}
			}
		}
	}
}

// done reports whether every region holds every origin's messages and
// every direct sender's position is its origin's last sequence.
func (m *relayMesh) done() (bool, string) {
	for _, n := range m.names {
		r := m.regions[n]
		for _, o := range m.names {
			if o == n {
				continue
			}
			want := m.regions[o].local.LastSeq()
			if h := r.rcv.HWM(m.regions[o].local.stream); h != want {
				return false, fmt.Sprintf("%s holds %s to %d of %d", n, o, h, want)
			}
			if p := m.regions[o].direct[n].Position(); p != want {
				return false, fmt.Sprintf("%s's cursor to %s at %d of %d", o, n, p, want)
			}
		}
	}
	return true, ""
}

// TestPropertyRelay: under any schedule of publishes, link cuts and
// heals, deliveries and ticks, ending with at most one link still cut
// (so every pair of regions is joined directly or through the third),
// the mesh drains: every region holds every message of every origin
// exactly once and in origin order (checked on every store), and every
// origin's replicator cursor reaches its last sequence (its storage is
// released) — the cursor across the cut link through marks learned from
// the third region.
func TestPropertyRelay(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := DefaultConfig()
		cfg.MaxBatchMsgs = rapid.IntRange(1, 4).Draw(rt, "batch")
		cfg.MaxInFlight = rapid.IntRange(1, 8).Draw(rt, "inflight")
		cfg.AckTimeout = 5 * time.Second
		cfg.BackoffInitial = time.Second
		cfg.BackoffMax = 8 * time.Second
		names := []string{"a", "b", "c"}
		delay := time.Duration(rapid.IntRange(1, 10).Draw(rt, "delay_s")) * time.Second
		m := newRelayMesh(rt, cfg, delay, names...)
		region := rapid.SampledFrom(names)
		pair := func(t *rapid.T) (string, string) {
			a := region.Draw(t, "a")
			b := rapid.SampledFrom(slices.DeleteFunc(slices.Clone(names), func(s string) bool { return s == a })).Draw(t, "b")
			return a, b
		}
		rt.Repeat(map[string]func(*rapid.T){
			"publish": func(t *rapid.T) { m.publish(region.Draw(t, "region"), rapid.IntRange(1, 6).Draw(t, "n")); m.pump() },
			"cut":     func(t *rapid.T) { a, b := pair(t); m.setCut(a, b, true) },
			"heal":    func(t *rapid.T) { a, b := pair(t); m.setCut(a, b, false) },
			"deliver": func(t *rapid.T) { a, b := pair(t); m.deliver(a, b) },
			"pump":    func(t *rapid.T) { m.pump() },
			"tick": func(t *rapid.T) {
				m.tick(time.Duration(rapid.IntRange(1, 3000).Draw(t, "ms")) * time.Millisecond)
				m.pump()
			},
		})
		for _, a := range names {
			for _, b := range names {
				if a < b {
					m.setCut(a, b, false)
				}
			}
		}
		if rapid.Bool().Draw(rt, "end_with_a_cut") {
			a, b := pair(rt)
			m.setCut(a, b, true)
		}
		for i := 0; ; i++ {
			m.pump()
			m.deliverAll()
			if ok, _ := m.done(); ok {
				break
			}
			if i == 2000 {
				_, why := m.done()
				rt.Fatalf("not drained after %d rounds (cut %v): %s", i, m.cut, why)
			}
			m.tick(500 * time.Millisecond)
		}
		for _, n := range names {
			for o, k := range m.regions[n].stored {
				if k != 1 {
					rt.Fatalf("%s stored %s seq %d %d times", n, o.Region, o.Seq, k)
				}
			}
		}
	})
}
