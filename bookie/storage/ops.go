package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Add implements Storage. done runs exactly once: with nil after the
// entry's journal batch is fsynced and the entry is readable, or with
// ErrInvalid, ErrMasterKey, ErrFenced (not for Recovery adds), ErrReadOnly
// (not for Recovery adds either: ledger recovery's rewrites of a ledger's
// last entries are few and small, and refusing them would keep every
// ledger on a drained bookie from being taken over; BookKeeper's bookies
// accept them as high-priority writes), ErrClosed, or a journal I/O error (the batch's adds all fail; none is
// acked). It may run before Add returns (on a refusal) or on the journal's
// acker goroutine, so it must not block nor call Add, Fence or
// DeleteLedger. Add blocks while the journal has more than
// JournalMaxPendingBytes waiting (back-pressure).
func (e *Engine) Add(req AddRequest, done func(error)) {
	e.AddBatch([]AddRequest{req}, []func(error){done})
}

// AddBatch is Add for several entries (done[i] is reqs[i]'s callback,
// with Add's contract): they are admitted in order under one acquisition
// of the engine's locks and enter the journal together, so that an idle
// journal does not start its write and fsync with the first of them and
// leave the rest for the next one. The Server hands it each request's
// entries.
func (e *Engine) AddBatch(reqs []AddRequest, done []func(error)) {
	for i, d := range done {
		if d == nil {
			done[i] = func(error) {}
		}
	}
	ops := make([]op, len(reqs))
	var checked []int // indexes of the requests that passed checkAdd
	for i := range reqs {
		req := &reqs[i]
		if err := e.checkAdd(req); err != nil {
			done[i](err)
			continue
		}
		rec := recordOf(req)
		ops[i] = op{kind: opAdd, ledger: req.LedgerID, entry: req.EntryID, lac: req.LAC, rec: rec,
			recCRC: recordCRC(recAdd, rec), done: done[i]}
		checked = append(checked, i)
	}
	if len(checked) == 0 {
		return
	}
	e.j.waitSpace()
	admitted := make([]*op, 0, len(checked))
	var refusals []error // by request index, allocated at the first refusal
	e.mu.Lock()
	for _, i := range checked {
		req, o := &reqs[i], &ops[i]
		st := e.ledgers[req.LedgerID]
		err := admit(st, req.MasterKey, false, req.Recovery)
		if err == nil && st == nil && e.undecided[req.LedgerID] {
			err = errBeingDeleted(req.LedgerID)
		}
		if err != nil {
			if refusals == nil {
				refusals = make([]error, len(reqs))
			}
			refusals[i] = err
			continue
		}
		if st == nil {
			st = newLedger(req.LedgerID, req.MasterKey)
			e.ledgers[req.LedgerID] = st
		}
		if !st.keyDurable { // a new ledger, or its first records failed
			o.newKey, o.key = true, st.key
		}
		o.st = st
		admitted = append(admitted, o)
	}
	err := e.j.submit(admitted...)
	e.mu.Unlock()
	for i, rerr := range refusals {
		if rerr != nil {
			done[i](rerr)
		}
	}
	if err != nil {
		for _, o := range admitted {
			o.done(err)
		}
	}
}

// errBeingDeleted refuses an add or fence that would create ledger id
// again while its delete record is not yet durable: the delete may yet
// fail, and the ledger then is the old one (BookKeeper never reuses a
// ledger id). Once the record is durable the delete is decided, and a new
// incarnation may start while the index is cleaned up.
func errBeingDeleted(id int64) error {
	return fmt.Errorf("%w: ledger %d is being deleted", ErrInvalid, id)
}

// checkAdd runs Add's checks that need no lock.
func (e *Engine) checkAdd(req *AddRequest) error {
	switch {
	case req.LedgerID < 0 || req.EntryID < 0 || req.LAC < NoEntry:
		return fmt.Errorf("%w: ledger %d entry %d lac %d", ErrInvalid, req.LedgerID, req.EntryID, req.LAC)
	case len(req.Payload) > e.cfg.MaxEntryBytes:
		return fmt.Errorf("%w: payload of %d bytes exceeds %d", ErrInvalid, len(req.Payload), e.cfg.MaxEntryBytes)
	case e.closed.Load():
		return ErrClosed
	case e.readOnly() && !req.Recovery:
		return ErrReadOnly
	}
	return e.failure()
}

// Fence implements Storage: it marks the ledger fenced at once (later
// non-recovery adds fail with ErrFenced), journals the fence and returns
// the ledger's LAC after the fence record is fsynced; every add admitted
// before the fence is acked by then. Errors: ErrInvalid, ErrMasterKey,
// ErrClosed, journal I/O errors, or ctx's error (the fence may still
// become durable). Fencing works on a read-only engine.
func (e *Engine) Fence(ctx context.Context, ledgerID int64, masterKey []byte) (int64, error) {
	if ledgerID < 0 {
		return NoEntry, fmt.Errorf("%w: ledger %d", ErrInvalid, ledgerID)
	}
	if e.closed.Load() {
		return NoEntry, ErrClosed
	}
	done := make(chan error, 1)
	e.mu.Lock()
	st := e.ledgers[ledgerID]
	err := admit(st, masterKey, true, false)
	if err == nil && st == nil && e.undecided[ledgerID] {
		err = errBeingDeleted(ledgerID)
	}
	if err != nil {
		e.mu.Unlock()
		return NoEntry, err
	}
	if st == nil {
		st = newLedger(ledgerID, masterKey)
		e.ledgers[ledgerID] = st
	}
	st.fenced, st.dirty = true, true
	st.wake() // long polls end on a fence (WaitLAC)
	o := &op{kind: opFence, ledger: ledgerID, key: st.key, st: st, done: func(err error) { done <- err }}
	err = e.j.submit(o)
	e.mu.Unlock()
	if err != nil {
		return NoEntry, err
	}
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	e.mu.RLock()
	lac := st.lac
	e.mu.RUnlock()
	if err != nil && !errors.Is(err, ctx.Err()) {
		return NoEntry, err
	}
	return lac, err
}

// Read implements Storage: ErrNoLedger, ErrNoEntry, ErrCorrupt (the
// stored bytes failed their check), ErrClosed or an I/O error.
func (e *Engine) Read(ledgerID, entryID int64) (Entry, error) {
	if err := e.enter(); err != nil {
		return Entry{}, err
	}
	defer e.leave()
	if !e.hasLedger(ledgerID) {
		return Entry{}, ErrNoLedger
	}
	return e.readEntry(ledgerID, entryID)
}

// ReadRange implements Storage. The first entry is returned even if its
// payload alone exceeds maxBytes; later ones only while the total stays
// within it. On ErrCorrupt or an I/O error it returns the entries before
// the failing one with the error.
func (e *Engine) ReadRange(ledgerID, first, last int64, maxBytes int) ([]Entry, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if !e.hasLedger(ledgerID) {
		return nil, ErrNoLedger
	}
	var out []Entry
	total := 0
	var run []Entry // entries read ahead from one entry log (readRun)
	for id := max(first, 0); id <= last; id++ {
		if len(run) == 0 {
			if _, cached := e.cache.get(ledgerID, id); !cached && !e.indexHidden(ledgerID) {
				budget := 0
				if maxBytes > 0 {
					budget = max(maxBytes-total, 1)
				}
				// An error is left to the one-by-one read below, which
				// reports it exactly; run holds the entries before it.
				run, _ = e.readRun(ledgerID, id, last, budget)
			}
		}
		var ent Entry
		if len(run) > 0 && run[0].EntryID == id {
			ent, run = run[0], run[1:]
		} else {
			var err error
			if ent, err = e.readEntry(ledgerID, id); errors.Is(err, ErrNoEntry) {
				break
			} else if err != nil {
				return out, err
			}
		}
		if maxBytes > 0 && len(out) > 0 && total+len(ent.Payload) > maxBytes {
			break
		}
		out = append(out, ent)
		total += len(ent.Payload)
		if (maxBytes > 0 && total >= maxBytes) || id == math.MaxInt64 {
			break
		}
	}
	return out, nil
}

func (e *Engine) hasLedger(id int64) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.ledgers[id] != nil
}

// indexHidden reports whether a ledger's index data belongs to a deleted
// incarnation still being removed.
func (e *Engine) indexHidden(id int64) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.deleting[id]
}

// readEntry looks in the write cache, then the index and entry logs. If
// compaction retires the log between the lookup and the read, it looks
// the entry up again (the index already points at the copy).
func (e *Engine) readEntry(ledgerID, entryID int64) (Entry, error) {
	const attempts = 8
	for i := 0; ; i++ {
		if rec, ok := e.cache.get(ledgerID, entryID); ok {
			return decodeEntry(rec, ledgerID, entryID)
		}
		if entryID < 0 || e.indexHidden(ledgerID) {
			return Entry{}, ErrNoEntry
		}
		loc, ok, err := e.ix.location(ledgerID, entryID)
		if err != nil {
			return Entry{}, err
		}
		if !ok {
			return Entry{}, ErrNoEntry
		}
		ent, err := e.logs.read(loc, ledgerID, entryID)
		if errors.Is(err, errLogGone) && i < attempts {
			continue
		}
		return ent, err
	}
}

// LAC implements Storage: the highest LAC piggybacked on a durable add,
// or ErrNoLedger.
func (e *Engine) LAC(ledgerID int64) (int64, error) {
	if e.closed.Load() {
		return NoEntry, ErrClosed
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	st := e.ledgers[ledgerID]
	if st == nil {
		return NoEntry, ErrNoLedger
	}
	return st.lac, nil
}

// WaitLAC implements Storage. It returns as soon as the ledger's LAC
// exceeds after or the ledger is fenced; ErrNoLedger if the ledger is
// unknown or deleted while waiting; ErrClosed on Close; ctx's error (with
// the current LAC) when ctx ends. It wakes on LAC changes, fences and
// deletes only (no polling).
func (e *Engine) WaitLAC(ctx context.Context, ledgerID int64, after int64) (int64, error) {
	for {
		if e.closed.Load() {
			return NoEntry, ErrClosed
		}
		e.mu.Lock()
		st := e.ledgers[ledgerID]
		if st == nil {
			e.mu.Unlock()
			return NoEntry, ErrNoLedger
		}
		lac := st.lac
		if lac > after || st.fenced {
			e.mu.Unlock()
			return lac, nil
		}
		ch := st.waitCh()
		e.mu.Unlock()
		select {
		case <-ch:
		case <-e.closing:
			return lac, ErrClosed
		case <-ctx.Done():
			if cur, err := e.LAC(ledgerID); err == nil {
				lac = cur
			}
			return lac, ctx.Err()
		}
	}
}

// DeleteLedger implements Storage: the delete is journaled (fsynced), the
// ledger disappears from reads and listings, and its locations leave the
// index; entry-log space returns with compaction. Errors: ErrNoLedger,
// ErrClosed, I/O errors. Adds to the same ledger after the delete create
// it anew.
func (e *Engine) DeleteLedger(ledgerID int64) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	e.flushMu.Lock()
	defer e.flushMu.Unlock()
	if err := e.failure(); err != nil {
		return err
	}
	done := make(chan error, 1)
	e.mu.Lock()
	st := e.ledgers[ledgerID]
	if st == nil {
		e.mu.Unlock()
		return ErrNoLedger
	}
	delete(e.ledgers, ledgerID)
	e.deleting[ledgerID] = true
	e.undecided[ledgerID] = true
	st.wake()
	err := e.j.submit(&op{kind: opDelete, ledger: ledgerID, st: st, done: func(err error) { done <- err }})
	e.mu.Unlock()
	if err == nil {
		err = <-done
	}
	e.mu.Lock()
	delete(e.undecided, ledgerID) // decided: a new incarnation may start
	if err != nil {               // the delete did not happen: the ledger is back
		delete(e.deleting, ledgerID)
		e.ledgers[ledgerID] = st
	}
	e.mu.Unlock()
	if h := e.hooks.afterDeleteLog; h != nil && err == nil {
		h()
	}
	if err == nil {
		err = e.deleteIndexed([]int64{ledgerID})
	}
	e.mu.Lock()
	delete(e.deleting, ledgerID)
	if err != nil && e.ledgers[ledgerID] == nil {
		e.ledgers[ledgerID] = st
	}
	e.mu.Unlock()
	return err
}

// Ledgers implements Storage.
func (e *Engine) Ledgers() []LedgerInfo {
	e.mu.RLock()
	out := make([]LedgerInfo, 0, len(e.ledgers))
	for _, st := range e.ledgers {
		out = append(out, st.info())
	}
	e.mu.RUnlock()
	slices.SortFunc(out, func(a, b LedgerInfo) int {
		switch {
		case a.LedgerID < b.LedgerID:
			return -1
		case a.LedgerID > b.LedgerID:
			return 1
		}
		return 0
	})
	return out
}
