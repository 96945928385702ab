package storage

import (
	"fmt"
	"path/filepath"
	"slices"
)

// replay reads the journal from checkpoint cp to its end and applies every
// complete batch (write cache, ledger table), then deletes from the index
// the ledgers whose delete records it met. A torn tail in the newest file,
// and a zero-filled tail in any, is truncated away (or the file removed,
// if even its header was torn).
// It returns the newest journal file id seen (the next file is one more)
// and the last batch sequence number.
func (e *Engine) replay(cp Pos) (last, seq uint64, err error) {
	names, err := e.cfg.FS.List(e.journalDir)
	if err != nil {
		return 0, 0, fmt.Errorf("bookie: list journal: %w", err)
	}
	var ids []uint64
	for _, n := range names {
		if id, ok := parseIDFileName(n, journalExt); ok {
			last = max(last, id)
			if id >= cp.File {
				ids = append(ids, id)
			}
		}
	}
	last = max(last, cp.File)
	slices.Sort(ids)
	if cp.Off > 0 && (len(ids) == 0 || ids[0] != cp.File) {
		return 0, 0, fmt.Errorf("%w: journal file %016x holding the checkpoint is missing from %s (a replaced or emptied journal directory: acknowledged entries not yet in an entry log are gone)",
			ErrCorrupt, cp.File, e.journalDir)
	}
	a := &applier{ledgers: e.ledgers, cache: &e.cache, indexed: e.indexedPayload, gone: map[int64]bool{}}
	for i, id := range ids {
		start := int64(0)
		if id == cp.File {
			start = cp.Off
		}
		res, err := e.replayFile(id, start, i == len(ids)-1, a, &seq)
		if err != nil {
			return 0, 0, err
		}
		e.log.Debug("journal replayed", "file", id, "from", start, "to", res.end, "batches", res.batches, "records", res.records)
	}
	if len(a.gone) > 0 {
		if err := e.deleteIndexed(keys(a.gone)); err != nil {
			return 0, 0, err
		}
	}
	return last, seq, nil
}

func keys(m map[int64]bool) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// replayFile replays one journal file from start.
func (e *Engine) replayFile(id uint64, start int64, isLast bool, a *applier, seq *uint64) (scanResult, error) {
	name := filepath.Join(e.journalDir, idFileName(id, journalExt))
	f, err := e.cfg.FS.Open(name)
	if err != nil {
		return scanResult{}, fmt.Errorf("bookie: open journal: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return scanResult{}, err
	}
	if start > st.Size() {
		f.Close()
		return scanResult{}, fmt.Errorf("%w: checkpoint offset %d is past the end of journal file %016x (%d bytes)",
			ErrCorrupt, start, id, st.Size())
	}
	res, err := scanJournal(f, st.Size(), id, start, isLast, e.salt, func(recs []record, end int64) error {
		for _, r := range recs {
			if err := a.replay(r); err != nil {
				return fmt.Errorf("bookie: replay journal file %016x: %w", id, err)
			}
		}
		e.cache.active.end = Pos{File: id, Off: end}
		*seq++
		return nil
	})
	// What replay read may still be only in the page cache (the process
	// died, the machine did not). Make it durable before a checkpoint can
	// pass it, or a later power loss would leave the checkpoint pointing
	// past the end of the file.
	if err == nil && !res.torn && res.end > start && !e.cfg.DisableFsync {
		if serr := f.Sync(); serr != nil {
			err = fmt.Errorf("bookie: sync replayed journal: %w", serr)
		}
	}
	f.Close()
	if err != nil || !res.torn && !res.zeroTail {
		return res, err
	}
	switch {
	case res.stale:
		e.log.Info("journal: dropping a recycled file's old data after its last batch", "file", id, "offset", res.end, "bytes", st.Size()-res.end)
	case res.torn:
		e.log.Warn("journal: discarding torn tail", "file", id, "offset", res.end, "bytes", st.Size()-res.end)
	default:
		e.log.Debug("journal: dropping the zero-filled reserve", "file", id, "offset", res.end, "bytes", st.Size()-res.end)
	}
	if res.end < fileHeaderSize {
		if err := e.cfg.FS.Remove(name); err != nil {
			return res, fmt.Errorf("bookie: remove torn journal file: %w", err)
		}
		return res, e.cfg.FS.SyncDir(e.journalDir)
	}
	w, err := e.cfg.FS.OpenReadWrite(name)
	if err != nil {
		return res, fmt.Errorf("bookie: truncate journal file %016x: %w", id, err)
	}
	err = w.Truncate(res.end)
	if err == nil {
		err = w.Sync()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return res, fmt.Errorf("bookie: truncate journal file %016x: %w", id, err)
	}
	return res, nil
}
