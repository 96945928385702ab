package storage

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stratamesh/strata/internal/vfs"
)

// TestConcurrentCompactDeleteFlush: compactions, flushes, deletes, adds
// and recovery rewrites concurrently; then every acked entry of a live
// ledger reads back and no deleted ledger does, before and after a crash.
func TestConcurrentCompactDeleteFlush(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig(mem)
	cfg.EntryLogMaxSize = 2 << 10
	cfg.CompactThreshold = 0.9
	e := open(t, cfg)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var errMu sync.Mutex
	var bgErr error
	for _, f := range []func() error{
		func() error { _, err := e.Compact(context.Background()); return err },
		func() error { return e.Flush(context.Background()) },
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := f(); err != nil {
					errMu.Lock()
					bgErr = err
					errMu.Unlock()
					return
				}
			}
		}()
	}
	live := map[int64]int64{}
	for round := int64(0); round < 60; round++ {
		// ledger round*2 stays, round*2+1 is deleted later
		keep, drop := 1000+round, 2000+round
		addMany(t, e, keep, 0, 8)
		addMany(t, e, drop, 0, 8)
		live[keep] = 8
		if round > 2 {
			if err := e.DeleteLedger(2000 + round - 2); err != nil {
				t.Fatal(err)
			}
		}
		// rewrite a few entries of an older kept ledger (recovery rewrites)
		if round > 3 {
			l := 1000 + round - 3
			for i := int64(0); i < 3; i++ {
				r := addReq(l, i)
				r.Recovery = true
				mustAdd(t, e, r)
			}
		}
	}
	close(stop)
	wg.Wait()
	if bgErr != nil {
		t.Fatal(bgErr)
	}
	e.compactStats.Lock()
	compacted := e.compactStats.LogsCompacted
	e.compactStats.Unlock()
	if compacted == 0 {
		t.Fatal("no log was compacted while adds, flushes and deletes ran")
	}
	check := func(e *Engine, when string) {
		for l, n := range live {
			for i := int64(0); i < n; i++ {
				if _, err := e.Read(l, i); err != nil {
					t.Fatalf("%s: %d/%d: %v", when, l, i, err)
				}
			}
		}
		for round := int64(0); round < 58; round++ {
			if _, err := e.Read(2000+round, 0); round > 0 && !errors.Is(err, ErrNoLedger) {
				t.Fatalf("%s: deleted ledger %d: %v", when, 2000+round, err)
			}
		}
	}
	check(e, "live")
	crashed := mem.CrashClone()
	e.Close()
	e2 := open(t, cfg2(cfg, crashed))
	check(e2, "after crash")
	if _, err := e2.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	check(e2, "after crash and compaction")
}
