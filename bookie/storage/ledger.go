package storage

import "bytes"

// ledgerCounts are a ledger's entry count, payload bytes and highest
// entry id (NoEntry if none).
type ledgerCounts struct {
	entries, bytes, last int64
}

// ledger is the engine's in-memory state of one ledger. All fields are
// guarded by the engine's mu, except flushed, which only the flush (under
// flushMu) writes.
type ledger struct {
	id     int64
	key    []byte // master key, set by the first add or fence
	fenced bool
	lac    int64        // highest LAC piggybacked (NoEntry if none)
	live   ledgerCounts // every acknowledged entry (write cache + index)
	// flushed counts the entries in the location index: what the index's
	// ledger record says, so that replay starts from it.
	flushed ledgerCounts
	// lacCh is closed and cleared when lac advances or the ledger is
	// deleted; WaitLAC creates it on demand.
	lacCh chan struct{}
	// dirty: key, fenced or lac changed since the last flush wrote the
	// ledger's index record.
	dirty bool
	// keyDurable: a synced record holds key (a journaled master-key or
	// fence record, or the index's ledger record). Until then every add
	// journals the key again: the record of the add that created the
	// ledger may have failed, and replay must not find adds of a ledger
	// whose key it never saw.
	keyDurable bool
}

func newLedger(id int64, key []byte) *ledger {
	none := ledgerCounts{last: NoEntry}
	return &ledger{id: id, key: bytes.Clone(key), lac: NoEntry, live: none, flushed: none, dirty: true}
}

// setLAC raises lac and wakes waiters.
func (l *ledger) setLAC(lac int64) {
	if lac <= l.lac {
		return
	}
	l.lac = lac
	l.dirty = true
	l.wake()
}

func (l *ledger) wake() {
	if l.lacCh != nil {
		close(l.lacCh)
		l.lacCh = nil
	}
}

// waitCh returns a channel closed at the next LAC change.
func (l *ledger) waitCh() <-chan struct{} {
	if l.lacCh == nil {
		l.lacCh = make(chan struct{})
	}
	return l.lacCh
}

func (l *ledger) info() LedgerInfo {
	return LedgerInfo{LedgerID: l.id, LAC: l.lac, LastEntry: l.live.last, Entries: l.live.entries,
		Bytes: l.live.bytes, Fenced: l.fenced}
}

// admit is the admission decision for an add or fence: the master key
// must match the ledger's (a ledger without state takes the request's),
// and a fenced ledger takes only recovery adds. st is nil for an unknown
// ledger.
func admit(st *ledger, key []byte, fence, recovery bool) error {
	if st == nil {
		return nil
	}
	if !bytes.Equal(st.key, key) {
		return ErrMasterKey
	}
	if !fence && st.fenced && !recovery {
		return ErrFenced
	}
	return nil
}
