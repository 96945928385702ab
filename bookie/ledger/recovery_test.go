package ledger

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/ledger/core"
)

// abandon appends n entries with a fresh client, then closes the client
// without closing the ledger (the writer's process is gone; the ledger
// stays OPEN).
func abandon(t *testing.T, e *env, o CreateOptions, n int64) core.Metadata {
	t.Helper()
	ctx := testCtx(t)
	c := e.client()
	w, err := c.Create(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	md := w.Metadata()
	c.Close()
	if got, err := e.client().Get(ctx, w.ID()); err != nil || got.State != core.StateOpen {
		t.Fatalf("abandoned ledger: %+v, %v", got, err)
	}
	return md
}

func lengthThrough(last int64) int64 {
	var n int64
	for i := range last + 1 {
		n += int64(len(payload(i)))
	}
	return n
}

// TestRecoverAbandoned: a writer that never closed its ledger, with none
// or one entry written (so every bookie's LAC is -1), or several with a
// bookie of the ensemble down: recovery closes the ledger at the last
// confirmed entry, with its length.
func TestRecoverAbandoned(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       CreateOptions
		n       int64
		bookies int
		down    int // ensemble index of a bookie stopped before recovery; -1: none
	}{
		{"empty", CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2}, 0, 3, -1},
		{"one entry", CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2}, 1, 3, -1},
		{"one entry, one bookie down", CreateOptions{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}, 1, 3, 1},
		{"bookie down", CreateOptions{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}, 5, 3, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.bookies)
			ctx := testCtx(t)
			md := abandon(t, e, tc.o, tc.n)
			seg := md.Segments[0]
			if tc.n <= 1 {
				for _, b := range seg.Ensemble {
					if lac, err := e.direct(b).ReadLAC(ctx, md.LedgerID, core.NoEntry, 0); err == nil && lac != core.NoEntry {
						t.Fatalf("bookie %s LAC %d before recovery", b, lac)
					}
				}
			}
			if tc.down >= 0 {
				e.stop(string(seg.Ensemble[tc.down]))
			}
			c := e.client()
			start := time.Now()
			got, err := c.OpenForTakeover(ctx, md.LedgerID, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != core.StateClosed || got.LastEntryID != tc.n-1 || got.Length != lengthThrough(tc.n-1) {
				t.Fatalf("recovered %+v; want CLOSED at %d, length %d", got, tc.n-1, lengthThrough(tc.n-1))
			}
			r, err := c.OpenReader(ctx, md.LedgerID)
			if err != nil {
				t.Fatal(err)
			}
			if tc.n > 0 {
				checkRead(t, r, 0, tc.n-1)
			}
			t.Logf("recovered in %v", time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestRecoverLastSegmentOnly: a ledger with two segments (a bookie was
// replaced), abandoned. Recovery fences, reads and rewrites only on
// bookies of the last segment: the replaced bookie, back up with its old
// data, is never contacted.
func TestRecoverLastSegmentOnly(t *testing.T) {
	e := newEnv(t, 4)
	ctx := testCtx(t)
	a := e.client()
	w, err := a.Create(ctx, CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(20) {
		if _, err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	gone := w.Metadata().Segments[0].Ensemble[0]
	e.stop(string(gone))
	for i := int64(20); i < 40; i++ {
		if _, err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	md := w.Metadata()
	if len(md.Segments) != 2 {
		t.Fatalf("segments %+v", md.Segments)
	}
	a.Close() // abandoned
	e.restart(string(gone), false)

	ft := &faultTransport{}
	var (
		mu      sync.Mutex
		touched = map[string][]string{}
	)
	ft.setHook(func(_ context.Context, op, b string, _ int64) error {
		mu.Lock()
		touched[b] = append(touched[b], op)
		mu.Unlock()
		return nil
	})
	b := e.client(func(c *Config) { c.Transport = ft })
	got, err := b.OpenForTakeover(ctx, w.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.LastEntryID != 39 || got.Length != lengthThrough(39) || len(got.Segments) != 2 {
		t.Fatalf("recovered %+v", got)
	}
	last := md.Segments[1].Ensemble
	mu.Lock()
	for bk, ops := range touched {
		if !slices.Contains(last, core.BookieID(bk)) {
			t.Errorf("recovery sent %v to bookie %s, outside the last segment %v", ops, bk, last)
		}
	}
	mu.Unlock()
	ft.setHook(nil)
	r, err := b.OpenReader(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, r, 0, 39)
	t.Logf("segments %+v; recovery touched %v", got.Segments, touched)
}

// TestRecoveryNeverClosesShort: when the copies of the last segment are
// all lost (the bookies came back as new instances with empty disks),
// recovery cannot decide and keeps retrying: the ledger stays
// IN_RECOVERY, never CLOSED short.
func TestRecoveryNeverClosesShort(t *testing.T) {
	e := newEnv(t, 3)
	ctx := testCtx(t)
	md := abandon(t, e, CreateOptions{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2}, 5)
	for _, b := range md.Segments[0].Ensemble {
		e.stop(string(b))
		e.restart(string(b), true)
	}
	c := e.client()
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if got, err := c.OpenForTakeover(tctx, md.LedgerID, nil); err == nil {
		t.Fatalf("recovery over wiped bookies closed the ledger: %+v", got)
	}
	if got, err := c.Get(ctx, md.LedgerID); err != nil || got.State != core.StateInRecovery {
		t.Fatalf("after an undecided recovery: %+v, %v; want IN_RECOVERY", got, err)
	}
}

// TestRecoverReplacesBookie: E=3 Qw=2 Qa=2 over four bookies; the writer
// appends and is abandoned; a bookie of the last segment stops. Every
// recovered entry in its write sets needs a rewrite it cannot take, and
// with Qw = Qa the rewrite cannot reach Qa without it: recovery replaces
// it with the fourth bookie (a new segment, recorded with the fenced
// one) instead of waiting for it, closes at or after every acknowledged
// entry, and every entry reads back.
func TestRecoverReplacesBookie(t *testing.T) {
	e := newEnv(t, 4)
	ctx := testCtx(t)
	o := CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2}
	// The last entries' adds reach the bookies without their LAC moving
	// past them: the bookies' LAC lags the writer's by one entry, so the
	// last acknowledged entry is past every LAC and must be rewritten.
	const n = 30
	md := abandon(t, e, o, n)
	seg := md.Segments[len(md.Segments)-1]
	// Stop a bookie of entry n-1's write set: its rewrite needs it.
	victim := seg.Ensemble[core.WriteSet(n-1, 3, 2)[1]]
	e.stop(string(victim))
	c := e.client()
	start := time.Now()
	got, err := c.OpenForTakeover(ctx, md.LedgerID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != core.StateClosed || got.LastEntryID != n-1 || got.Length != lengthThrough(n-1) {
		t.Fatalf("recovered %+v; want CLOSED at %d, length %d", got, n-1, lengthThrough(n-1))
	}
	if len(got.Segments) != len(md.Segments)+1 || got.FencedSegment == nil || !slices.Equal(got.FencedSegment.Ensemble, seg.Ensemble) {
		t.Fatalf("segments %+v, fenced %+v; want a new segment after %+v", got.Segments, got.FencedSegment, md.Segments)
	}
	last := got.Segments[len(got.Segments)-1]
	if slices.Contains(last.Ensemble, victim) || last.FirstEntry > n-1 || last.FirstEntry <= seg.FirstEntry {
		t.Fatalf("new segment %+v (stopped %s, old %+v)", last, victim, seg)
	}
	for i, b := range last.Ensemble {
		if b != seg.Ensemble[i] && (seg.Ensemble[i] != victim || last.Instances[i] != e.bookie(string(b)).b.Instance()) {
			t.Fatalf("ensemble %v → %v (instances %v): more than %s replaced", seg.Ensemble, last.Ensemble, last.Instances, victim)
		}
	}
	stored, err := c.Get(ctx, md.LedgerID)
	if err != nil || stored.State != core.StateClosed || len(stored.Segments) != len(got.Segments) {
		t.Fatalf("stored %+v, %v", stored, err)
	}
	r, err := c.OpenReader(ctx, md.LedgerID)
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, r, 0, n-1)
	t.Logf("stopped %s; recovered in %v; segments %+v", victim, time.Since(start).Round(time.Millisecond), got.Segments)
}
