package replicator

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stratamesh/strata/tenancy"
)

// mesh is a simulated mesh of regions for the interaction scripts and the
// rapid properties. Each region has one topic (testTopic) with a log of
// stored messages, its messages of local origin (the senders' Source), a
// sender per remote region and a receiver; regions talk over directed
// links with FIFO queues that a partition cuts. The mesh plays the
// drivers' part: it persists states (a receiver's with every stored
// batch, senders' on each tick, both as JSON), restores them after a
// crash, and stores what receivers say to store.
//
// After every step it checks the invariants of issue 8 (see checkStep):
// no message is stored twice at a receiver, each origin's stored order is
// its origin-sequence order with holes only where a gap record was
// accepted, and no sender's position, in memory or persisted, exceeds the
// highest HWM its remote answered to it.
type mesh struct {
	cfg     Config
	now     time.Time
	names   []string
	regions map[string]*region
	links   map[[2]string]*link
	out     *strings.Builder // trace of the current command
	size    int              // bytes of a published message

	answered   map[senderKey]uint64 // per sender, the highest HWM its remote answered
	violations []string
}

type senderKey struct {
	stream Stream
	remote string
}

var (
	testTopic = tenancy.Name{Tenant: "acme", Namespace: "orders", Topic: "events"}
	t0        = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

type region struct {
	name    string
	incN    int
	origin  *originLog            // messages of local origin, current incarnation
	retired []*originLog          // earlier incarnations
	log     []Origin              // stored messages in arrival order, local ones included
	recv    map[Stream]*streamLog // per replicated stream: what was stored, for the checks
	senders map[string]*Sender    // by remote
	sstate  map[string][]byte     // persisted SenderState (JSON), by remote
	rcv     *Receiver
	rstate  []byte            // persisted ReceiverState (JSON)
	fail    map[string]int    // batches from that origin region to fail
	health  map[string]Health // last reported, by remote
	timeout map[string]uint64 // Stats.Timeouts last reported, by remote
}

// streamLog is what a receiver stored of one stream, for the checks.
type streamLog struct {
	stored  map[uint64]int // seq -> times stored
	covered uint64         // every seq <= covered was stored or gap-covered
	gaps    [][2]uint64    // accepted gap records (the part above covered)
	lost    uint64
}

// originLog is a region's messages of local origin in one incarnation:
// the Source of its senders. Sequences below first were trimmed.
type originLog struct {
	stream Stream
	msgs   []Msg // msgs[i] has seq i+1
	first  uint64
}

func (o *originLog) FirstSeq() uint64 { return max(o.first, 1) }
func (o *originLog) LastSeq() uint64  { return uint64(len(o.msgs)) }
func (o *originLog) Load(seq uint64) (Msg, error) {
	if seq < o.FirstSeq() {
		return Msg{}, fmt.Errorf("seq %d: %w", seq, ErrTrimmed)
	}
	if seq > o.LastSeq() {
		return Msg{}, fmt.Errorf("seq %d beyond the last", seq)
	}
	return o.msgs[seq-1], nil
}
func (o *originLog) Backlog(after uint64) (uint64, time.Time) {
	var bytes uint64
	var oldest time.Time
	for seq := max(after+1, o.FirstSeq()); seq <= o.LastSeq(); seq++ {
		m := &o.msgs[seq-1]
		if oldest.IsZero() {
			oldest = m.Origin.Time
		}
		bytes += uint64(m.Bytes())
	}
	return bytes, oldest
}

type link struct {
	cut bool
	q   []packet
}

// packet is a batch (from a sender to a receiver) or an answer (back).
type packet struct {
	batch  *Batch
	answer *Answer
	stream Stream // the answer's
}

func newMesh(cfg Config, names ...string) *mesh {
	m := &mesh{
		cfg: cfg, now: t0, names: slices.Clone(names), size: 100,
		regions: map[string]*region{}, links: map[[2]string]*link{},
		answered: map[senderKey]uint64{}, out: &strings.Builder{},
	}
	for _, n := range names {
		m.regions[n] = &region{name: n}
		for _, o := range names {
			if o != n {
				m.links[[2]string{n, o}] = &link{}
			}
		}
	}
	for _, n := range names {
		m.rebuild(n)
	}
	m.out.Reset()
	return m
}

func (m *mesh) printf(format string, args ...any) { fmt.Fprintf(m.out, format+"\n", args...) }

func (m *mesh) violate(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	m.violations = append(m.violations, v)
	m.printf("VIOLATION: %s", v)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// rebuild gives region n an empty data dir: no stored messages, fresh
// receiver and sender states, and a new topic incarnation.
func (m *mesh) rebuild(n string) {
	r := m.regions[n]
	r.log = nil
	r.recv = map[Stream]*streamLog{}
	r.rstate = nil
	r.fail = map[string]int{}
	r.rcv = nil
	m.dropLinks(n)
	m.newIncarnation(r)
	m.restore(r)
}

// newIncarnation re-creates region r's topic: a new incarnation whose
// origin sequences start at 1, and new sender positions.
func (m *mesh) newIncarnation(r *region) {
	if r.origin != nil {
		r.retired = append(r.retired, r.origin)
	}
	r.incN++
	r.origin = &originLog{stream: Stream{Topic: testTopic, Region: r.name, Incarnation: fmt.Sprintf("%s.%d", r.name, r.incN)}}
	r.sstate = map[string][]byte{}
	r.senders = map[string]*Sender{}
	for _, o := range m.names {
		if o != r.name {
			m.startSender(r, o)
		}
	}
}

// startSender (re)starts r's sender to remote from its persisted state.
func (m *mesh) startSender(r *region, remote string) {
	var st SenderState
	if b := r.sstate[remote]; b != nil {
		must(json.Unmarshal(b, &st))
	}
	s, err := NewSender(m.cfg, r.origin.stream, remote, st, r.origin, m.now)
	must(err)
	r.senders[remote] = s
	if r.health == nil {
		r.health, r.timeout = map[string]Health{}, map[string]uint64{}
	}
	r.health[remote] = s.Health(m.now)
	r.timeout[remote] = 0
}

// restore replaces region r's in-memory state by what was persisted.
func (m *mesh) restore(r *region) {
	var st ReceiverState
	if r.rstate != nil {
		must(json.Unmarshal(r.rstate, &st))
	}
	rcv, err := NewReceiver(st)
	must(err)
	r.rcv = rcv
	for _, o := range m.names {
		if o != r.name {
			m.startSender(r, o)
		}
	}
}

// crash loses region n's memory: connections drop, senders and the
// receiver restart from their persisted states.
func (m *mesh) crash(n string) {
	m.dropLinks(n)
	m.restore(m.regions[n])
}

// recreate deletes and re-creates region n's topic: a new incarnation.
func (m *mesh) recreate(n string) {
	m.newIncarnation(m.regions[n])
}

func (m *mesh) dropLinks(n string) {
	for k, l := range m.links {
		if k[0] == n || k[1] == n {
			l.q = nil
		}
	}
}

func (m *mesh) partition(a, b string, cut bool) {
	for _, k := range [][2]string{{a, b}, {b, a}} {
		l := m.links[k]
		l.cut = cut
		if cut {
			l.q = nil
		}
	}
}

func (m *mesh) publish(n string, count int) {
	r := m.regions[n]
	for range count {
		seq := r.origin.LastSeq() + 1
		o := Origin{Region: n, Incarnation: r.origin.stream.Incarnation, Seq: seq, Time: m.now}
		r.origin.msgs = append(r.origin.msgs, Msg{Origin: o, Subject: "acme.orders.events", Size: m.size})
		r.log = append(r.log, o)
	}
}

func (m *mesh) trim(n string, upto uint64) {
	o := m.regions[n].origin
	o.first = max(o.first, min(upto, o.LastSeq())+1)
}

// persistSenders is the drivers' periodic persist of sender positions.
func (m *mesh) persistSenders() {
	for _, n := range m.names {
		r := m.regions[n]
		for remote, s := range r.senders {
			b, err := json.Marshal(s.State())
			must(err)
			r.sstate[remote] = b
		}
	}
}

// pump lets every sender send what its window allows.
func (m *mesh) pump() {
	for _, n := range m.names {
		r := m.regions[n]
		for _, remote := range m.remotes(n) {
			batches, err := r.senders[remote].Send(m.now)
			if err != nil {
				m.printf("%s->%s: send error: %v", n, remote, err)
			}
			for i := range batches {
				b := &batches[i]
				l := m.links[[2]string{n, remote}]
				if l.cut {
					m.printf("%s->%s %s: lost (partitioned)", n, remote, b)
					continue
				}
				l.q = append(l.q, packet{batch: b})
			}
		}
	}
}

func (m *mesh) remotes(n string) []string {
	var out []string
	for _, o := range m.names {
		if o != n {
			out = append(out, o)
		}
	}
	return out
}

// deliver delivers the head packet of link from->to; false if none.
func (m *mesh) deliver(from, to string) bool {
	l := m.links[[2]string{from, to}]
	if len(l.q) == 0 {
		return false
	}
	p := l.q[0]
	l.q = l.q[1:]
	if p.batch != nil {
		m.receive(from, to, p.batch)
	} else {
		m.answer(from, to, p)
	}
	return true
}

// receive is the driver at region to handling a batch from region from.
func (m *mesh) receive(from, to string, b *Batch) {
	r := m.regions[to]
	res, err := r.rcv.Receive(b)
	if err != nil {
		m.violate("%s->%s %s: receive: %v", from, to, b, err)
	}
	a := res.Answer
	if r.fail[from] > 0 && err == nil {
		// The store fails: answer Failed and restore the receiver from
		// its last persisted state (Receive already moved the HWM).
		r.fail[from]--
		var st ReceiverState
		if r.rstate != nil {
			must(json.Unmarshal(r.rstate, &st))
		}
		rcv, err := NewReceiver(st)
		must(err)
		r.rcv = rcv
		a = Answer{Batch: b.ID, Kind: Failed}
		m.printf("%s->%s %s: store failed", from, to, b)
	} else {
		m.store(r, b, res)
		line := fmt.Sprintf("%s->%s %s: %s hwm=%d", from, to, b, a.Kind, a.HWM)
		if res.Lost > 0 {
			line += fmt.Sprintf(" lost=%d", res.Lost)
		}
		m.printf("%s", line)
	}
	back := m.links[[2]string{to, from}]
	if back.cut {
		return
	}
	back.q = append(back.q, packet{answer: &a, stream: b.Stream})
}

// store appends what the receiver said to store and persists its state,
// checking order and uniqueness per stream.
func (m *mesh) store(r *region, b *Batch, res Result) {
	sl := r.recv[b.Stream]
	if sl == nil {
		sl = &streamLog{stored: map[uint64]int{}}
		r.recv[b.Stream] = sl
	}
	if b.Gap && res.Answer.Kind == Stored {
		if b.First > sl.covered+1 {
			m.violate("%s: gap record %s accepted above covered %d", r.name, b, sl.covered)
		}
		sl.gaps = append(sl.gaps, [2]uint64{sl.covered + 1, b.Last})
		sl.lost += b.Last - sl.covered
		if res.Lost != b.Last-sl.covered {
			m.violate("%s: gap record %s counted %d lost, want %d", r.name, b, res.Lost, b.Last-sl.covered)
		}
		sl.covered = b.Last
	}
	for _, msg := range res.Store {
		o := msg.Origin
		if sl.stored[o.Seq] > 0 {
			m.violate("%s: %s/%d stored twice", r.name, o.Incarnation, o.Seq)
		}
		if o.Seq != sl.covered+1 {
			m.violate("%s: %s/%d stored after %d (out of order, no gap record)", r.name, o.Incarnation, o.Seq, sl.covered)
		}
		sl.stored[o.Seq]++
		sl.covered = max(sl.covered, o.Seq)
		r.log = append(r.log, o)
	}
	bs, err := json.Marshal(r.rcv.State())
	must(err)
	r.rstate = bs
}

// answer is the driver at region to (the sender's) handling an answer
// that region from sent.
func (m *mesh) answer(from, to string, p packet) {
	r := m.regions[to]
	s := r.senders[from]
	if s.Stream() != p.stream {
		m.printf("%s<-%s %v: no sender of %s (dropped)", to, from, p.answer, p.stream.Incarnation)
		return
	}
	before, stale := s.Position(), s.Status(m.now).Stats.StaleAnswers
	if err := s.Answer(m.now, *p.answer); err != nil {
		m.violate("%s->%s answer %v: %v", from, to, p.answer, err)
	}
	if p.answer.Kind != Failed {
		k := senderKey{p.stream, from}
		m.answered[k] = max(m.answered[k], p.answer.HWM)
	}
	st := s.Status(m.now)
	line := fmt.Sprintf("%s<-%s %v: pos %d", to, from, p.answer, st.Position)
	switch {
	case st.Stats.StaleAnswers > stale:
		line = fmt.Sprintf("%s<-%s %v: stale (batch no longer in flight), ignored", to, from, p.answer)
	case st.Position == before:
		line = fmt.Sprintf("%s<-%s %v: pos stays %d, next %d", to, from, p.answer, before, st.Next)
	}
	if st.Health == BackingOff {
		line += fmt.Sprintf("; backing off until +%v", st.RetryAt.Sub(m.now))
	}
	m.printf("%s", line)
}

// tick passes d: senders tick (ack timeouts), positions are persisted,
// and senders send. Timeouts and health changes are reported.
func (m *mesh) tick(d time.Duration) {
	m.now = m.now.Add(d)
	for _, n := range m.names {
		r := m.regions[n]
		for _, remote := range m.remotes(n) {
			r.senders[remote].Tick(m.now)
		}
	}
	m.persistSenders()
	m.pump()
	m.reportHealth()
}

func (m *mesh) reportHealth() {
	for _, n := range m.names {
		r := m.regions[n]
		for _, remote := range m.remotes(n) {
			st := r.senders[remote].Status(m.now)
			if t := st.Stats.Timeouts; t > r.timeout[remote] {
				m.printf("%s->%s: %d batch(es) timed out", n, remote, t-r.timeout[remote])
				r.timeout[remote] = t
			}
			if st.Health != r.health[remote] {
				m.printf("%s->%s: %s -> %s", n, remote, r.health[remote], st.Health)
				r.health[remote] = st.Health
			}
		}
	}
}

// quiet reports whether no packet is queued.
func (m *mesh) quiet() bool {
	for _, l := range m.links {
		if len(l.q) > 0 {
			return false
		}
	}
	return true
}

// stabilize sends and delivers (one packet per link per round, links in
// order) until nothing is queued. Time does not pass.
func (m *mesh) stabilize() error {
	for range 100000 {
		m.pump()
		if m.quiet() {
			m.reportHealth()
			return nil
		}
		for _, from := range m.names {
			for _, to := range m.remotes(from) {
				m.deliver(from, to)
			}
		}
	}
	return errors.New("stabilize: no quiescence after 100000 rounds")
}

// checkStep checks the invariants that hold after every step; it
// records violations.
func (m *mesh) checkStep() {
	for _, n := range m.names {
		r := m.regions[n]
		for remote, s := range r.senders {
			if err := s.checkWindow(); err != nil {
				m.violate("%s->%s: %v", n, remote, err)
			}
			k := senderKey{s.Stream(), remote}
			if p := s.Position(); p > m.answered[k] {
				m.violate("%s->%s: position %d above the remote's highest answer %d", n, remote, p, m.answered[k])
			}
			var st SenderState
			if b := r.sstate[remote]; b != nil {
				must(json.Unmarshal(b, &st))
			}
			if st.Incarnation == k.stream.Incarnation && st.Position > m.answered[k] {
				m.violate("%s->%s: persisted position %d above the remote's highest answer %d", n, remote, st.Position, m.answered[k])
			}
		}
	}
}

// checkFinal checks a quiescent mesh: every region holds, of every
// current incarnation of every other region, each message once except
// those covered by gap records (counted as lost), and every sender's
// position equals the origin's last sequence (lag 0) and the remote's HWM.
func (m *mesh) checkFinal() []string {
	var bad []string
	for _, n := range m.names {
		r := m.regions[n]
		for _, o := range m.remotes(n) {
			src := m.regions[o].origin
			st := src.stream
			sl := r.recv[st]
			if sl == nil {
				sl = &streamLog{stored: map[uint64]int{}}
			}
			last := src.LastSeq()
			if sl.covered != last {
				bad = append(bad, fmt.Sprintf("%s holds %s up to %d, origin's last is %d", n, st.Incarnation, sl.covered, last))
			}
			for seq := uint64(1); seq <= last; seq++ {
				inGap := slices.ContainsFunc(sl.gaps, func(g [2]uint64) bool { return g[0] <= seq && seq <= g[1] })
				switch c := sl.stored[seq]; {
				case c > 1:
					bad = append(bad, fmt.Sprintf("%s holds %s/%d %d times", n, st.Incarnation, seq, c))
				case c == 0 && !inGap:
					bad = append(bad, fmt.Sprintf("%s lacks %s/%d", n, st.Incarnation, seq))
				case c == 1 && inGap:
					bad = append(bad, fmt.Sprintf("%s holds %s/%d inside a gap record", n, st.Incarnation, seq))
				case inGap && seq >= src.FirstSeq():
					bad = append(bad, fmt.Sprintf("%s lost %s/%d that the origin still holds", n, st.Incarnation, seq))
				}
			}
			if h := r.rcv.HWM(st); h != last {
				bad = append(bad, fmt.Sprintf("%s's HWM of %s is %d, origin's last is %d", n, st.Incarnation, h, last))
			}
			if l := r.rcv.Lost(st); l != sl.lost {
				bad = append(bad, fmt.Sprintf("%s counts %d lost of %s, gap records covered %d", n, l, st.Incarnation, sl.lost))
			}
			s := m.regions[o].senders[n]
			if stt := s.Status(m.now); stt.Lag.Msgs != 0 || stt.Position != last || stt.Health == Stalled {
				bad = append(bad, fmt.Sprintf("%s->%s: position %d, lag %+v, %s", o, n, stt.Position, stt.Lag, stt.Health))
			}
		}
	}
	return bad
}

// formatState prints each region: stored messages per stream, HWMs, and
// its senders.
func (m *mesh) formatState() string {
	var b strings.Builder
	for _, n := range m.names {
		r := m.regions[n]
		fmt.Fprintf(&b, "%s: topic %s\n", n, r.origin.stream.Incarnation)
		// Stored messages per stream, in arrival order, as ranges.
		var streams []string
		per := map[string][]uint64{}
		for _, o := range r.log {
			if _, ok := per[o.Incarnation]; !ok {
				streams = append(streams, o.Incarnation)
			}
			per[o.Incarnation] = append(per[o.Incarnation], o.Seq)
		}
		for st, sl := range r.recv {
			if _, ok := per[st.Incarnation]; !ok && len(sl.gaps) > 0 {
				streams = append(streams, st.Incarnation)
				per[st.Incarnation] = nil
			}
		}
		slices.Sort(streams)
		for _, inc := range streams {
			line := "  " + inc + ": " + ranges(per[inc])
			if inc == r.origin.stream.Incarnation && r.origin.FirstSeq() > 1 {
				line += fmt.Sprintf(" (trimmed up to %d)", r.origin.FirstSeq()-1)
			}
			for st, sl := range r.recv {
				if st.Incarnation == inc && len(sl.gaps) > 0 {
					var gs []string
					for _, g := range sl.gaps {
						gs = append(gs, seqRange(g[0], g[1]))
					}
					line += " gaps " + strings.Join(gs, ",")
				}
			}
			fmt.Fprintln(&b, line)
		}
		for _, ss := range r.rcv.State().Streams {
			fmt.Fprintf(&b, "  hwm %s=%d", ss.Incarnation, ss.HWM)
			if ss.Lost > 0 {
				fmt.Fprintf(&b, " lost=%d", ss.Lost)
			}
			fmt.Fprintln(&b)
		}
		for _, remote := range m.remotes(n) {
			st := r.senders[remote].Status(m.now)
			fmt.Fprintf(&b, "  ->%s pos=%d next=%d inflight=%d %s lag=%d msgs/%dB/%v\n",
				remote, st.Position, st.Next, st.InFlight, st.Health, st.Lag.Msgs, st.Lag.Bytes, st.Lag.Age)
		}
	}
	return b.String()
}

// ranges formats seqs (in order) as "1-3,5,9-10"; "none" when empty.
func ranges(seqs []uint64) string {
	if len(seqs) == 0 {
		return "none"
	}
	var parts []string
	start, prev := seqs[0], seqs[0]
	for _, s := range seqs[1:] {
		if s == prev+1 {
			prev = s
			continue
		}
		parts = append(parts, seqRange(start, prev))
		start, prev = s, s
	}
	parts = append(parts, seqRange(start, prev))
	return strings.Join(parts, ",")
}

// checkWindow checks the sender's window invariants: the in-flight
// batches cover [acked+1, next-1] in order, without holes or overlaps,
// and n counts them.
func (s *Sender) checkWindow() error {
	want, n := s.acked+1, uint64(0)
	for _, f := range s.inflight {
		if f.first > want || f.last < f.first || f.last < want {
			return fmt.Errorf("in-flight batch %d covers %d-%d, expected from %d", f.id, f.first, f.last, want)
		}
		want = f.last + 1
		n += f.weight()
	}
	if want != s.next || n != s.n || s.n > uint64(s.cfg.MaxInFlight) {
		return fmt.Errorf("window ends at %d with %d in flight; next %d, n %d", want-1, n, s.next, s.n)
	}
	return nil
}
