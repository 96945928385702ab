package ackset

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkAckInOrder acks 1, 2, 3, …: the mark-delete fast path.
func BenchmarkAckInOrder(b *testing.B) {
	s := New(0)
	b.ReportAllocs()
	for i := range b.N {
		s.Ack(uint64(i) + 1)
	}
}

// BenchmarkAckInOrderBehindHole acks in order above one permanent hole
// (seq 1 never acked), so every ack extends the last range.
func BenchmarkAckInOrderBehindHole(b *testing.B) {
	s := New(0)
	b.ReportAllocs()
	for i := range b.N {
		s.Ack(uint64(i) + 2)
	}
}

// BenchmarkAckRandomWindow keeps w sequences delivered and unacked and
// acks one of them at random, delivering the next sequence in its place:
// a shared subscription with max_ack_pending = w. It reports the average
// number of ranges.
func BenchmarkAckRandomWindow(b *testing.B) {
	for _, w := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("w=%d", w), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			s := New(0)
			pending := make([]uint64, w)
			next := uint64(1)
			for i := range pending {
				pending[i] = next
				next++
			}
			// Warm up to the steady state before timing.
			for range 20 * w {
				i := rng.IntN(w)
				s.Ack(pending[i])
				pending[i] = next
				next++
			}
			var ranges int
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				i := rng.IntN(w)
				s.Ack(pending[i])
				pending[i] = next
				next++
				ranges += s.Len()
			}
			b.ReportMetric(float64(ranges)/float64(b.N), "ranges")
		})
	}
}

// BenchmarkCountWindow is the num_ack_pending query over the whole window.
func BenchmarkCountWindow(b *testing.B) {
	s := setWithRanges(1000)
	md := s.MarkDelete()
	b.ResetTimer()
	for range b.N {
		s.Count(md+1, 1<<62)
	}
}

func BenchmarkContains(b *testing.B) {
	s := setWithRanges(1000)
	b.ResetTimer()
	for i := range b.N {
		s.Contains(uint64(i % 5000))
	}
}

func BenchmarkMarshalBinary1000Ranges(b *testing.B) {
	s := setWithRanges(1000)
	buf, _ := s.MarshalBinary()
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := s.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendBinary1000Ranges(b *testing.B) {
	s := setWithRanges(1000)
	buf, _ := s.MarshalBinary()
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		buf, _ = s.AppendBinary(buf[:0])
	}
}

func BenchmarkUnmarshalBinary1000Ranges(b *testing.B) {
	buf, _ := setWithRanges(1000).MarshalBinary()
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	b.ResetTimer()
	var s Set
	for range b.N {
		if err := s.UnmarshalBinary(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// setWithRanges returns a set with n ranges of 1–3 sequences separated by
// holes of 1–3, as a shared subscription's cursor might hold.
func setWithRanges(n int) *Set {
	s := New(1_000_000)
	seq := uint64(1_000_002)
	for i := range n {
		w := uint64(i%3) + 1
		s.AckRange(seq, seq+w-1)
		seq += w + uint64(i%3) + 1
	}
	if s.Len() != n {
		panic("setWithRanges")
	}
	return s
}
