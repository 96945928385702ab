package storage

import (
	"slices"
	"sync"
)

// cacheGen is one generation of the write cache: stored entries by ledger
// and entry id, and the journal position up to which every durable record
// is reflected in it (and in the ledger table).
type cacheGen struct {
	ledgers map[int64]map[int64][]byte
	bytes   int64 // sum of stored-entry sizes
	count   int
	end     Pos
}

func newGen(end Pos) *cacheGen {
	return &cacheGen{ledgers: map[int64]map[int64][]byte{}, end: end}
}

func (g *cacheGen) get(ledger, entry int64) ([]byte, bool) {
	rec, ok := g.ledgers[ledger][entry]
	return rec, ok
}

func (g *cacheGen) put(ledger, entry int64, rec []byte) {
	m := g.ledgers[ledger]
	if m == nil {
		m = map[int64][]byte{}
		g.ledgers[ledger] = m
	}
	if old, ok := m[entry]; ok {
		g.bytes -= int64(len(old))
		g.count--
	}
	m[entry] = rec
	g.bytes += int64(len(rec))
	g.count++
}

func (g *cacheGen) dropLedger(ledger int64) {
	for _, rec := range g.ledgers[ledger] {
		g.bytes -= int64(len(rec))
		g.count--
	}
	delete(g.ledgers, ledger)
}

// cachedEntry is one entry of a generation, for flushing.
type cachedEntry struct {
	ledger, entry int64
	rec           []byte
}

// sorted returns the generation's entries sorted by (ledger, entry).
func (g *cacheGen) sorted() []cachedEntry {
	out := make([]cachedEntry, 0, g.count)
	for l, m := range g.ledgers {
		for e, rec := range m {
			out = append(out, cachedEntry{l, e, rec})
		}
	}
	slices.SortFunc(out, func(a, b cachedEntry) int {
		if a.ledger != b.ledger {
			if a.ledger < b.ledger {
				return -1
			}
			return 1
		}
		if a.entry < b.entry {
			return -1
		}
		if a.entry > b.entry {
			return 1
		}
		return 0
	})
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
	for l, m := range g.ledgers {
		for e, rec := range m {
			if _, ok := c.active.get(l, e); !ok {
				c.active.put(l, e, rec)
			}
		}
	}
	c.flushing = nil
}
