package consumer

import (
	"cmp"
	"container/heap"
	"slices"
	"time"
)

// Both heaps are lazy: an item whose pending entry was acked or changed
// state stays until it reaches the top (or a compaction) and is then
// dropped, so no operation needs to find an item in the middle.

// seqHeap is the redelivery queue: queued stream sequences, lowest first.
// An item is valid while its pending entry is queued with the same ver
// (queue bumps it), so a sequence queued again after a delivery taken
// from the middle of the queue (key_shared) is not served twice.
type seqHeap struct{ h seqs }

type seqItem struct {
	seq uint64
	ver uint32
}

type seqs []seqItem

func (s seqs) Len() int           { return len(s) }
func (s seqs) Less(i, j int) bool { return s[i].seq < s[j].seq }
func (s seqs) Swap(i, j int)      { s[i], s[j] = s[j], s[i] }
func (s *seqs) Push(x any)        { *s = append(*s, x.(seqItem)) }
func (s *seqs) Pop() any {
	old := *s
	x := old[len(old)-1]
	*s = old[:len(old)-1]
	return x
}

func (q *seqHeap) push(it seqItem) { heap.Push(&q.h, it) }
func (q *seqHeap) len() int        { return len(q.h) }
func (q *seqHeap) peek() seqItem   { return q.h[0] }
func (q *seqHeap) pop() seqItem    { return heap.Pop(&q.h).(seqItem) }

// timerItem is a deadline of a pending entry: valid while the entry
// exists with the same ver.
type timerItem struct {
	at  time.Time
	seq uint64
	ver uint32
}

type timerHeap struct{ h timerItems }

type timerItems []timerItem

func (t timerItems) Len() int { return len(t) }
func (t timerItems) Less(i, j int) bool {
	if !t[i].at.Equal(t[j].at) {
		return t[i].at.Before(t[j].at)
	}
	return t[i].seq < t[j].seq
}
func (t timerItems) Swap(i, j int) { t[i], t[j] = t[j], t[i] }
func (t *timerItems) Push(x any)   { *t = append(*t, x.(timerItem)) }
func (t *timerItems) Pop() any {
	old := *t
	x := old[len(old)-1]
	*t = old[:len(old)-1]
	return x
}

func (q *timerHeap) push(it timerItem) { heap.Push(&q.h, it) }
func (q *timerHeap) len() int          { return len(q.h) }
func (q *timerHeap) peek() timerItem   { return q.h[0] }
func (q *timerHeap) pop() timerItem    { return heap.Pop(&q.h).(timerItem) }

// compact drops the items keep rejects and restores the heap order.
func (q *timerHeap) compact(keep func(timerItem) bool) {
	out := q.h[:0]
	for _, it := range q.h {
		if keep(it) {
			out = append(out, it)
		}
	}
	clear(q.h[len(out):])
	q.h = out
	heap.Init(&q.h)
}

func (q *seqHeap) compact(keep func(seqItem) bool) {
	out := q.h[:0]
	for _, it := range q.h {
		if keep(it) {
			out = append(out, it)
		}
	}
	clear(q.h[len(out):])
	q.h = out
	heap.Init(&q.h)
}

// sorted returns the items keep accepts, lowest sequence first (a copy:
// the heap is unchanged).
func (q *seqHeap) sorted(keep func(seqItem) bool) []seqItem {
	out := make([]seqItem, 0, len(q.h))
	for _, it := range q.h {
		if keep(it) {
			out = append(out, it)
		}
	}
	slices.SortFunc(out, func(a, b seqItem) int { return cmp.Compare(a.seq, b.seq) })
	return out
}
