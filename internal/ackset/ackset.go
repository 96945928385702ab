package ackset

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// span is a closed interval [first, last] of acknowledged sequences;
// first <= last always.
type span struct{ first, last uint64 }

func (x span) size() uint64 { return x.last - x.first + 1 }

// Set is a set of acknowledged stream sequences. The zero value is an empty
// set with mark-delete 0 (nothing acked). See the package documentation for
// semantics, complexity and concurrency rules.
type Set struct {
	// md is the mark-delete position: every sequence in [1, md] is acked,
	// and md+1 is not (when md < MaxUint64).
	md uint64
	// r holds the individually acknowledged ranges above md, sorted
	// ascending. Invariants:
	//   - r[0].first > md+1 (it does not touch md; otherwise md would have
	//     absorbed it), hence every first >= 2 and first-1 never underflows;
	//   - for consecutive ranges a, b: a.last+1 < b.first (disjoint and
	//     non-adjacent), hence a.last < MaxUint64 for all but the last range.
	// The slice may start part-way into its backing array: absorbing the
	// head range reslices (O(1)) and append reclaims the space on growth.
	r []span
	// n is the number of sequences covered by r (the sum of their sizes).
	// It cannot overflow: the ranges are disjoint subsets of [2, MaxUint64].
	n uint64
}

// New returns a set whose mark-delete position is markDelete: every
// sequence in [1, markDelete] is acked and nothing above it is.
func New(markDelete uint64) *Set { return &Set{md: markDelete} }

// MarkDelete returns the highest sequence m such that every sequence in
// [1, m] is acked (JetStream's ack_floor). It moves up by itself when the
// gap just above it fills.
func (s *Set) MarkDelete() uint64 { return s.md }

// Len returns the number of individually acknowledged ranges above the
// mark-delete position: the size of the persisted state (each costs 16
// bytes in memory and at most 20, typically 2-4, bytes encoded).
func (s *Set) Len() int { return len(s.r) }

// Ack acknowledges seq and reports whether it was newly acked. Sequence 0
// and anything at or below the mark-delete position are no-ops (false).
// Acking MarkDelete()+1 is O(1) amortized, even when it absorbs a range.
func (s *Set) Ack(seq uint64) bool {
	if seq <= s.md {
		return false
	}
	if seq == s.md+1 {
		s.md = seq
		s.absorbHead()
		return true
	}
	return s.insert(seq, seq) == 1
}

// AckRange acknowledges every sequence in [first, last] and returns how
// many were newly acked. An inverted range (first > last) is empty: it
// acks nothing and returns 0 rather than panicking, since ranges may be
// derived from client input. Counts beyond math.MaxInt saturate.
func (s *Set) AckRange(first, last uint64) int {
	if first > last || last <= s.md {
		return 0
	}
	if first <= s.md+1 { // s.md < last, so s.md+1 does not overflow
		return s.AckUpTo(last)
	}
	return sat(s.insert(first, last))
}

// AckUpTo acknowledges every sequence <= seq (a cumulative ack, JetStream's
// AckAll) and returns how many were newly acked (saturating at
// math.MaxInt). The ranges it swallows are removed in O(1) each.
func (s *Set) AckUpTo(seq uint64) int {
	if seq <= s.md {
		return 0
	}
	newly := seq - s.md // sequences in (md, seq]
	i := s.searchLast(seq + 1)
	if seq == math.MaxUint64 {
		i = len(s.r)
	}
	// r[:i] lie wholly in (md, seq]; r[i], if any, has last > seq.
	for _, x := range s.r[:i] {
		newly -= x.size()
		s.n -= x.size()
	}
	s.md = seq
	if i < len(s.r) && s.r[i].first <= seq+1 { // straddles or touches seq
		x := s.r[i]
		if x.first <= seq {
			newly -= seq - x.first + 1
		}
		s.md = x.last
		s.n -= x.size()
		i++
	}
	s.dropHead(i)
	return sat(newly)
}

// Contains reports whether seq is acked. Sequence 0 is never acked.
// O(log n) in the number of ranges.
func (s *Set) Contains(seq uint64) bool {
	if seq == 0 {
		return false
	}
	if seq <= s.md {
		return true
	}
	i := s.searchLast(seq)
	return i < len(s.r) && s.r[i].first <= seq
}

// Count returns the number of acked sequences in [first, last] (0 if
// first > last; sequence 0 is never counted), saturating at math.MaxInt.
// It costs O(log n + min(k, n-k)) where k ranges intersect [first, last]:
// a query covering all the ranges, such as [MarkDelete()+1, delivered]
// for num_ack_pending, is O(log n).
func (s *Set) Count(first, last uint64) int {
	if first == 0 {
		first = 1
	}
	if first > last {
		return 0
	}
	var c uint64
	if first <= s.md {
		c = min(last, s.md) - first + 1
		if last <= s.md {
			return sat(c)
		}
		first = s.md + 1
	}
	i := s.searchLast(first) // first range with last >= first
	j := s.searchFirstAbove(last)
	if i >= j {
		return sat(c)
	}
	var in uint64
	if j-i <= len(s.r)-(j-i) {
		for _, x := range s.r[i:j] {
			in += x.size()
		}
	} else {
		in = s.n
		for _, x := range s.r[:i] {
			in -= x.size()
		}
		for _, x := range s.r[j:] {
			in -= x.size()
		}
	}
	// Trim the parts of the boundary ranges outside [first, last].
	if x := s.r[i]; x.first < first {
		in -= first - x.first
	}
	if x := s.r[j-1]; x.last > last {
		in -= x.last - last
	}
	return sat(c + in)
}

// NextUnacked returns the smallest unacked sequence greater than after, or
// 0 if there is none (every sequence in (after, MaxUint64] is acked).
// O(log n).
func (s *Set) NextUnacked(after uint64) uint64 {
	if after == math.MaxUint64 {
		return 0
	}
	c := after + 1
	if c <= s.md {
		if s.md == math.MaxUint64 {
			return 0
		}
		return s.md + 1 // never acked: r[0].first > md+1
	}
	i := s.searchLast(c)
	if i < len(s.r) && s.r[i].first <= c {
		if s.r[i].last == math.MaxUint64 {
			return 0
		}
		return s.r[i].last + 1 // never acked: ranges are non-adjacent
	}
	return c
}

// Ranges returns a copy of the individually acknowledged ranges above the
// mark-delete position, as [first, last] pairs in ascending order, or nil
// if there are none. Each first is > MarkDelete()+1 and ranges neither
// overlap nor touch.
func (s *Set) Ranges() [][2]uint64 {
	if len(s.r) == 0 {
		return nil
	}
	out := make([][2]uint64, len(s.r))
	for i, x := range s.r {
		out[i] = [2]uint64{x.first, x.last}
	}
	return out
}

// Clone returns an independent copy of s.
func (s *Set) Clone() *Set {
	c := &Set{md: s.md, n: s.n}
	if len(s.r) > 0 {
		c.r = slices.Clone(s.r)
	}
	return c
}

// String formats s for logs and test failures, e.g. "5 [7-9 12]".
func (s *Set) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d [", s.md)
	for i, x := range s.r {
		if i > 0 {
			b.WriteByte(' ')
		}
		if x.first == x.last {
			fmt.Fprintf(&b, "%d", x.first)
		} else {
			fmt.Fprintf(&b, "%d-%d", x.first, x.last)
		}
	}
	b.WriteByte(']')
	return b.String()
}

// insert adds [first, last] with first >= md+2 (so first >= 2), merging it
// with every range it overlaps or touches, and returns how many sequences
// were new. Search is O(log n); the merged ranges are removed, so their
// cost is amortized against their creation; making room for a new range
// in the middle moves the ranges after it (a memmove).
func (s *Set) insert(first, last uint64) uint64 {
	i := s.searchLast(first - 1) // first range with last >= first-1
	if i == len(s.r) {           // beyond every range: the in-order case
		s.r = append(s.r, span{first, last})
		s.n += last - first + 1
		return last - first + 1
	}
	j := s.searchFirstAbove(last)
	if last < math.MaxUint64 && j < len(s.r) && s.r[j].first == last+1 {
		j++ // touches r[j] from the left
	}
	newly := last - first + 1
	m := span{first, last}
	for _, x := range s.r[i:j] {
		newly -= overlap(x, first, last)
		m.first = min(m.first, x.first)
		m.last = max(m.last, x.last)
	}
	s.n += newly
	if i == j {
		s.r = slices.Insert(s.r, i, m)
	} else {
		s.r[i] = m
		s.r = slices.Delete(s.r, i+1, j)
	}
	return newly
}

// absorbHead folds the first range into md if it now touches it.
func (s *Set) absorbHead() {
	if len(s.r) > 0 && s.r[0].first == s.md+1 {
		s.md = s.r[0].last
		s.n -= s.r[0].size()
		s.dropHead(1)
	}
}

// dropHead removes the first k ranges in O(1). An emptied slice is
// released so a set that once held many ranges does not pin their memory.
func (s *Set) dropHead(k int) {
	if k == len(s.r) {
		s.r = nil
		return
	}
	s.r = s.r[k:]
}

// searchLast returns the index of the first range with last >= seq, or
// len(s.r).
func (s *Set) searchLast(seq uint64) int {
	lo, hi := 0, len(s.r)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if s.r[h].last < seq {
			lo = h + 1
		} else {
			hi = h
		}
	}
	return lo
}

// searchFirstAbove returns the index of the first range with first > seq,
// or len(s.r).
func (s *Set) searchFirstAbove(seq uint64) int {
	lo, hi := 0, len(s.r)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if s.r[h].first <= seq {
			lo = h + 1
		} else {
			hi = h
		}
	}
	return lo
}

// overlap returns |x ∩ [first, last]|.
func overlap(x span, first, last uint64) uint64 {
	lo, hi := max(x.first, first), min(x.last, last)
	if lo > hi {
		return 0
	}
	return hi - lo + 1
}

// sat converts a count to int, saturating at math.MaxInt.
func sat(n uint64) int {
	if n > math.MaxInt {
		return math.MaxInt
	}
	return int(n)
}
