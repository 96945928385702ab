package storage

import "bytes"

// applier applies durable journal records to the ledger table and the
// write cache. The live path (after a batch's fsync) and replay (at open)
// both go through it, so they reach the same state from the same
// records. It does no I/O of its own except through indexed. Callers hold
// the engine's mu and cache.mu.
type applier struct {
	ledgers map[int64]*ledger
	cache   *writeCache
	// indexed returns the payload size of an entry already in the
	// location index (for counting an overwrite once, not twice).
	indexed func(ledger, entry int64) (payload int64, ok bool)
	// gone holds ledgers whose index data belongs to a deleted
	// incarnation (deleted, index not yet cleaned): indexed is not asked
	// about them. Replay adds to it the ledgers its delete records drop,
	// whose index data it then deletes.
	gone map[int64]bool
}

// addEntry stores a durable entry in the active cache generation and
// updates its ledger's counts and LAC. An entry id at or below the
// ledger's highest is looked up (cache, then index) so that rewriting an
// entry replaces it rather than counting it twice.
func (a *applier) addEntry(st *ledger, rec []byte) {
	l, e, lac := entryIDs(rec)
	pl := entryPayloadLen(len(rec))
	switch {
	case e > st.live.last:
		st.live.entries++
		st.live.bytes += pl
		st.live.last = e
	default:
		if old, ok := a.cache.getLocked(l, e); ok {
			st.live.bytes += pl - entryPayloadLen(len(old))
		} else if old, ok := a.indexed(l, e); ok && !a.gone[l] {
			st.live.bytes += pl - old
		} else {
			st.live.entries++
			st.live.bytes += pl
		}
	}
	a.cache.active.put(l, e, rec)
	st.setLAC(lac)
}

// apply applies a live op after its batch's fsync. Its admission (master
// key, fencing, state creation, and for a delete the removal of the
// ledger's state) happened at submit.
func (a *applier) apply(o *op) {
	switch o.kind {
	case opAdd:
		a.addEntry(o.st, o.rec)
		if o.newKey {
			o.st.keyDurable = true
		}
	case opFence:
		o.st.fenced = true
		o.st.dirty = true
		o.st.keyDurable = true // the fence record carries the key
	case opDelete:
		// Every add of the deleted incarnation precedes this record, so
		// the cache holds only its entries.
		a.cache.dropLedgerLocked(o.ledger)
	}
}

// replay applies one record read back from the journal at open. body
// slices alias the scan buffer; whatever is kept is copied.
func (a *applier) replay(r record) error {
	switch r.typ {
	case recMasterKey:
		l, key, err := ledgerOf(r.body)
		if err != nil {
			return err
		}
		if a.ledgers[l] == nil {
			a.ledgers[l] = durableLedger(l, key)
		}
	case recAdd:
		if err := verifyEntry(r.body); err != nil {
			return err
		}
		l, _, _ := entryIDs(r.body)
		st := a.ledgers[l]
		if st == nil { // key record lost with a ledger deleted meanwhile
			st = durableLedger(l, nil)
			a.ledgers[l] = st
		}
		a.addEntry(st, bytes.Clone(r.body))
	case recFence:
		l, key, err := ledgerOf(r.body)
		if err != nil {
			return err
		}
		st := a.ledgers[l]
		if st == nil {
			st = durableLedger(l, key)
			a.ledgers[l] = st
		}
		st.fenced = true
		st.dirty = true
	case recDelete:
		l, _, err := ledgerOf(r.body)
		if err != nil {
			return err
		}
		if st := a.ledgers[l]; st != nil {
			delete(a.ledgers, l)
			st.wake()
		}
		a.cache.dropLedgerLocked(l)
		a.gone[l] = true
	}
	return nil
}

// durableLedger is newLedger for a ledger known from a synced record (the
// journal at replay, or the index).
func durableLedger(id int64, key []byte) *ledger {
	st := newLedger(id, key)
	st.keyDurable = true
	return st
}
