package ackset

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// model is the obvious version: every sequence in [1, base] is acked (the
// initial mark-delete) and acked records the universe (base, top] above it.
// Operations never touch sequences above top.
type model struct {
	base, top uint64
	acked     map[uint64]bool
}

func (m *model) contains(seq uint64) bool { return seq >= 1 && (seq <= m.base || m.acked[seq]) }

func (m *model) ack(seq uint64) int {
	if m.contains(seq) || seq == 0 {
		return 0
	}
	m.acked[seq] = true
	return 1
}

func (m *model) ackRange(first, last uint64) int {
	n := 0
	for off := uint64(1); off <= m.top-m.base; off++ {
		if seq := m.base + off; seq >= first && seq <= last {
			n += m.ack(seq)
		}
	}
	return n
}

func (m *model) markDelete() uint64 {
	md := m.base
	for md < m.top && m.acked[md+1] {
		md++
	}
	return md
}

func (m *model) ranges() [][2]uint64 {
	var out [][2]uint64
	md := m.markDelete()
	for off := uint64(1); off <= m.top-md; off++ {
		seq := md + off
		if !m.acked[seq] {
			continue
		}
		if k := len(out); k > 0 && out[k-1][1] == seq-1 {
			out[k-1][1] = seq
		} else {
			out = append(out, [2]uint64{seq, seq})
		}
	}
	return out
}

func (m *model) count(first, last uint64) int {
	first = max(first, 1)
	if first > last {
		return 0
	}
	var c uint64
	if first <= m.base {
		c = min(last, m.base) - first + 1
	}
	for seq := range m.acked {
		if seq >= first && seq <= last {
			c++
		}
	}
	return sat(c)
}

func (m *model) nextUnacked(after uint64) uint64 {
	if after == math.MaxUint64 {
		return 0
	}
	start := max(after+1, m.base+1)
	if start > m.top {
		return start // nothing above top is ever acked
	}
	for off := uint64(0); off <= m.top-start; off++ {
		if !m.acked[start+off] {
			return start + off
		}
	}
	if m.top == math.MaxUint64 {
		return 0
	}
	return m.top + 1
}

func TestAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.Uint64Range(1, 64).Draw(t, "universe")
		base := rapid.SampledFrom([]uint64{0, 1000, math.MaxUint64 - size}).Draw(t, "base")
		m := &model{base: base, top: base + size, acked: map[uint64]bool{}}
		lo := base - min(base, 3) // a few sequences at or below the floor
		seq := rapid.Uint64Range(lo, m.top)
		anySeq := rapid.OneOf(seq, rapid.Just(uint64(0)), rapid.Just(uint64(math.MaxUint64)))

		s := New(base)
		if base == 0 && rapid.Bool().Draw(t, "zero value") {
			s = &Set{}
		}
		t.Repeat(map[string]func(*rapid.T){
			"Ack": func(t *rapid.T) {
				q := seq.Draw(t, "seq")
				want := m.ack(q) == 1
				if got := s.Ack(q); got != want {
					t.Fatalf("Ack(%d) = %v, want %v", q, got, want)
				}
			},
			"AckRange": func(t *rapid.T) {
				a, b := seq.Draw(t, "first"), seq.Draw(t, "last")
				if rapid.IntRange(0, 3).Draw(t, "short") > 0 && a <= b {
					b = min(b, a+rapid.Uint64Range(0, 3).Draw(t, "width"))
				}
				want := m.ackRange(a, b)
				if got := s.AckRange(a, b); got != want {
					t.Fatalf("AckRange(%d, %d) = %d, want %d", a, b, got, want)
				}
			},
			"AckUpTo": func(t *rapid.T) {
				q := seq.Draw(t, "seq")
				want := m.ackRange(0, q)
				if got := s.AckUpTo(q); got != want {
					t.Fatalf("AckUpTo(%d) = %d, want %d", q, got, want)
				}
			},
			"Clone": func(t *rapid.T) {
				c := s.Clone()
				s.AckUpTo(m.top) // must not affect c
				s = c
			},
			"RoundTrip": func(t *rapid.T) {
				b, err := s.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				var u Set
				if err := u.UnmarshalBinary(b); err != nil {
					t.Fatalf("UnmarshalBinary(MarshalBinary(%v)): %v", s, err)
				}
				if !reflect.DeepEqual(u.Ranges(), s.Ranges()) || u.md != s.md || u.n != s.n {
					t.Fatalf("binary round trip: %v became %v", s, &u)
				}
				j, err := json.Marshal(s)
				if err != nil {
					t.Fatal(err)
				}
				var v Set
				if err := json.Unmarshal(j, &v); err != nil {
					t.Fatalf("UnmarshalJSON(%s): %v", j, err)
				}
				if !reflect.DeepEqual(v.Ranges(), s.Ranges()) || v.md != s.md || v.n != s.n {
					t.Fatalf("JSON round trip: %v became %v", s, &v)
				}
				s = &u // carry on with the decoded copy
			},
			"Count": func(t *rapid.T) {
				a, b := anySeq.Draw(t, "first"), anySeq.Draw(t, "last")
				if got, want := s.Count(a, b), m.count(a, b); got != want {
					t.Fatalf("%v: Count(%d, %d) = %d, want %d", s, a, b, got, want)
				}
			},
			"": func(t *rapid.T) { // checked after every action
				checkInvariants(t, s)
				if got, want := s.MarkDelete(), m.markDelete(); got != want {
					t.Fatalf("%v: MarkDelete = %d, want %d", s, got, want)
				}
				if got, want := s.Ranges(), m.ranges(); !reflect.DeepEqual(got, want) {
					t.Fatalf("%v: Ranges = %v, want %v", s, got, want)
				}
				if s.Len() != len(m.ranges()) {
					t.Fatalf("%v: Len = %d", s, s.Len())
				}
				edges := []uint64{0, 1, m.top, math.MaxUint64 - 1, math.MaxUint64}
				for off := uint64(0); off <= m.top-lo; off++ {
					edges = append(edges, lo+off)
				}
				for _, q := range edges {
					if got, want := s.Contains(q), m.contains(q); got != want {
						t.Fatalf("%v: Contains(%d) = %v, want %v", s, q, got, want)
					}
					if got, want := s.NextUnacked(q), m.nextUnacked(q); got != want {
						t.Fatalf("%v: NextUnacked(%d) = %d, want %d", s, q, got, want)
					}
				}
				md := s.MarkDelete()
				if md < math.MaxUint64 {
					// The num_ack_pending window, and one arbitrary window.
					if got, want := s.Count(md+1, m.top), m.count(md+1, m.top); got != want {
						t.Fatalf("%v: Count(%d, %d) = %d, want %d", s, md+1, m.top, got, want)
					}
				}
				a, b := seq.Draw(t, "count first"), seq.Draw(t, "count last")
				if got, want := s.Count(a, b), m.count(a, b); got != want {
					t.Fatalf("%v: Count(%d, %d) = %d, want %d", s, a, b, got, want)
				}
			},
		})
	})
}
