package storage

import (
	"slices"
	"sync"
	"sync/atomic"
)

// cacheGen is one generation of the write cache: stored entries by ledger
// and entry id, and the journal position up to which every durable record
// is reflected in it (and in the ledger table).
type cacheGen struct {
	ledgers map[int64]*ledgerCache
	bytes   int64 // sum of stored-entry sizes
	count   int
	end     Pos
}

// ledgerCache holds one ledger's entries sorted by id. Adds almost always
// come in id order, so put is an append; a rewrite or an out-of-order add
// is a binary search (and, rarely, an insertion).
type ledgerCache struct {
	ids  []int64
	recs [][]byte
}

func (c *ledgerCache) find(entry int64) (int, bool) {
	n := len(c.ids)
	if n > 0 && c.ids[n-1] == entry {
		return n - 1, true
	}
	if n == 0 || entry > c.ids[n-1] {
		return n, false
	}
	return slices.BinarySearch(c.ids, entry)
}

func newGen(end Pos) *cacheGen {
	return &cacheGen{ledgers: map[int64]*ledgerCache{}, end: end}
}

func (g *cacheGen) get(ledger, entry int64) ([]byte, bool) {
	c := g.ledgers[ledger]
	if c == nil {
		return nil, false
	}
	if i, ok := c.find(entry); ok {
		return c.recs[i], true
	}
	return nil, false
}

func (g *cacheGen) put(ledger, entry int64, rec []byte) {
	c := g.ledgers[ledger]
	if c == nil {
		c = &ledgerCache{}
		g.ledgers[ledger] = c
	}
	i, ok := c.find(entry)
	switch {
	case ok:
		g.bytes -= int64(len(c.recs[i]))
		g.count--
		c.recs[i] = rec
	case i == len(c.ids):
		c.ids = append(c.ids, entry)
		c.recs = append(c.recs, rec)
	default:
		c.ids = slices.Insert(c.ids, i, entry)
		c.recs = slices.Insert(c.recs, i, rec)
	}
	g.bytes += int64(len(rec))
	g.count++
}

func (g *cacheGen) dropLedger(ledger int64) {
	if c := g.ledgers[ledger]; c != nil {
		for _, rec := range c.recs {
			g.bytes -= int64(len(rec))
		}
		g.count -= len(c.recs)
		delete(g.ledgers, ledger)
	}
}

// cachedEntry is one entry of a generation, for flushing.
type cachedEntry struct {
	ledger, entry int64
	rec           []byte
}

// sorted returns the generation's entries sorted by (ledger, entry).
func (g *cacheGen) sorted() []cachedEntry {
	ids := make([]int64, 0, len(g.ledgers))
	for l := range g.ledgers {
		ids = append(ids, l)
	}
	slices.Sort(ids)
	out := make([]cachedEntry, 0, g.count)
	for _, l := range ids {
		c := g.ledgers[l]
		for i, e := range c.ids {
			out = append(out, cachedEntry{l, e, c.recs[i]})
		}
	}
	return out
}

// writeCache holds acknowledged entries not yet in the location index:
// the active generation (receiving adds) and, during a flush, the
// generation being flushed. Both are readable. Lock order: the engine's
// mu before cache.mu.
type writeCache struct {
	mu       sync.RWMutex
	active   *cacheGen
	flushing *cacheGen // nil unless a flush is running
	// drops counts flushed generations dropped (under mu, with the drop):
	// a reader that saw the index before a drop and the cache after it
	// would miss entries the flush moved (readRun checks it).
	drops atomic.Uint64
}

// get looks an entry up, newest generation first. Callers hold mu (read).
func (c *writeCache) getLocked(ledger, entry int64) ([]byte, bool) {
	if rec, ok := c.active.get(ledger, entry); ok {
		return rec, true
	}
	if c.flushing != nil {
		return c.flushing.get(ledger, entry)
	}
	return nil, false
}

func (c *writeCache) get(ledger, entry int64) ([]byte, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.getLocked(ledger, entry)
}

// dropLedgerLocked removes a ledger's entries from both generations.
func (c *writeCache) dropLedgerLocked(ledger int64) {
	c.active.dropLedger(ledger)
	if c.flushing != nil {
		c.flushing.dropLedger(ledger)
	}
}

func (c *writeCache) activeBytes() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.active.bytes
}

// restoreLocked puts a generation whose flush failed back: its entries
// return to the active generation unless a newer copy is there.
func (c *writeCache) restoreLocked(g *cacheGen) {
	for l, lc := range g.ledgers {
		for i, e := range lc.ids {
			if _, ok := c.active.get(l, e); !ok {
				c.active.put(l, e, lc.recs[i])
			}
		}
	}
	c.flushing = nil
}
