package replicator

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The universe of the properties: three origin streams (two incarnations
// of A), sequences 1..subTop, and a few epochs so that equal ones are
// common.
const subTop = 40

var (
	subStreams = []OriginStream{{"A", "1"}, {"A", "2"}, {"B", "1"}}
	subEpochs  = []Epoch{{}, {Wall: 1, Region: "A"}, {Wall: 1, Region: "B"}, {Wall: 1, Logical: 1, Region: "A"}, {Wall: 2, Region: "A"}}
)

// genSubSet draws a set: an epoch from subEpochs, deleted or not, and
// random acked ranges.
func genSubSet(t *rapid.T, label string) *SubSet {
	s := NewSubSet()
	s.epoch = subEpochs[rapid.IntRange(0, len(subEpochs)-1).Draw(t, label+".epoch")]
	if !s.epoch.IsZero() && rapid.IntRange(0, 4).Draw(t, label+".deleted") == 0 {
		s.deleted = true
		return s
	}
	for range rapid.IntRange(0, 6).Draw(t, label+".acks") {
		k := rapid.SampledFrom(subStreams).Draw(t, label+".stream")
		lo := rapid.Uint64Range(1, subTop).Draw(t, label+".lo")
		hi := rapid.Uint64Range(lo, min(lo+rapid.Uint64Range(0, 12).Draw(t, label+".w"), subTop)).Draw(t, label+".hi")
		if _, err := s.AckRange(k, lo, hi); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// naiveSub is the obvious version of a SubSet's value.
type naiveSub struct {
	epoch   Epoch
	deleted bool
	acked   map[OriginStream]map[uint64]bool
}

func toNaive(s *SubSet) naiveSub {
	n := naiveSub{epoch: s.epoch, deleted: s.deleted, acked: map[OriginStream]map[uint64]bool{}}
	for _, k := range subStreams {
		for seq := uint64(1); seq <= subTop; seq++ {
			if s.Contains(Origin{Region: k.Region, Incarnation: k.Incarnation, Seq: seq}) {
				if n.acked[k] == nil {
					n.acked[k] = map[uint64]bool{}
				}
				n.acked[k][seq] = true
			}
		}
	}
	return n
}

// join is the merge rule stated plainly.
func (a naiveSub) join(b naiveSub) naiveSub {
	switch c := a.epoch.Compare(b.epoch); {
	case c > 0:
		return a
	case c < 0:
		return b
	case a.deleted || b.deleted:
		return naiveSub{epoch: a.epoch, deleted: true, acked: map[OriginStream]map[uint64]bool{}}
	}
	out := naiveSub{epoch: a.epoch, acked: map[OriginStream]map[uint64]bool{}}
	for _, side := range []naiveSub{a, b} {
		for k, seqs := range side.acked {
			if out.acked[k] == nil {
				out.acked[k] = map[uint64]bool{}
			}
			maps.Copy(out.acked[k], seqs)
		}
	}
	return out
}

func (a naiveSub) equal(b naiveSub) bool {
	return a.epoch == b.epoch && a.deleted == b.deleted &&
		maps.EqualFunc(a.acked, b.acked, func(x, y map[uint64]bool) bool { return maps.Equal(x, y) })
}

func merged(a, b *SubSet) *SubSet {
	c := a.Clone()
	c.Merge(b)
	return c
}

// TestPropertySubSetMerge: Merge is commutative, associative and
// idempotent, agrees with the plain rule (naiveSub.join), and its
// MergeResult says exactly what changed: Outcome, the streams that grew,
// the count of newly acked sequences, and one Version bump iff the value
// changed.
func TestPropertySubSetMerge(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b, c := genSubSet(t, "a"), genSubSet(t, "b"), genSubSet(t, "c")
		ab := merged(a, b)
		if ba := merged(b, a); !ab.Equal(ba) {
			t.Fatalf("not commutative: a∪b = %s, b∪a = %s", ab, ba)
		}
		if l, r := merged(ab, c), merged(a, merged(b, c)); !l.Equal(r) {
			t.Fatalf("not associative: (a∪b)∪c = %s, a∪(b∪c) = %s", l, r)
		}
		if aa := merged(a, a); !aa.Equal(a) {
			t.Fatalf("not idempotent: a∪a = %s, a = %s", aa, a)
		}
		if got, want := toNaive(ab), toNaive(a).join(toNaive(b)); !got.equal(want) {
			t.Fatalf("a∪b = %s disagrees with the plain rule", ab)
		}
		if !merged(ab, a).Equal(ab) || !merged(ab, b).Equal(ab) {
			t.Fatalf("a∪b = %s is not an upper bound", ab)
		}

		s := a.Clone()
		before := toNaive(s)
		v := s.Version()
		res := s.Merge(b)
		after := toNaive(s)
		changed := !before.equal(after)
		if res.Changed() != changed || (s.Version() == v+1) != changed || (s.Version() == v) == changed {
			t.Fatalf("Changed()=%v, version %d -> %d, value changed %v", res.Changed(), v, s.Version(), changed)
		}
		var want MergeOutcome
		switch c := b.epoch.Compare(a.epoch); {
		case c < 0, c == 0 && a.deleted:
			want = MergeIgnored
		case c > 0, b.deleted:
			want = MergeReplaced
		default:
			want = MergeUnion
		}
		if res.Outcome != want {
			t.Fatalf("outcome %s, want %s", res.Outcome, want)
		}
		if want == MergeUnion {
			newly := 0
			var grew []OriginStream
			for _, k := range subStreams {
				n := len(after.acked[k]) - len(before.acked[k])
				newly += n
				if n > 0 {
					grew = append(grew, k)
				}
			}
			if res.Newly != newly || fmt.Sprint(res.Streams) != fmt.Sprint(grew) {
				t.Fatalf("union: Newly %d Streams %v, want %d %v", res.Newly, res.Streams, newly, grew)
			}
		}
		if want == MergeReplaced && fmt.Sprint(res.Streams) != fmt.Sprint(b.Streams()) {
			t.Fatalf("replaced: Streams %v, want %v", res.Streams, b.Streams())
		}
		// The merged set shares nothing with b.
		for _, k := range b.Streams() {
			b.sets[k].acked.AckUpTo(subTop)
		}
		if !toNaive(s).equal(after) {
			t.Fatalf("changing b after the merge changed the result")
		}
	})
}

// subNode is a region of TestPropertySubSetConvergence.
type subNode struct {
	sub  *SubSet
	skew time.Duration
}

// subAck is an ack made in the property, with the epoch it was made in.
type subAck struct {
	epoch  Epoch
	stream OriginStream
	lo, hi uint64
}

// TestPropertySubSetConvergence runs random schedules over three regions
// whose clocks disagree: acks, resets, deletes, shipments (Delta since
// what the remote acknowledged, through the binary encoding, sometimes
// lost), crashes (restore from the encoding, ship everything again) and
// time passing. Each shipment has the same effect as merging the whole
// set. At the end, after syncs until nothing changes, every region holds
// the same set: the highest epoch made, deleted if a Delete made it, and
// exactly the acks made in that epoch.
func TestPropertySubSetConvergence(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		names := []string{"A", "B", "C"}
		nodes := map[string]*subNode{}
		for _, n := range names {
			nodes[n] = &subNode{sub: NewSubSet(), skew: time.Duration(rapid.IntRange(-3, 3).Draw(t, "skew")) * time.Second}
		}
		now := t0
		shipped := map[[2]string]uint64{}
		var acks []subAck
		top, topDeleted := Epoch{}, false
		region := rapid.SampledFrom(names)

		sync := func(t *rapid.T, a, b string, lost bool) bool {
			key := [2]string{a, b}
			since := shipped[key]
			if nodes[a].sub.Version() <= since {
				return false
			}
			wire, _ := nodes[a].sub.Delta(since).MarshalBinary()
			if lost {
				return false
			}
			d, err := DecodeSubSet(wire)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			dst := nodes[b].sub
			full := merged(dst, nodes[a].sub)
			before := dst.Version()
			res := dst.Merge(d)
			if !dst.Equal(full) {
				t.Fatalf("%s->%s: the delta since %d gave %s, the whole set %s", a, b, since, dst, full)
			}
			shipped[key] = nodes[a].sub.Version()
			if back := [2]string{b, a}; shipped[back] == before {
				shipped[back] = dst.Version()
			}
			return res.Changed()
		}
		t.Repeat(map[string]func(*rapid.T){
			"ack": func(t *rapid.T) {
				n := nodes[region.Draw(t, "region")]
				k := rapid.SampledFrom(subStreams).Draw(t, "stream")
				lo := rapid.Uint64Range(1, subTop).Draw(t, "lo")
				hi := rapid.Uint64Range(lo, min(lo+5, subTop)).Draw(t, "hi")
				if _, err := n.sub.AckRange(k, lo, hi); err == nil {
					acks = append(acks, subAck{n.sub.epoch, k, lo, hi})
				} else if !n.sub.Deleted() {
					t.Fatal(err)
				}
			},
			"reset": func(t *rapid.T) {
				name := region.Draw(t, "region")
				n := nodes[name]
				op, del := n.sub.Reset, rapid.IntRange(0, 3).Draw(t, "delete") == 0
				if del {
					op = n.sub.Delete
				}
				old := n.sub.epoch
				e, err := op(now.Add(n.skew), name)
				if err != nil || e.Compare(old) <= 0 {
					t.Fatalf("reset from %s gave %s, %v", old, e, err)
				}
				if e.Compare(top) > 0 {
					top, topDeleted = e, del
				}
			},
			"sync": func(t *rapid.T) {
				a := region.Draw(t, "from")
				b := region.Draw(t, "to")
				if a != b {
					sync(t, a, b, rapid.IntRange(0, 4).Draw(t, "lost") == 0)
				}
			},
			"crash": func(t *rapid.T) {
				name := region.Draw(t, "region")
				wire, _ := nodes[name].sub.MarshalBinary()
				s, err := DecodeSubSet(wire)
				if err != nil || !s.Equal(nodes[name].sub) {
					t.Fatalf("restore %s: %v, %v", nodes[name].sub, s, err)
				}
				nodes[name].sub = s
				for _, o := range names {
					delete(shipped, [2]string{name, o})
				}
			},
			"tick": func(t *rapid.T) {
				now = now.Add(time.Duration(rapid.IntRange(0, 2000).Draw(t, "ms")) * time.Millisecond)
			},
			"": func(t *rapid.T) {},
		})

		for round := 0; ; round++ {
			if round > len(names)+1 {
				t.Fatalf("no quiescence after %d rounds", round)
			}
			changed := false
			for _, a := range names {
				for _, b := range names {
					if a != b {
						changed = sync(t, a, b, false) || changed
					}
				}
			}
			if !changed {
				break
			}
		}
		want := NewSubSet()
		want.epoch, want.deleted = top, topDeleted
		for _, a := range acks {
			if a.epoch == top {
				if _, err := want.AckRange(a.stream, a.lo, a.hi); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, n := range names {
			if got := nodes[n].sub; !got.Equal(want) {
				t.Fatalf("%s holds %s, want %s", n, got, want)
			}
		}
	})
}
