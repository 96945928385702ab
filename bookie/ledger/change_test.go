package ledger

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/internal/testutil"
)

// TestEnsembleChange: a bookie of the ensemble stops in the middle of
// 2,000 pipelined appends (E=3 Qw=2 Qa=2 over 4 bookies). Every append is
// confirmed, in order; the metadata gets a second segment, starting at
// the first entry unconfirmed when the bookie failed, with the fourth
// bookie in the stopped one's place; every entry from there, including
// those in flight to the old ensemble at the change, is on its whole
// write set of the new ensemble.
func TestEnsembleChange(t *testing.T) {
	start := time.Now()
	e := newEnv(t, 4)
	ctx := testCtx(t)
	// Pace the adds (each bookie's stream sends one every 0.5 ms), so
	// that the bookie stops with many of them in flight.
	ft := &faultTransport{}
	ft.setHook(func(ctx context.Context, op, _ string, _ int64) error {
		if op == "add" {
			sleepCtx(ctx, 500*time.Microsecond)
		}
		return nil
	})
	// The pacing holds each add in its session before it is sent, while
	// its AddTimeout runs from when it was queued: on a loaded host (a
	// -race CI run beside other packages) 0.5 ms sleeps take several
	// times that, and with the default 5 s the bookies still running
	// timed out too, leaving no replacement. A generous AddTimeout keeps
	// the test about the stopped bookie.
	c := e.client(func(c *Config) { c.Transport = ft; c.AddTimeout = 30 * time.Second })
	w, err := c.Create(ctx, CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	var (
		mu      sync.Mutex
		order   []int64
		errs    []error
		wg      sync.WaitGroup
		acked   atomic.Int64
		stopped = make(chan struct{})
	)
	victim := w.Metadata().Segments[0].Ensemble[1]
	var ackedAtStop int64
	go func() {
		defer close(stopped)
		testutil.Eventually(t, "500 confirmed appends", 20*time.Second, func() bool { return acked.Load() >= 500 })
		ackedAtStop = acked.Load()
		e.stop(string(victim))
	}()
	for i := range int64(n) {
		wg.Add(1)
		w.AppendAsync(payload(i), func(id int64, err error) {
			defer wg.Done()
			mu.Lock()
			order = append(order, id)
			if err != nil {
				errs = append(errs, err)
			}
			mu.Unlock()
			acked.Add(1)
		})
	}
	wg.Wait()
	<-stopped
	t.Logf("appends done at %v", time.Since(start).Round(time.Millisecond))
	if len(errs) > 0 {
		t.Fatalf("%d appends failed, first: %v", len(errs), errs[0])
	}
	if !slices.Equal(order, seq(0, n-1)) {
		t.Fatal("callbacks out of entry order")
	}
	md, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md.LastEntryID != n-1 || len(md.Segments) != 2 {
		t.Fatalf("closed metadata: last %d, segments %+v", md.LastEntryID, md.Segments)
	}
	old, cur := md.Segments[0], md.Segments[1]
	first := cur.FirstEntry
	if first < ackedAtStop || first > n-1 {
		t.Fatalf("second segment starts at %d; %d entries were confirmed when the bookie stopped", first, ackedAtStop)
	}
	for i, b := range cur.Ensemble {
		switch {
		case old.Ensemble[i] == victim && (b == victim || slices.Contains(old.Ensemble, b)):
			t.Fatalf("bookie %s replaced by %s", victim, b)
		case old.Ensemble[i] != victim && (b != old.Ensemble[i] || cur.Instances[i] != old.Instances[i]):
			t.Fatalf("ensemble %v → %v changed more than %s", old.Ensemble, cur.Ensemble, victim)
		}
	}
	// Each entry is on every bookie of its write set (the stopped one
	// aside), read directly, 100 ids per goroutine.
	var rg sync.WaitGroup
	for _, s := range md.Segments {
		for idx, b := range s.Ensemble {
			if b == victim {
				continue
			}
			bc := e.direct(b)
			lo, hi := s.FirstEntry, int64(n-1)
			if s.FirstEntry == 0 {
				hi = first - 1
			}
			for from := lo; from <= hi; from += 100 {
				rg.Go(func() {
					for id := from; id <= min(from+99, hi); id++ {
						if !slices.Contains(core.WriteSet(id, 3, 2), idx) {
							continue
						}
						en, err := bc.Read(ctx, w.ID(), id)
						if err != nil {
							t.Errorf("bookie %s (segment from %d) lacks entry %d: %v", b, s.FirstEntry, id, err)
							return
						}
						if p, _, err := openFrame(en.Payload, w.ID(), id); err != nil || !bytes.Equal(p, payload(id)) {
							t.Errorf("bookie %s entry %d: %q, %v", b, id, p, err)
							return
						}
					}
				})
			}
		}
	}
	rg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("direct reads done at %v", time.Since(start).Round(time.Millisecond))
	r, err := c.OpenReader(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, r, 0, n-1)
	t.Logf("bookie %s stopped after %d confirmed; new segment from entry %d, ensemble %v; test took %v",
		victim, ackedAtStop, first, cur.Ensemble, time.Since(start).Round(time.Millisecond))
}
