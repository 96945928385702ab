package ledger

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/internal/testutil"
)

// pipeline appends payload(i), i = 0, 1, ..., with up to 64 appends in
// flight, until an append fails; it records the ids confirmed.
type pipeline struct {
	mu      sync.Mutex
	acked   []int64
	err     error
	stopped chan struct{}
}

func startPipeline(t *testing.T, w *Writer) *pipeline {
	p := &pipeline{stopped: make(chan struct{})}
	sem := make(chan struct{}, 64)
	go func() {
		defer close(p.stopped)
		var wg sync.WaitGroup
		defer wg.Wait()
		for i := int64(0); ; i++ {
			sem <- struct{}{}
			p.mu.Lock()
			failed := p.err != nil
			p.mu.Unlock()
			if failed {
				return
			}
			wg.Add(1)
			w.AppendAsync(payload(i), func(id int64, err error) {
				defer wg.Done()
				<-sem
				p.mu.Lock()
				defer p.mu.Unlock()
				if err != nil {
					if p.err == nil {
						p.err = err
					}
					return
				}
				if id != i {
					t.Errorf("append %d confirmed as %d", i, id)
				}
				p.acked = append(p.acked, id)
			})
		}
	}()
	return p
}

func (p *pipeline) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// checkTakenOver: the old writer's pipeline stopped with a fencing error,
// every entry it had confirmed is within the recovered ledger, the
// ledger reads back, and the old writer's next append fails.
func checkTakenOver(t *testing.T, p *pipeline, w *Writer, md core.Metadata, r *Reader) {
	t.Helper()
	ctx := testCtx(t)
	select {
	case <-p.stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("the old writer's appends never failed")
	}
	if !isTakeoverErr(p.err) {
		t.Fatalf("old writer ended with %v; want fenced, closed or recovering", p.err)
	}
	if len(p.acked) == 0 {
		t.Fatal("nothing was confirmed before the takeover")
	}
	if last := slices.Max(p.acked); last > md.LastEntryID {
		t.Fatalf("entry %d was confirmed to the old writer but the recovered ledger ends at %d", last, md.LastEntryID)
	}
	if md.State != core.StateClosed {
		t.Fatalf("recovered metadata in state %s", md.State)
	}
	var length int64
	for i := range md.LastEntryID + 1 {
		length += int64(len(payload(i)))
	}
	if md.Length != length {
		t.Fatalf("recovered length %d, want %d for entries 0..%d", md.Length, length, md.LastEntryID)
	}
	if md.LastEntryID >= 0 {
		checkRead(t, r, 0, md.LastEntryID)
	}
	if _, err := w.Append(ctx, []byte("after takeover")); !isTakeoverErr(err) {
		t.Fatalf("old writer's append after the takeover: %v", err)
	}
	t.Logf("old writer confirmed %d entries; recovered ledger ends at %d; old writer ended with: %v",
		len(p.acked), md.LastEntryID, p.err)
}

func isTakeoverErr(err error) bool {
	return errors.Is(err, ErrFenced) || errors.Is(err, ErrLedgerClosed) || errors.Is(err, ErrRecovering)
}

// TestTakeoverFencesWriter: client B recovers a ledger while writer A
// keeps appending; A's confirmed entries are all in B's ledger and A is
// fenced.
func TestTakeoverFencesWriter(t *testing.T) {
	e := newEnv(t, 4)
	ctx := testCtx(t)
	a, b := e.client(), e.client()
	w, err := a.Create(ctx, CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2, Password: []byte("pw")})
	if err != nil {
		t.Fatal(err)
	}
	p := startPipeline(t, w)
	testutil.Eventually(t, "200 confirmed appends", 20*time.Second, func() bool { return p.count() >= 200 })
	start := time.Now()
	md, err := b.OpenForTakeover(ctx, w.ID(), []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("takeover took %v", time.Since(start).Round(time.Millisecond))
	r, err := b.OpenReader(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	checkTakenOver(t, p, w, md, r)
	if _, err := w.Close(ctx); !isTakeoverErr(err) {
		t.Fatalf("Close of the fenced writer: %v", err)
	}
}

// TestTakeoverLostFence: E=3 Qw=3 Qa=2, and B's fence request to one
// bookie is lost. Fences of the other two cover every write set
// (Qw−Qa+1 = 2), and B's recovery reads fence the third, so A can
// confirm nothing more.
func TestTakeoverLostFence(t *testing.T) {
	e := newEnv(t, 3)
	ctx := testCtx(t)
	ft := &faultTransport{}
	a, b := e.client(), e.client(func(c *Config) { c.Transport = ft })
	w, err := a.Create(ctx, CreateOptions{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	lost := w.Metadata().Segments[0].Ensemble[0]
	var (
		mu     sync.Mutex
		fences []string
	)
	ft.setHook(func(ctx context.Context, op, bk string, _ int64) error {
		if op != "fence" {
			return nil
		}
		mu.Lock()
		fences = append(fences, bk)
		mu.Unlock()
		if bk == string(lost) {
			return errInjected
		}
		return nil
	})
	p := startPipeline(t, w)
	testutil.Eventually(t, "200 confirmed appends", 20*time.Second, func() bool { return p.count() >= 200 })
	md, err := b.OpenForTakeover(ctx, w.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.OpenReader(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	checkTakenOver(t, p, w, md, r)
	mu.Lock()
	if !slices.Contains(fences, string(lost)) {
		t.Fatalf("no fence was attempted on %s: %v", lost, fences)
	}
	mu.Unlock()
	// The bookie whose fence was lost is fenced all the same, by the
	// recovery reads.
	info, err := e.direct(lost).Info(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(info.Ledgers, func(l storageLedger) bool { return l.LedgerID == w.ID() })
	if i < 0 || !info.Ledgers[i].Fenced {
		t.Fatalf("bookie %s after recovery: %+v", lost, info.Ledgers)
	}
}

// TestTakeoverStopsEnsembleChange: once B has moved the ledger to
// IN_RECOVERY (its fences held back), A's ensemble change must fail its
// CAS and end A; B then closes the ledger with every entry A confirmed.
func TestTakeoverStopsEnsembleChange(t *testing.T) {
	e := newEnv(t, 4)
	ctx := testCtx(t)
	fa, fb := &faultTransport{}, &faultTransport{}
	a, b := e.client(func(c *Config) { c.Transport = fa }), e.client(func(c *Config) { c.Transport = fb })
	w, err := a.Create(ctx, CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range int64(n) {
		if _, err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	gate := make(chan struct{})
	fb.setHook(func(ctx context.Context, op, _ string, _ int64) error {
		if op == "fence" || op == "recovery_read" {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	type result struct {
		md  core.Metadata
		err error
	}
	recovered := make(chan result, 1)
	go func() {
		md, err := b.OpenForTakeover(ctx, w.ID(), nil)
		recovered <- result{md, err}
	}()
	waitState(t, a, w.ID(), core.StateInRecovery)

	// Now a bookie of A's ensemble fails: A changes its ensemble, and the
	// CAS, which requires OPEN at A's version, fails.
	failing := string(w.Metadata().Segments[0].Ensemble[core.WriteSet(n, 3, 2)[0]])
	fa.setHook(func(_ context.Context, op, bk string, _ int64) error {
		if op == "add" && bk == failing {
			return errInjected
		}
		return nil
	})
	if _, err := w.Append(ctx, payload(n)); !errors.Is(err, ErrRecovering) {
		t.Fatalf("append needing an ensemble change during recovery: %v; want ErrRecovering", err)
	}
	if md := w.Metadata(); len(md.Segments) != 1 {
		t.Fatalf("A's metadata has %d segments", len(md.Segments))
	}
	if md, err := a.Get(ctx, w.ID()); err != nil || md.State != core.StateInRecovery || len(md.Segments) != 1 {
		t.Fatalf("stored metadata %+v, %v; want IN_RECOVERY with one segment", md, err)
	}
	close(gate)
	res := <-recovered
	if res.err != nil {
		t.Fatal(res.err)
	}
	// Entry n may or may not have been stored on the bookie that took it;
	// recovery decides, once.
	if res.md.LastEntryID != n-1 && res.md.LastEntryID != n {
		t.Fatalf("recovered last entry %d, want %d or %d", res.md.LastEntryID, n-1, n)
	}
	r, err := b.OpenReader(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, r, 0, res.md.LastEntryID)
	t.Logf("recovered ledger ends at %d", res.md.LastEntryID)
}
