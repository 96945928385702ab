package mledger

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// entryIndex maps sequences to ledger entries within ledgers: for each
// ledger it holds, the first sequence of each entry from entry 0 on (a
// prefix of the ledger's entries, complete once the last entry is
// learnt). The ML fills it as it appends (its own ledgers) and as it
// reads entries in order (ledgers written before: readFrom learns them
// on the way). It holds at most budget entries over all ledgers, dropping
// the least recently used ledgers' prefixes (they are learnt again when
// read); a ledger whose prefix alone reaches the budget stops growing.
// Safe for concurrent use (a leaf lock).
type entryIndex struct {
	mu     sync.Mutex
	budget int
	held   int // entries held, over all ledgers
	tick   uint64
	ls     map[int64]*ledgerEntries
}

type ledgerEntries struct {
	firsts []uint64 // firsts[e]: the first sequence of entry e
	end    uint64   // the sequence after the last known entry's messages
	used   uint64   // tick of the last use, for eviction
}

func newEntryIndex(budget int) *entryIndex {
	return &entryIndex{budget: max(budget, 1), ls: map[int64]*ledgerEntries{}}
}

// add records that entry e of ledger id holds n messages from sequence
// first. It extends the ledger's prefix when e is its next entry: entry 0
// starts one; a later entry must start at the prefix's end. It returns
// false if that contradicts what is known (the entry does not follow
// the one before it, or a known entry starts elsewhere); an entry past
// the prefix (whose prefix was dropped, or is not learnt yet) is
// ignored.
func (x *entryIndex) add(id, e int64, first uint64, n int) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	l := x.ls[id]
	if l == nil {
		if e != 0 {
			return true
		}
		l = &ledgerEntries{}
		x.ls[id] = l
	}
	x.tick++
	l.used = x.tick
	known := int64(len(l.firsts))
	switch {
	case e < known:
		return l.firsts[e] == first
	case e > known:
		return true
	case known > 0 && first != l.end:
		return false
	case len(l.firsts) >= x.budget:
		return true // too long to hold: stays a prefix
	}
	l.firsts = append(l.firsts, first)
	l.end = first + uint64(n)
	x.held++
	x.evict(id)
	return true
}

// evict drops least recently used prefixes, never keep's, while over
// budget.
func (x *entryIndex) evict(keep int64) {
	for x.held > x.budget {
		var victim int64
		var oldest *ledgerEntries
		for id, l := range x.ls {
			if id != keep && (oldest == nil || l.used < oldest.used) {
				victim, oldest = id, l
			}
		}
		if oldest == nil {
			return
		}
		x.held -= len(oldest.firsts)
		delete(x.ls, victim)
	}
}

// find returns the entry of ledger id holding seq and that entry's first
// sequence, if known.
func (x *entryIndex) find(id int64, seq uint64) (e int64, first uint64, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	l := x.ls[id]
	if l == nil || len(l.firsts) == 0 || seq < l.firsts[0] || seq >= l.end {
		return 0, 0, false
	}
	x.tick++
	l.used = x.tick
	i := sort.Search(len(l.firsts), func(i int) bool { return l.firsts[i] > seq }) - 1
	return int64(i), l.firsts[i], true
}

// known returns how many entries of ledger id are known (from entry 0)
// and the sequence that follows them; 0, 0 for an unknown ledger.
func (x *entryIndex) known(id int64) (entries int64, next uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if l := x.ls[id]; l != nil {
		return int64(len(l.firsts)), l.end
	}
	return 0, 0
}

// drop forgets ledger id (deleted).
func (x *entryIndex) drop(id int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if l := x.ls[id]; l != nil {
		x.held -= len(l.firsts)
		delete(x.ls, id)
	}
}

// ledgerRef is what reading a closed ledger needs to know of it.
type ledgerRef struct {
	id          int64
	first, last uint64 // its first and last sequences
	entries     int64  // its entry count (≥ 1)
	bytes       int64  // its message bytes
}

func refOf(l *ledgerState) ledgerRef {
	return ledgerRef{id: l.ID, first: l.FirstSeq, last: l.last(), entries: l.Entries, bytes: l.Bytes}
}

// chunk is how many entries to read at once for about maxBytes of
// payload (at least 1, at most maxEntries).
func (l ledgerRef) chunk(maxBytes, maxEntries int) int64 {
	avg := (l.bytes + l.entries*batchHeaderSize) / max(l.entries, 1)
	return min(max(int64(maxBytes)/max(avg, 1), 1), int64(maxEntries))
}

// fetchFunc reads entries lo..hi of a ledger and returns their payloads,
// in order (all of them).
type fetchFunc func(ctx context.Context, lo, hi int64) ([][]byte, error)

// readFrom returns the messages of closed ledger l from seq on, decoded
// with local (its topic's Local), as far as the entries of one read go
// (each fetch reads chunk entries): at least seq itself, then the rest of
// its entry and of the entries read with it. It starts at seq's entry when idx knows it, and otherwise
// reads forward from the last entry idx knows (entry 0 for a ledger it
// does not know), learning each entry on the way. It checks that every
// entry continues the one before it (entry 0 starting at l.first, the
// last ending at l.last). Errors: fetch's, or ErrCorrupt (wrapped).
func readFrom(ctx context.Context, idx *entryIndex, l ledgerRef, local Local, seq uint64, chunk int64, fetch fetchFunc) ([]Message, error) {
	if seq < l.first || seq > l.last || l.entries <= 0 {
		return nil, fmt.Errorf("%w: seq %d is not in ledger %d (%d..%d, %d entries)", ErrCorrupt, seq, l.id, l.first, l.last, l.entries)
	}
	e, want, ok := idx.find(l.id, seq)
	if !ok {
		if e, want = idx.known(l.id); e == 0 {
			want = l.first
		}
	}
	for e < l.entries {
		hi := min(e+max(chunk, 1)-1, l.entries-1)
		payloads, err := fetch(ctx, e, hi)
		if err != nil {
			return nil, err
		}
		if len(payloads) != int(hi-e+1) {
			return nil, fmt.Errorf("%w: ledger %d: read of entries %d..%d returned %d", ErrCorrupt, l.id, e, hi, len(payloads))
		}
		var out []Message
		for _, p := range payloads {
			msgs, err := DecodeBatch(p, local)
			if err != nil {
				return nil, fmt.Errorf("ledger %d entry %d: %w", l.id, e, err)
			}
			first, n := msgs[0].Seq, len(msgs)
			if first != want || !idx.add(l.id, e, first, n) {
				return nil, fmt.Errorf("%w: ledger %d entry %d holds seqs from %d, want %d", ErrCorrupt, l.id, e, first, want)
			}
			want = first + uint64(n)
			if e == l.entries-1 && want-1 != l.last {
				return nil, fmt.Errorf("%w: ledger %d ends at seq %d, its list entry at %d", ErrCorrupt, l.id, want-1, l.last)
			}
			if want > seq {
				i := int(max(seq, first) - first)
				if out == nil {
					out = make([]Message, 0, n-i)
				}
				out = append(out, msgs[i:]...)
			}
			e++
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	return nil, fmt.Errorf("%w: ledger %d ends before seq %d", ErrCorrupt, l.id, seq)
}
