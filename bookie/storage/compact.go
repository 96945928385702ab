package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// CompactStats summarise compaction work.
type CompactStats struct {
	LogsCompacted  int   // logs whose live entries were copied, then removed
	LogsRemoved    int   // logs removed (compacted, or with nothing live)
	EntriesCopied  int64 // live entries copied to a new log
	BytesCopied    int64
	BytesReclaimed int64 // bytes of removed logs minus bytes copied
}

func (s *CompactStats) add(o CompactStats) {
	s.LogsCompacted += o.LogsCompacted
	s.LogsRemoved += o.LogsRemoved
	s.EntriesCopied += o.EntriesCopied
	s.BytesCopied += o.BytesCopied
	s.BytesReclaimed += o.BytesReclaimed
}

// logUsage is a sealed log's size and live bytes, for pickLogs.
type logUsage struct {
	id         uint64
	size, live int64
}

// pickLogs is compaction's selection: logs with nothing live are removed
// outright; logs whose live fraction is below threshold are compacted,
// emptiest first. The log receiving flushes is never picked.
func pickLogs(logs []logUsage, current uint64, hasCurrent bool, threshold float64) (remove, compact []uint64) {
	var cands []logUsage
	for _, l := range logs {
		switch {
		case hasCurrent && l.id == current:
		case l.live <= 0:
			remove = append(remove, l.id)
		case l.size > 0 && float64(l.live)/float64(l.size) < threshold:
			cands = append(cands, l)
		}
	}
	slices.SortFunc(cands, func(a, b logUsage) int {
		fa, fb := float64(a.live)/float64(a.size), float64(b.live)/float64(b.size)
		switch {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return int(a.id - b.id)
	})
	for _, c := range cands {
		compact = append(compact, c.id)
	}
	slices.Sort(remove)
	return remove, compact
}

// Compact runs one compaction now: entry logs with nothing live are
// removed, and logs whose live fraction is below CompactThreshold have
// their live entries copied to a new log, the index repointed, and are
// then removed. Reads continue throughout: the index moves to the copy
// before the old file goes, and a reader holding the old file keeps it
// until its read ends. Errors: ErrClosed (also when Close interrupts it),
// ctx's error, I/O errors. A log that cannot be read (an I/O error, or
// ErrCorrupt when the index points past its end) is kept and the others
// are compacted; its error is returned with the stats of the rest.
func (e *Engine) Compact(ctx context.Context) (CompactStats, error) {
	if err := e.enter(); err != nil {
		return CompactStats{}, err
	}
	defer e.leave()
	e.compactMu.Lock()
	defer e.compactMu.Unlock()
	st, err := e.compact(ctx)
	e.compactStats.Lock()
	e.compactStats.add(st)
	e.compactStats.Unlock()
	if st.LogsRemoved > 0 {
		e.log.Info("compaction", "logs_removed", st.LogsRemoved, "logs_compacted", st.LogsCompacted,
			"entries_copied", st.EntriesCopied, "bytes_reclaimed", st.BytesReclaimed)
	}
	return st, err
}

// runCompactor is the background compactor goroutine.
func (e *Engine) runCompactor() {
	defer e.bg.Done()
	t := e.clock.NewTimer(e.cfg.CompactInterval)
	defer t.Stop()
	for {
		select {
		case <-e.closing:
			return
		case <-t.C():
		}
		// Compaction checks e.closing itself, so Close interrupts it.
		if _, err := e.Compact(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
			e.log.Error("compaction failed", "err", err)
		}
		t.Reset(e.cfg.CompactInterval)
	}
}

// move is one live entry copied by compaction.
type move struct {
	ledger, entry int64
	src           uint64
	srcOff        int64
	dstOff        int64
	size          int32
}

func (e *Engine) compact(ctx context.Context) (CompactStats, error) {
	var st CompactStats
	e.flushMu.Lock()
	var usage []logUsage
	for id, m := range e.logs.snapshot() {
		usage = append(usage, logUsage{id: id, size: m.size, live: m.live()})
	}
	cur, hasCur := uint64(0), e.cur != nil
	if hasCur {
		cur = e.cur.id
	}
	e.flushMu.Unlock()
	remove, compact := pickLogs(usage, cur, hasCur, e.cfg.CompactThreshold)
	sizes := map[uint64]int64{}
	for _, u := range usage {
		sizes[u.id] = u.size
	}
	if len(remove) > 0 {
		if _, err := e.commitCompaction(nil, remove, nil); err != nil {
			return st, err
		}
		for _, id := range remove {
			st.LogsRemoved++
			st.BytesReclaimed += sizes[id]
		}
	}
	if len(compact) == 0 {
		return st, nil
	}
	w, err := createLogWriter(e.cfg.FS, e.logDir, e.logs.allocID(), e.cfg.DisableFsync, e.cfg.EntryLogDirectIO, e.log)
	if err != nil {
		return st, err
	}
	defer w.close()
	var moves []move
	var copied []uint64 // the logs copied: compact minus those skipped
	var skipped []error
	for _, id := range compact {
		n := len(moves)
		moves, err = e.copyLive(ctx, id, w, moves)
		var we *copyWriteError
		switch {
		case err == nil:
			copied = append(copied, id)
		case errors.As(err, &we) || errors.Is(err, ErrClosed) || ctx.Err() != nil:
			e.logs.retire(w.id)
			return st, err
		default: // this log cannot be read: keep it, compact the others
			moves = moves[:n]
			e.log.Error("compaction skips an entry log it cannot read", "log", fmt.Sprintf("%016x", id), "err", err)
			skipped = append(skipped, err)
		}
	}
	if len(copied) == 0 {
		e.logs.retire(w.id)
		return st, errors.Join(skipped...)
	}
	if err := w.sync(); err != nil {
		e.logs.retire(w.id)
		return st, err
	}
	if h := e.hooks.afterCompactCopy; h != nil {
		h()
	}
	compact = copied
	committed, err := e.commitCompaction(w, compact, moves)
	if err != nil {
		return st, err
	}
	st.LogsCompacted += len(compact)
	st.LogsRemoved += len(compact)
	var removed int64
	for _, id := range compact {
		removed += sizes[id]
	}
	st.EntriesCopied += int64(len(committed))
	for _, mv := range committed {
		st.BytesCopied += int64(mv.size)
	}
	st.BytesReclaimed += removed - st.BytesCopied
	return st, errors.Join(skipped...)
}

// copyWriteError is a failure writing compaction's output log, which ends
// the compaction (a failure reading one input log skips only that log).
type copyWriteError struct{ err error }

func (e *copyWriteError) Error() string { return "bookie: compaction: " + e.err.Error() }
func (e *copyWriteError) Unwrap() error { return e.err }

// copyLive copies the live entries of log src to w, returning moves
// extended with them. What is live is what the index points at in src,
// found by scanning the index entries of each ledger the log's metadata
// names, never by walking the log's own record framing: a length field
// damaged in dead bytes could hide a live record from such a walk, or end
// it (and the compaction) with an error, and a ledger whose delete is
// still in flight (and may yet fail) is copied like any other. Records
// are copied verbatim in log order: a damaged entry stays detectably
// damaged. Errors: ErrCorrupt when the index points past the log's end,
// ErrClosed, ctx's error, I/O errors.
func (e *Engine) copyLive(ctx context.Context, src uint64, w *logWriter, moves []move) ([]move, error) {
	m := e.logs.metaOf(src)
	if m == nil {
		return moves, nil
	}
	live, err := e.liveIn(ctx, src, m)
	if err != nil {
		return moves, err
	}
	lf, err := e.logs.acquire(src)
	if err != nil {
		return moves, err
	}
	defer e.logs.release(lf)
	r := &chunkReader{f: lf.f, size: m.size}
	hdr, err := r.at(0, logHeaderSize)
	if err != nil {
		return moves, err
	}
	if err := checkLogHeader(hdr, src); err != nil {
		return moves, err
	}
	for _, mv := range live {
		if err := e.interrupted(ctx); err != nil {
			return moves, err
		}
		if mv.srcOff < logHeaderSize || mv.srcOff+int64(mv.size) > m.size {
			return moves, fmt.Errorf("%w: entry log %016x: index points at %d bytes at offset %d for entry %d/%d, the log has %d",
				ErrCorrupt, src, mv.size, mv.srcOff, mv.ledger, mv.entry, m.size)
		}
		rec, err := r.at(mv.srcOff, int(mv.size))
		if err != nil {
			return moves, err
		}
		if mv.dstOff, err = w.append(mv.ledger, rec); err != nil {
			return moves, &copyWriteError{err}
		}
		moves = append(moves, mv)
	}
	return moves, nil
}

// liveIn returns the index entries that point into log src (whose
// metadata is m), as moves without a destination, in log order.
func (e *Engine) liveIn(ctx context.Context, src uint64, m *logMeta) ([]move, error) {
	ledgers := make([]int64, 0, len(m.ledgers))
	for l := range m.ledgers {
		ledgers = append(ledgers, l)
	}
	slices.Sort(ledgers)
	var live []move
	for _, l := range ledgers {
		if err := e.interrupted(ctx); err != nil {
			return nil, err
		}
		var bad error
		err := e.ix.locations(l, 0, math.MaxInt64, func(entry int64, v []byte) bool {
			loc, err := decodeLocation(v)
			if err != nil {
				bad = fmt.Errorf("ledger %d entry %d: %w", l, entry, err)
				return false
			}
			if loc.log == src {
				live = append(live, move{ledger: l, entry: entry, src: src, srcOff: loc.off, size: loc.size})
			}
			return true
		})
		if err == nil {
			err = bad
		}
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(live, func(a, b move) int { return cmp.Compare(a.srcOff, b.srcOff) })
	return live, nil
}

func (e *Engine) interrupted(ctx context.Context) error {
	select {
	case <-e.closing:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	default:
		return nil
	}
}

// commitCompaction repoints, in one index batch, every move whose entry
// is still where it was copied from (a delete or rewrite meanwhile wins),
// drops the records of the old logs and adds the new log's; then retires
// the old logs (their files go when the last reader leaves). w nil: only
// remove logs with nothing live. It returns the moves committed.
func (e *Engine) commitCompaction(w *logWriter, old []uint64, moves []move) ([]move, error) {
	e.flushMu.Lock()
	defer e.flushMu.Unlock()
	if err := e.failure(); err != nil {
		return nil, err
	}
	b := e.ix.db.NewBatch()
	defer b.Close()
	var committed []move
	if w != nil {
		meta := &logMeta{size: w.off, ledgers: map[int64]int64{}}
		for _, mv := range moves {
			loc, ok, err := e.ix.location(mv.ledger, mv.entry)
			if err != nil {
				return nil, err
			}
			if !ok || loc.log != mv.src || loc.off != mv.srcOff {
				continue
			}
			nl := location{log: w.id, off: mv.dstOff, size: mv.size}
			if err := b.Set(entryKey(mv.ledger, mv.entry), encodeLocation(nl), nil); err != nil {
				return nil, err
			}
			meta.ledgers[mv.ledger] += int64(mv.size)
			committed = append(committed, mv)
		}
		if len(committed) > 0 {
			if err := b.Set(logKey(w.id), encodeLogRecord(meta), nil); err != nil {
				return nil, err
			}
			e.logs.setMeta(w.id, meta) // readable before the index points here
		}
	}
	for _, id := range old {
		if err := b.Delete(logKey(id), nil); err != nil {
			return nil, err
		}
	}
	if err := b.Commit(e.ix.write); err != nil {
		e.setFailed(err)
		return nil, fmt.Errorf("bookie: compaction commit: %w", err)
	}
	if h := e.hooks.afterCompactIndex; h != nil {
		h()
	}
	for _, id := range old {
		e.logs.retire(id)
	}
	if w != nil && len(committed) == 0 {
		e.logs.retire(w.id)
	}
	return committed, nil
}

// chunkReader reads a file through a 1 MiB window.
type chunkReader struct {
	f     io.ReaderAt
	size  int64
	buf   []byte
	start int64
}

// at returns n bytes at off (valid until the next call).
func (r *chunkReader) at(off int64, n int) ([]byte, error) {
	if off >= r.start && off+int64(n) <= r.start+int64(len(r.buf)) {
		return r.buf[off-r.start : off-r.start+int64(n)], nil
	}
	size := max(n, 1<<20)
	size = int(min(int64(size), r.size-off))
	if size < n {
		return nil, fmt.Errorf("read of %d bytes at %d passes the end (%d)", n, off, r.size)
	}
	if cap(r.buf) < size {
		r.buf = make([]byte, size)
	}
	r.buf = r.buf[:size]
	if _, err := readFull(r.f, r.buf, off); err != nil {
		return nil, err
	}
	r.start = off
	return r.buf[:n], nil
}
