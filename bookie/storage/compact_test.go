package storage

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/internal/vfs"
)

// fillInterleaved writes ledgers live and dead in alternation, flushing
// every few entries so each entry log holds both, and returns the engine.
func fillInterleaved(t *testing.T, fs vfs.FS, live, dead int64, n int64) *Engine {
	t.Helper()
	cfg := testConfig(fs)
	cfg.EntryLogMaxSize = 4 << 10 // several logs
	e := open(t, cfg)
	for i := int64(0); i < n; i += 5 {
		addMany(t, e, live, i, 5)
		addMany(t, e, dead, i, 5)
		flush(t, e)
	}
	return e
}

// TestCompactionReclaimsDeletedLedger: after a ledger is deleted,
// compaction copies the live entries of the logs it shared, repoints the
// index and removes the old logs, while readers of the live ledger keep
// reading, without one error.
func TestCompactionReclaimsDeletedLedger(t *testing.T) {
	fs := vfs.NewMem()
	e := fillInterleaved(t, fs, 1, 2, 100)
	logsBefore := len(logFiles(t, fs))
	usedBefore := e.Usage().UsedBytes
	if err := e.DeleteLedger(2); err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := rng.Int64N(100)
				if seed%2 == 1 { // half the readers read ranges (readRun)
					j := min(i+rng.Int64N(30), 99)
					got, err := e.ReadRange(1, i, j, 0)
					if err != nil || len(got) != int(j-i+1) {
						t.Errorf("range 1/%d..%d during compaction: %d entries, %v", i, j, len(got), err)
						return
					}
					for k, ent := range got {
						if ent.EntryID != i+int64(k) || string(ent.Payload) != string(payload(1, ent.EntryID)) {
							t.Errorf("range 1/%d..%d during compaction: entry %d wrong", i, j, k)
							return
						}
					}
					reads.Add(1)
					continue
				}
				got, err := e.Read(1, i)
				if err != nil || string(got.Payload) != string(payload(1, i)) {
					t.Errorf("read 1/%d during compaction: %v", i, err)
					return
				}
				reads.Add(1)
			}
		}(uint64(r))
	}
	st, err := e.Compact(context.Background())
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if st.LogsRemoved == 0 || st.EntriesCopied == 0 || st.BytesReclaimed <= 0 {
		t.Fatalf("compaction did nothing: %+v", st)
	}
	logsAfter := len(logFiles(t, fs))
	usedAfter := e.Usage().UsedBytes
	t.Logf("logs %d -> %d, used bytes %d -> %d, %d concurrent reads, %+v", logsBefore, logsAfter, usedBefore, usedAfter, reads.Load(), st)
	if logsAfter >= logsBefore {
		t.Fatalf("entry logs %d -> %d", logsBefore, logsAfter)
	}
	for i := int64(0); i < 100; i++ {
		checkEntry(t, e, 1, i)
	}
	// Nothing more to do the second time.
	if st, err := e.Compact(context.Background()); err != nil || st.LogsRemoved != 0 {
		t.Fatalf("second compaction: %+v %v", st, err)
	}
	// And the result survives a crash.
	crashed := fs.CrashClone()
	e.Close()
	e2 := open(t, testConfig(crashed))
	for i := int64(0); i < 100; i++ {
		checkEntry(t, e2, 1, i)
	}
	if _, err := e2.Read(2, 0); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("deleted ledger after reopen: %v", err)
	}
}

// TestCompactionRemovesLogsWithNothingLive: a log holding only deleted
// ledgers is removed without copying.
func TestCompactionRemovesLogsWithNothingLive(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig(fs)
	cfg.EntryLogMaxSize = 1 << 10
	e := open(t, cfg)
	addMany(t, e, 1, 0, 20)
	flush(t, e)
	addMany(t, e, 2, 0, 20)
	flush(t, e) // ledger 2 starts a new log: the first one held only ledger 1
	if err := e.DeleteLedger(1); err != nil {
		t.Fatal(err)
	}
	st, err := e.Compact(context.Background())
	if err != nil || st.LogsRemoved != 1 || st.EntriesCopied != 0 {
		t.Fatalf("compaction: %+v %v", st, err)
	}
	checkEntry(t, e, 2, 19)
}

// TestCrashDuringCompaction: a crash after the copies are synced but
// before the index moves, or after the index moved but before the old
// logs are removed, leaves every live entry readable and no stray file
// after the next open.
func TestCrashDuringCompaction(t *testing.T) {
	fs := vfs.NewMem()
	e := fillInterleaved(t, fs, 1, 2, 60)
	if err := e.DeleteLedger(2); err != nil {
		t.Fatal(err)
	}
	var afterCopy, afterIndex *vfs.MemFS
	e.hooks.afterCompactCopy = func() { afterCopy = fs.CrashClone() }
	e.hooks.afterCompactIndex = func() { afterIndex = fs.CrashClone() }
	if _, err := e.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := len(logFiles(t, fs))
	e.Close()
	for name, c := range map[string]*vfs.MemFS{"after copy": afterCopy, "after index": afterIndex} {
		t.Run(name, func(t *testing.T) {
			e := open(t, testConfig(c))
			for i := int64(0); i < 60; i++ {
				checkEntry(t, e, 1, i)
			}
			if _, err := e.Read(2, 0); !errors.Is(err, ErrNoLedger) {
				t.Fatalf("deleted ledger: %v", err)
			}
			// Orphans (the unreferenced copy, or the old logs) are gone.
			st, err := e.Compact(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := len(logFiles(t, c))
			t.Logf("%d logs (uncrashed run: %d), second compaction %+v", got, want, st)
			if got > want+1 {
				t.Fatalf("%d logs after reopen and compaction, uncrashed run had %d", got, want)
			}
			for i := int64(0); i < 60; i++ {
				checkEntry(t, e, 1, i)
			}
		})
	}
}

// TestBackgroundCompaction: the compactor runs on its interval.
func TestBackgroundCompaction(t *testing.T) {
	clk := newManualClock()
	fs := vfs.NewMem()
	cfg := testConfig(fs)
	cfg.Clock = clk
	cfg.JournalGroupWindow = 0
	cfg.CompactInterval = time.Minute
	cfg.EntryLogMaxSize = 1 << 10
	e := open(t, cfg)
	addMany(t, e, 1, 0, 20)
	flush(t, e)
	addMany(t, e, 2, 0, 20)
	flush(t, e)
	if err := e.DeleteLedger(1); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "compactor timer armed", 5*time.Second, func() bool { return clk.armedWithin(time.Minute) > 0 })
	clk.Advance(time.Minute)
	testutil.Eventually(t, "background compaction", 5*time.Second, func() bool {
		return e.Stats().Compaction.LogsRemoved == 1
	})
}

// Close while range readers run: read-aheads they queue late are let go,
// so no log keeps a reference (which would keep a retired log's file).
func TestCloseReleasesQueuedReadAheads(t *testing.T) {
	for round := range 20 {
		e := open(t, testConfig(vfs.NewMem()))
		addMany(t, e, 1, 0, 200)
		flush(t, e)
		var wg sync.WaitGroup
		var reads atomic.Int64
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if _, err := e.ReadRange(1, 0, 199, 0); err != nil {
						return // ErrClosed
					}
					reads.Add(1)
				}
			}()
		}
		testutil.Eventually(t, "range readers under way", 10*time.Second, func() bool { return reads.Load() >= 8 })
		e.Close()
		wg.Wait()
		e.logs.mu.Lock()
		for id, lf := range e.logs.files {
			if lf.refs != 0 {
				t.Errorf("round %d: log %d holds %d references after Close", round, id, lf.refs)
			}
		}
		e.logs.mu.Unlock()
	}
}
