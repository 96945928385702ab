package storage

import (
	"path/filepath"
	"time"

	"github.com/stratamesh/strata/internal/vfs"
)

// readOnly reports whether adds are refused: the disk passed
// ReadOnlyThreshold, or SetReadOnly(true).
func (e *Engine) readOnly() bool { return e.readOnlyDisk.Load() || e.readOnlyAdmin.Load() }

// SetReadOnly forces the engine read-only (true) or lifts that (false);
// the disk-usage check applies independently.
func (e *Engine) SetReadOnly(ro bool) { e.readOnlyAdmin.Store(ro) }

// ReadOnlyBySet reports whether SetReadOnly(true) is in force (the disk's
// threshold aside).
func (e *Engine) ReadOnlyBySet() bool { return e.readOnlyAdmin.Load() }

// checkDisk re-reads the usage of the file systems holding the data
// directory and the journal directory, and updates the read-only state:
// either one past ReadOnlyThreshold turns the bookie read-only, as
// BookKeeper watches its journal and ledger directories alike. Each
// directory's own file system is asked, so a journal on another device is
// watched whether Config.JournalDir names it or a mount point or symlink
// under Dir leads to it. A directory whose check fails is logged and left
// out; the state then stays as it was unless another reading is over the
// threshold. It returns the readings by directory (absent: check failed).
func (e *Engine) checkDisk() map[string]vfs.DiskSpace {
	readings := make(map[string]vfs.DiskSpace, 2)
	worst, frac, failed := "", -1.0, false // the fullest file system's directory
	for _, dir := range []string{e.cfg.Dir, e.journalDir} {
		if _, done := readings[dir]; done {
			continue
		}
		ds, err := e.cfg.DiskSpace(dir)
		if err != nil {
			e.log.Warn("disk space check failed", "dir", dir, "err", err)
			failed = true
			continue
		}
		readings[dir] = ds
		if f := ds.UsedFraction(); f > frac {
			worst, frac = dir, f
		}
	}
	ro := frac > e.cfg.ReadOnlyThreshold
	if !ro && failed {
		return readings // not known to be below the threshold everywhere
	}
	if e.readOnlyDisk.Swap(ro) != ro {
		e.log.Warn("disk usage threshold crossed", "read_only", ro, "dir", worst, "used_fraction", frac,
			"threshold", e.cfg.ReadOnlyThreshold)
	}
	return readings
}

// Usage implements Storage. It re-checks the disk, so the read-only
// state it reports is current.
func (e *Engine) Usage() Usage {
	var u Usage
	readings := e.checkDisk()
	if ds, ok := readings[e.cfg.Dir]; ok {
		u.FreeBytes, u.TotalBytes = ds.Free, ds.Total
	}
	if e.cfg.JournalDir != "" {
		u.JournalDir = e.journalDir
		if ds, ok := readings[e.journalDir]; ok {
			u.JournalFreeBytes, u.JournalTotalBytes = ds.Free, ds.Total
		}
	}
	u.ReadOnly = e.readOnly()
	u.UsedBytes = e.dirBytes(e.journalDir) + e.dirBytes(e.logDir)
	if e.enter() == nil {
		u.UsedBytes += int64(e.ix.db.Metrics().DiskSpaceUsage())
		e.leave()
	}
	return u
}

// dirBytes sums the sizes of the files in dir.
func (e *Engine) dirBytes(dir string) int64 {
	names, err := e.cfg.FS.List(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, name := range names {
		if st, err := e.cfg.FS.Stat(filepath.Join(dir, name)); err == nil && !st.IsDir() {
			n += st.Size()
		}
	}
	return n
}

// Stats are cumulative counters of an engine since Open.
type Stats struct {
	JournalBatches   int64         // group commits (one write + one fsync each)
	JournalRecords   int64         // records journaled (adds, fences, keys, deletes)
	JournalAdds      int64         // adds journaled
	JournalBytes     int64         // bytes written to the journal
	JournalSyncTime  time.Duration // time in journal write+fsync
	JournalRotations int64
	JournalRecycled  int64 // journal files made from a spare (zero-filled only past their old size)
	JournalZeroed    int64 // bytes zero-filled ahead of the journal writer
	Flushes          int64 // write-cache flushes that wrote something
	FlushedEntries   int64
	Compaction       CompactStats // summed over every compaction
	EntryLogs        int          // entry logs on disk
	Checkpoint       Pos          // journal position the index is complete up to
}

// AvgBatchAdds is the mean number of adds per journal batch.
func (s Stats) AvgBatchAdds() float64 {
	if s.JournalBatches == 0 {
		return 0
	}
	return float64(s.JournalAdds) / float64(s.JournalBatches)
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	js := &e.j.stats
	s := Stats{
		JournalBatches:   js.batches.Load(),
		JournalRecords:   js.records.Load(),
		JournalAdds:      js.adds.Load(),
		JournalBytes:     js.bytes.Load(),
		JournalSyncTime:  time.Duration(js.syncNanos.Load()),
		JournalRotations: js.rotations.Load(),
		JournalRecycled:  js.recycled.Load(),
		JournalZeroed:    js.zeroed.Load(),
		Flushes:          e.flushes.Load(),
		FlushedEntries:   e.flushedEntries.Load(),
	}
	e.compactStats.Lock()
	s.Compaction = e.compactStats.CompactStats
	e.compactStats.Unlock()
	e.logs.mu.Lock()
	s.EntryLogs = len(e.logs.meta)
	e.logs.mu.Unlock()
	s.Checkpoint = *e.published.Load()
	return s
}
