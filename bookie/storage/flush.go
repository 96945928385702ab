package storage

import (
	"context"
	"fmt"
)

// Flush writes the write cache to the current entry log, records the
// locations and ledger metadata in the index and advances the checkpoint,
// now. The engine also flushes on its own (WriteCacheBytes,
// FlushInterval, Close). Errors: ErrClosed, I/O errors; after an index
// failure, the sticky storage failure.
func (e *Engine) Flush(ctx context.Context) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	if err := ctx.Err(); err != nil {
		return err
	}
	e.flushMu.Lock()
	defer e.flushMu.Unlock()
	return e.flushLocked()
}

// runFlusher is the flusher goroutine: it flushes when the cache passes
// WriteCacheBytes (kicked by applyDurable) and every FlushInterval, and
// re-checks the disk's usage on each tick.
func (e *Engine) runFlusher() {
	defer e.bg.Done()
	t := e.clock.NewTimer(e.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-e.closing:
			return
		case <-e.flushKick:
		case <-t.C():
			e.checkDisk()
		}
		e.flushMu.Lock()
		err := e.flushLocked()
		e.flushMu.Unlock()
		if err != nil {
			e.log.Error("flush failed", "err", err)
		}
		t.Reset(e.cfg.FlushInterval)
	}
}

// flushedLedger is a ledger's index record as a flush will write it.
type flushedLedger struct {
	st  *ledger
	rec ledgerRecord
}

// flushLocked runs one flush. Callers hold flushMu.
//
// Order, for crash safety: the cache generation is swapped out (still
// readable); its entries are written sorted to the entry log, which is
// fsynced (with its directory entry when new); then one index batch holds
// the locations, ledger records, entry-log records and the new
// checkpoint, committed with sync; only then is the generation dropped
// and are journal files before the checkpoint deleted. A crash before the
// commit leaves the journal to replay; the log's unreferenced bytes are
// dead space (or an orphan file, removed at open).
func (e *Engine) flushLocked() error {
	if err := e.failure(); err != nil {
		return err
	}
	e.mu.Lock()
	e.cache.mu.Lock()
	gen := e.cache.active
	var snap []flushedLedger
	for id, st := range e.ledgers {
		if st.dirty || gen.ledgers[id] != nil {
			snap = append(snap, flushedLedger{st: st, rec: ledgerRecord{key: st.key, fenced: st.fenced, lac: st.lac}})
			st.dirty = false
		}
	}
	if gen.count == 0 && gen.end == e.checkpoint && len(snap) == 0 {
		e.cache.mu.Unlock()
		e.mu.Unlock()
		return nil
	}
	e.cache.flushing = gen
	e.cache.active = newGen(gen.end)
	e.cache.mu.Unlock()
	e.mu.Unlock()

	counts, err := e.writeGen(gen, snap)
	if err != nil {
		e.mu.Lock()
		e.cache.mu.Lock()
		e.cache.restoreLocked(gen)
		for _, f := range snap {
			f.st.dirty = true
		}
		e.cache.mu.Unlock()
		e.mu.Unlock()
		return err
	}
	e.mu.Lock()
	for _, f := range snap {
		if c, ok := counts[f.st.id]; ok {
			f.st.flushed = c
		}
	}
	e.mu.Unlock()
	e.cache.mu.Lock()
	e.cache.drops.Add(1)
	e.cache.flushing = nil
	e.cache.mu.Unlock()
	e.checkpoint = gen.end
	cp := gen.end
	e.published.Store(&cp)
	e.flushes.Add(1)
	e.flushedEntries.Add(int64(gen.count))
	if e.j != nil {
		e.j.purge(gen.end.File)
	}
	return nil
}

// writeGen writes a generation to the entry log and commits the index
// batch. It returns each flushed ledger's new index counts.
func (e *Engine) writeGen(gen *cacheGen, snap []flushedLedger) (map[int64]ledgerCounts, error) {
	var w *logWriter
	if gen.count > 0 {
		var err error
		if w, err = e.currentLog(); err != nil {
			return nil, err
		}
	}
	b := e.ix.db.NewBatch()
	defer b.Close()
	counts := map[int64]ledgerCounts{}
	for _, f := range snap {
		counts[f.st.id] = f.st.flushed
	}
	older := map[uint64]*logMeta{} // logs losing overwritten entries
	fail := func(err error) (map[int64]ledgerCounts, error) {
		if w != nil {
			e.dropCurrentLog()
		}
		return nil, err
	}
	for _, ce := range gen.sorted() {
		off, err := w.append(ce.ledger, ce.rec)
		if err != nil {
			return fail(err)
		}
		c := counts[ce.ledger]
		pl := entryPayloadLen(len(ce.rec))
		if ce.entry > c.last {
			c.entries++
			c.bytes += pl
			c.last = ce.entry
		} else if old, ok, err := e.ix.location(ce.ledger, ce.entry); err != nil {
			return fail(err)
		} else if ok {
			c.bytes += pl - entryPayloadLen(int(old.size))
			e.uncount(older, w, old, ce.ledger)
		} else {
			c.entries++
			c.bytes += pl
		}
		counts[ce.ledger] = c
		loc := location{log: w.id, off: off, size: int32(len(ce.rec))}
		if err := b.Set(entryKey(ce.ledger, ce.entry), encodeLocation(loc), nil); err != nil {
			return fail(err)
		}
	}
	if w != nil {
		if err := w.sync(); err != nil {
			return fail(err)
		}
		if h := e.hooks.afterFlushLog; h != nil {
			h()
		}
	}
	for _, f := range snap {
		r := f.rec
		r.flushed = counts[f.st.id]
		if err := b.Set(ledgerKey(f.st.id), encodeLedgerRecord(r), nil); err != nil {
			return fail(err)
		}
	}
	for id, m := range older {
		if err := b.Set(logKey(id), encodeLogRecord(m), nil); err != nil {
			return fail(err)
		}
	}
	if w != nil {
		if err := b.Set(logKey(w.id), encodeLogRecord(w.meta), nil); err != nil {
			return fail(err)
		}
	}
	if err := b.Set(checkpointKey, encodePos(gen.end), nil); err != nil {
		return fail(err)
	}
	if err := b.Commit(e.ix.write); err != nil {
		e.setFailed(err)
		return fail(err)
	}
	if w != nil {
		e.logs.setMeta(w.id, w.meta)
	}
	for id, m := range older {
		e.logs.setMeta(id, m)
	}
	return counts, nil
}

// uncount removes an overwritten entry's bytes from its old log's
// accounting (the current writer's working copy, or a copy of a sealed
// log's metadata collected in older).
func (e *Engine) uncount(older map[uint64]*logMeta, w *logWriter, old location, ledger int64) {
	m := older[old.log]
	switch {
	case w != nil && old.log == w.id:
		m = w.meta
	case m == nil:
		if m = e.logs.metaOf(old.log); m == nil {
			return
		}
		older[old.log] = m
	}
	if m.ledgers[ledger] -= int64(old.size); m.ledgers[ledger] <= 0 {
		delete(m.ledgers, ledger)
	}
}

// currentLog returns the entry log flushes append to, starting a new one
// when there is none or the current one reached EntryLogMaxSize. A new
// log is registered (with empty metadata) so readers can open it as soon
// as the index points into it. Callers hold flushMu.
func (e *Engine) currentLog() (*logWriter, error) {
	if e.cur != nil && e.cur.off < e.cfg.EntryLogMaxSize {
		return e.cur, nil
	}
	if e.cur != nil {
		e.cur.close()
		e.cur = nil
	}
	id := e.logs.allocID()
	w, err := createLogWriter(e.cfg.FS, e.logDir, id, e.cfg.DisableFsync, e.cfg.EntryLogDirectIO, e.log)
	if err != nil {
		return nil, err
	}
	e.logs.setMeta(id, w.meta)
	e.cur = w
	return w, nil
}

// dropCurrentLog abandons the current log after a failed flush: its
// unflushed tail may be damaged, so the next flush starts a new log. A log
// the index never referenced is removed.
func (e *Engine) dropCurrentLog() {
	w := e.cur
	if w == nil {
		return
	}
	e.cur = nil
	w.close()
	if m := e.logs.metaOf(w.id); m == nil || len(m.ledgers) == 0 {
		e.logs.retire(w.id)
	}
}

// deleteIndexed removes ledgers' locations and records from the index and
// from the entry logs' live accounting, in one committed batch. Callers
// hold flushMu (or are replaying, alone).
func (e *Engine) deleteIndexed(ledgers []int64) error {
	b := e.ix.db.NewBatch()
	defer b.Close()
	touched := map[uint64]bool{}
	for _, l := range ledgers {
		if err := deleteLedger(b, l); err != nil {
			return err
		}
		for _, id := range e.logs.dropLedger(l) {
			touched[id] = true
		}
		if e.cur != nil {
			delete(e.cur.meta.ledgers, l)
		}
	}
	for id := range touched {
		m := e.logs.metaOf(id)
		if e.cur != nil && id == e.cur.id {
			m = e.cur.meta
		}
		if m == nil {
			continue
		}
		if err := b.Set(logKey(id), encodeLogRecord(m), nil); err != nil {
			return err
		}
	}
	if err := b.Commit(e.ix.write); err != nil {
		e.setFailed(err)
		return fmt.Errorf("bookie: delete from index: %w", err)
	}
	return nil
}
