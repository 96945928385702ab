package replicator

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestSubsInteraction runs the scripts in testdata/subs/ against subMesh,
// a model of regions that each hold a topic (a log of messages with their
// origins) and one replicated subscription (a SubSet plus the local
// consumer's acked flags), with the driver's duties played as the file
// comment of subs.go says. Rewrite the expected output with -rewrite.
// Commands:
//
//	region R [skew=D]      add region R (its clock is the mesh's plus D)
//	publish R N            R's clients publish N messages (origin R)
//	replicate A B [n=N]    B stores the next N (default: all) messages
//	                       originated in A that it lacks, in A's order;
//	                       those in B's set are acked on arrival
//	ack R 1-3,5            R's consumer acks local positions (1-based)
//	sync A B               A ships Delta(what B last got) to B; B merges
//	                       (and ships nothing back if A already had all)
//	sync-all               sync every pair, both ways, until nothing changes
//	deliver R [n=N]        what R's consumer gets: unacked messages in R's order
//	tick d=D               the mesh's clock moves on by D
//	reset R / delete R     an operator resets / deletes the subscription at R
//	crash R                R restarts: its set from the persisted bytes
//	state                  every region's set and Version
//	json R                 R's set as admin JSON
//	check                  every region holds the same set
//
// After every command each region's consumer must have acked exactly the
// messages its set contains (the driver keeps them equal), and the
// persisted bytes must decode to the set in memory.
func TestSubsInteraction(t *testing.T) {
	paths, err := filepath.Glob("testdata/subs/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts in testdata/subs/: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			m := newSubMesh()
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				m.out.Reset()
				m.run(t, d)
				for _, v := range m.check() {
					t.Errorf("%s: %s", d.Pos, v)
					m.printf("VIOLATION: %s", v)
				}
				return m.out.String()
			})
		})
	}
}

// subMesh is the model behind TestSubsInteraction.
type subMesh struct {
	now     time.Time
	names   []string
	regions map[string]*subRegion
	shipped map[[2]string]uint64 // (from, to) -> from's Version that to merged
	out     *strings.Builder
}

type subRegion struct {
	name      string
	skew      time.Duration
	stream    OriginStream // its own origin stream
	published uint64       // origin sequences used
	log       []subMsg     // stored messages in local order
	hwm       map[OriginStream]uint64
	sub       *SubSet
	persisted []byte
}

// subMsg is a stored message and the local consumer's ack of it.
type subMsg struct {
	origin Origin
	acked  bool
}

func newSubMesh() *subMesh {
	return &subMesh{now: t0, regions: map[string]*subRegion{}, shipped: map[[2]string]uint64{}, out: &strings.Builder{}}
}

func (m *subMesh) printf(format string, args ...any) { fmt.Fprintf(m.out, format+"\n", args...) }

func (m *subMesh) run(t *testing.T, d *datadriven.TestData) {
	var pos []string
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 {
			pos = append(pos, a.Key)
		}
	}
	arity := func(n int) {
		if len(pos) != n {
			d.Fatalf(t, "%s wants %d arguments, got %v", d.Cmd, n, pos)
		}
	}
	reg := func(i int) *subRegion {
		r := m.regions[pos[i]]
		if r == nil {
			d.Fatalf(t, "no region %q", pos[i])
		}
		return r
	}
	n := -1
	intArg(t, d, "n", &n)
	switch d.Cmd {
	case "region":
		arity(1)
		r := &subRegion{name: pos[0], stream: OriginStream{Region: pos[0], Incarnation: "1"},
			hwm: map[OriginStream]uint64{}, sub: NewSubSet()}
		durArg(t, d, "skew", &r.skew)
		m.regions[r.name] = r
		m.names = append(m.names, r.name)
		m.persist(r)
	case "publish":
		arity(2)
		r := reg(0)
		k, err := strconv.Atoi(pos[1])
		if err != nil {
			d.Fatalf(t, "publish: %v", err)
		}
		for range k {
			r.published++
			m.store(r, Origin{Region: r.name, Incarnation: r.stream.Incarnation, Seq: r.published, Time: m.now})
		}
		m.printf("%s stored %s", r.name, label(r.stream, r.published-uint64(k)+1, r.published))
	case "replicate":
		arity(2)
		m.replicate(reg(0), reg(1), n)
	case "ack":
		arity(2)
		m.ack(t, d, reg(0), pos[1])
	case "sync":
		arity(2)
		m.sync(reg(0), reg(1))
	case "sync-all":
		arity(0)
		for round := 1; ; round++ {
			changed := false
			for _, a := range m.names {
				for _, b := range m.names {
					if a != b && m.regions[a].sub.Version() > m.shipped[[2]string{a, b}] {
						changed = m.sync(m.regions[a], m.regions[b]) || changed
					}
				}
			}
			if !changed {
				m.printf("quiet after %d rounds", round)
				break
			}
		}
	case "deliver":
		arity(1)
		m.deliver(reg(0), n)
	case "tick":
		var dur time.Duration
		durArg(t, d, "d", &dur)
		m.now = m.now.Add(dur)
	case "reset", "delete":
		arity(1)
		r := reg(0)
		op := r.sub.Reset
		if d.Cmd == "delete" {
			op = r.sub.Delete
		}
		e, err := op(m.now.Add(r.skew), r.name)
		if err != nil {
			d.Fatalf(t, "%s: %v", d.Cmd, err)
		}
		m.printf("%s: epoch %s", r.name, e)
		m.apply(r, MergeResult{Outcome: MergeReplaced})
		m.persist(r)
	case "crash":
		arity(1)
		r := reg(0)
		s, err := DecodeSubSet(r.persisted)
		if err != nil {
			d.Fatalf(t, "crash: %v", err)
		}
		r.sub = s
		for _, o := range m.names {
			delete(m.shipped, [2]string{r.name, o}) // ship everything again
		}
		m.printf("%s restored: %s (version %d)", r.name, s, s.Version())
	case "state":
		for _, name := range m.names {
			r := m.regions[name]
			m.printf("%s: %s (version %d, %d messages)", name, r.sub, r.sub.Version(), len(r.log))
		}
	case "json":
		arity(1)
		b, err := reg(0).sub.MarshalJSON()
		if err != nil {
			d.Fatalf(t, "json: %v", err)
		}
		m.printf("%s", b)
	case "check":
		var bad []string
		for _, name := range m.names[1:] {
			if a, b := m.regions[m.names[0]].sub, m.regions[name].sub; !a.Equal(b) {
				bad = append(bad, fmt.Sprintf("%s holds %s, %s holds %s", m.names[0], a, name, b))
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s: %s", d.Pos, strings.Join(bad, "; "))
			m.printf("%s", strings.Join(bad, "\n"))
		} else {
			m.printf("ok: %s", m.regions[m.names[0]].sub)
		}
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
}

// store appends a message to r's log, acked on arrival if r's set holds it.
func (m *subMesh) store(r *subRegion, o Origin) {
	r.log = append(r.log, subMsg{origin: o, acked: r.sub.Contains(o)})
	r.hwm[o.OriginStream()] = o.Seq
}

// replicate stores at b up to n (all if n < 0) messages originated in a.
func (m *subMesh) replicate(a, b *subRegion, n int) {
	first := b.hwm[a.stream] + 1
	last := a.published
	if n >= 0 {
		last = min(last, first+uint64(n)-1)
	}
	if first > last {
		m.printf("%s has all of %s", b.name, a.stream)
		return
	}
	var onArrival []uint64
	for _, msg := range a.log {
		if o := msg.origin; o.OriginStream() == a.stream && o.Seq >= first && o.Seq <= last {
			m.store(b, o)
			if b.log[len(b.log)-1].acked {
				onArrival = append(onArrival, o.Seq)
			}
		}
	}
	m.printf("%s stored %s", b.name, label(a.stream, first, last))
	if len(onArrival) > 0 {
		m.printf("%s acked on arrival: %s", b.name, seqList(a.stream, onArrival))
	}
}

// ack is the driver's mapping of a local consumer's acks: each run of
// consecutive local positions becomes, per origin stream, one AckRange.
func (m *subMesh) ack(t *testing.T, d *datadriven.TestData, r *subRegion, spec string) {
	var positions []int
	for _, part := range strings.Split(spec, ",") {
		lo, hi, found := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := a, error(nil)
		if found {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 1 || b > len(r.log) || a > b {
			d.Fatalf(t, "ack %s: bad positions %q (%d stored)", r.name, part, len(r.log))
		}
		for p := a; p <= b; p++ {
			positions = append(positions, p)
		}
	}
	slices.Sort(positions)
	positions = slices.Compact(positions)
	var acked []string
	for i := 0; i < len(positions); {
		j := i + 1
		for j < len(positions) && positions[j] == positions[j-1]+1 {
			j++
		}
		// Local positions positions[i..j-1] are one run: per origin stream,
		// the lowest and highest origin sequence in it.
		span := map[OriginStream][2]uint64{}
		var order []OriginStream
		for _, p := range positions[i:j] {
			o := r.log[p-1].origin
			k := o.OriginStream()
			s, ok := span[k]
			if !ok {
				order = append(order, k)
				s = [2]uint64{o.Seq, o.Seq}
			}
			span[k] = [2]uint64{min(s[0], o.Seq), max(s[1], o.Seq)}
		}
		for _, k := range order {
			s := span[k]
			n, err := r.sub.AckRange(k, s[0], s[1])
			if err != nil {
				m.printf("%s: %v", r.name, err)
				return
			}
			acked = append(acked, fmt.Sprintf("%s (+%d)", label(k, s[0], s[1]), n))
		}
		for _, p := range positions[i:j] {
			r.log[p-1].acked = true
		}
		i = j
	}
	m.printf("%s acked %s", r.name, strings.Join(acked, " "))
	m.persist(r)
}

// sync ships a's delta to b and applies it there; it reports whether b
// changed.
func (m *subMesh) sync(a, b *subRegion) bool {
	key := [2]string{a.name, b.name}
	since := m.shipped[key]
	if a.sub.Version() <= since {
		m.printf("%s->%s: nothing new", a.name, b.name)
		return false
	}
	delta := a.sub.Delta(since)
	wire, _ := delta.MarshalBinary()
	got, err := DecodeSubSet(wire)
	if err != nil {
		panic(err)
	}
	before := b.sub.Version()
	res := b.sub.Merge(got)
	m.shipped[key] = a.sub.Version()
	if back := [2]string{b.name, a.name}; m.shipped[back] == before {
		m.shipped[back] = b.sub.Version() // no echo: a holds all of it
	}
	m.persist(b)
	m.printf("%s->%s: %s (%d bytes): %s", a.name, b.name, got, len(wire), formatMerge(res))
	m.apply(b, res)
	return res.Changed()
}

func formatMerge(res MergeResult) string {
	s := res.Outcome.String()
	if res.Outcome == MergeUnion {
		s += fmt.Sprintf(" +%d", res.Newly)
	}
	if len(res.Streams) > 0 {
		var names []string
		for _, k := range res.Streams {
			names = append(names, k.String())
		}
		s += " " + strings.Join(names, " ")
	}
	return s
}

// apply is the driver's reaction to a change of r's set: a union acks the
// held messages of the streams that grew; a replacement recomputes every
// message's ack state (the subscription was reset or deleted).
func (m *subMesh) apply(r *subRegion, res MergeResult) {
	grew := map[OriginStream]bool{}
	for _, k := range res.Streams {
		grew[k] = true
	}
	newly, unacked := 0, 0
	for i := range r.log {
		msg := &r.log[i]
		switch {
		case res.Outcome == MergeReplaced:
			if c := r.sub.Contains(msg.origin); c != msg.acked {
				if c {
					newly++
				} else {
					unacked++
				}
				msg.acked = c
			}
		case res.Outcome == MergeUnion && grew[msg.origin.OriginStream()]:
			if !msg.acked && r.sub.Contains(msg.origin) {
				msg.acked = true
				newly++
			}
		}
	}
	if newly > 0 || unacked > 0 {
		m.printf("%s consumer: %d acked, %d un-acked", r.name, newly, unacked)
	}
}

// deliver prints r's unacked messages in r's order (at most n if n >= 0).
func (m *subMesh) deliver(r *subRegion, n int) {
	if r.sub.Deleted() {
		m.printf("%s: subscription deleted", r.name)
		return
	}
	var runs []string
	var cur OriginStream
	var first, last uint64
	count := 0
	flush := func() {
		if first != 0 {
			runs = append(runs, label(cur, first, last))
		}
	}
	for _, msg := range r.log {
		if msg.acked || (n >= 0 && count == n) {
			continue
		}
		count++
		o := msg.origin
		if o.OriginStream() == cur && o.Seq == last+1 {
			last = o.Seq
			continue
		}
		flush()
		cur, first, last = o.OriginStream(), o.Seq, o.Seq
	}
	flush()
	if count == 0 {
		m.printf("%s: nothing to deliver", r.name)
		return
	}
	m.printf("%s delivers %d: %s", r.name, count, strings.Join(runs, " "))
}

func (m *subMesh) persist(r *subRegion) {
	b, err := r.sub.MarshalBinary()
	if err != nil {
		panic(err)
	}
	r.persisted = b
}

// check returns the step invariants' violations.
func (m *subMesh) check() []string {
	var bad []string
	for _, name := range m.names {
		r := m.regions[name]
		if p, err := DecodeSubSet(r.persisted); err != nil || !p.Equal(r.sub) {
			bad = append(bad, fmt.Sprintf("%s: persisted %v (%v) is not %s", name, p, err, r.sub))
		}
		if r.sub.Deleted() {
			continue // the driver deleted the local consumer
		}
		var wrong []string
		for i, msg := range r.log {
			if msg.acked != r.sub.Contains(msg.origin) {
				wrong = append(wrong, fmt.Sprintf("%d (%s:%d acked=%v)", i+1, msg.origin.OriginStream(), msg.origin.Seq, msg.acked))
			}
		}
		if len(wrong) > 0 {
			bad = append(bad, fmt.Sprintf("%s: consumer and set disagree at %s", name, strings.Join(wrong, ", ")))
		}
	}
	return bad
}

// label formats a run of one stream's sequences: "A/1:4-6".
func label(k OriginStream, first, last uint64) string {
	return k.String() + ":" + seqRange(first, last)
}

// seqList formats sorted sequences as runs: "A/1:1-3,5".
func seqList(k OriginStream, seqs []uint64) string {
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	var parts []string
	for i := 0; i < len(seqs); {
		j := i + 1
		for j < len(seqs) && seqs[j] == seqs[j-1]+1 {
			j++
		}
		parts = append(parts, seqRange(seqs[i], seqs[j-1]))
		i = j
	}
	return k.String() + ":" + strings.Join(parts, ",")
}
