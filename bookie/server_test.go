package bookie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/storage"
	"github.com/stratamesh/strata/internal/testutil"
)

// TestRoundTripEveryRPC exercises each RPC over a real listener.
func TestRoundTripEveryRPC(t *testing.T) {
	h := startHarness(t)
	c := h.dial(t, "")
	ctx := testCtx(t)

	info, err := c.Info(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if info.BookieID != "b1" || info.Instance != h.instance || info.Address != h.addr || info.NumLedgers != 0 ||
		info.FreeBytes != 1<<30 || info.TotalBytes != 2<<30 || info.ReadOnly {
		t.Fatalf("info = %+v", info)
	}

	s := openAdds(t, c)
	for e := range int64(10) {
		if err := addSync(t, s, addReq(1, e)); err != nil {
			t.Fatalf("add %d: %v", e, err)
		}
	}

	e3, err := c.Read(ctx, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if e3.LedgerID != 1 || e3.EntryID != 3 || e3.LAC != 2 || string(e3.Payload) != "l1-e3" {
		t.Fatalf("read = %+v", e3)
	}

	all, err := c.ReadRange(ctx, 1, 0, 9, 0)
	if err != nil || len(all) != 10 {
		t.Fatalf("range 0..9 = %d entries, %v", len(all), err)
	}
	for i, e := range all {
		if e.EntryID != int64(i) || string(e.Payload) != fmt.Sprintf("l1-e%d", i) {
			t.Fatalf("range entry %d = %+v", i, e)
		}
	}
	// Beyond what is stored: stops at the first missing entry.
	if es, err := c.ReadRange(ctx, 1, 5, 1000, 0); err != nil || len(es) != 5 || es[4].EntryID != 9 {
		t.Fatalf("range 5..1000 = %v, %v", es, err)
	}
	// A byte limit smaller than one entry still returns the first; each
	// entry counts its payload (5 bytes) plus the 32-byte envelope.
	if es, err := c.ReadRange(ctx, 1, 0, 9, 1); err != nil || len(es) != 1 {
		t.Fatalf("range with max_bytes 1 = %v, %v", es, err)
	}
	if es, err := c.ReadRange(ctx, 1, 0, 9, 3*(5+entryEnvelope)); err != nil || len(es) != 3 {
		t.Fatalf("range with max_bytes for 3 = %d entries, %v", len(es), err)
	}

	if lac, err := c.ReadLAC(ctx, 1, storage.NoEntry, 0); err != nil || lac != 8 {
		t.Fatalf("ReadLAC = %d, %v; want 8", lac, err)
	}

	if lac, err := c.Fence(ctx, 1, key); err != nil || lac != 8 {
		t.Fatalf("Fence = %d, %v; want 8", lac, err)
	}
	if err := addSync(t, s, addReq(1, 10)); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("add after fence: %v", err)
	}
	rec := addReq(1, 10)
	rec.Recovery = true
	if err := addSync(t, s, rec); err != nil {
		t.Fatalf("recovery add after fence: %v", err)
	}

	// A recovery read fences ledger 2 and reports its LAC, also when the
	// entry is missing.
	for e := range int64(3) {
		if err := addSync(t, s, addReq(2, e)); err != nil {
			t.Fatal(err)
		}
	}
	es, lac, err := c.RecoveryRead(ctx, 2, 1, 5, key)
	if err != nil || lac != 1 || len(es) != 2 || es[0].EntryID != 1 {
		t.Fatalf("RecoveryRead = %v, lac %d, %v", es, lac, err)
	}
	if _, lac, err := c.RecoveryRead(ctx, 2, 7, 7, key); !errors.Is(err, storage.ErrNoEntry) || lac != 1 {
		t.Fatalf("RecoveryRead of a missing entry: lac %d, %v", lac, err)
	}
	if err := addSync(t, s, addReq(2, 3)); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("add after recovery read: %v", err)
	}

	info, err = c.Info(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []storage.LedgerInfo{
		{LedgerID: 1, LAC: 9, LastEntry: 10, Entries: 11, Bytes: 10*5 + 6, Fenced: true},
		{LedgerID: 2, LAC: 1, LastEntry: 2, Entries: 3, Bytes: 15, Fenced: true},
	}
	if info.NumLedgers != 2 || !slices.Equal(info.Ledgers, want) {
		t.Fatalf("info ledgers = %d %+v, want %+v", info.NumLedgers, info.Ledgers, want)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(addReq(3, 0), func(error) { t.Error("done called after a failed Send") }); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
}

// TestDialLearnsInstance: without an instance, Dial asks Info.
func TestDialLearnsInstance(t *testing.T) {
	h := startHarness(t)
	c, err := Dial(testCtx(t), h.addr, DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Instance() != h.instance || c.Addr() != h.addr {
		t.Fatalf("instance %q addr %q", c.Instance(), c.Addr())
	}
}

type addOutcome struct {
	entry int64
	err   error
}

// sendAll sends adds of entries 0..n-1 of ledger l on s; each outcome goes
// to the returned channel (in completion order).
func sendAll(t *testing.T, s *AddStream, l int64, n int) <-chan addOutcome {
	t.Helper()
	out := make(chan addOutcome, n)
	for e := range int64(n) {
		if err := s.Send(addReq(l, e), func(err error) { out <- addOutcome{e, err} }); err != nil {
			t.Fatalf("send %d: %v", e, err)
		}
	}
	return out
}

// TestAddPipelinedOutOfOrder: thousands of adds are in flight at once on
// one stream and complete in an order unrelated to the order sent; each
// outcome reaches its own callback.
func TestAddPipelinedOutOfOrder(t *testing.T) {
	const n = 2000
	h := startHarness(t)
	c := h.dial(t, "")
	s := openAdds(t, c)
	h.mem.Hold(true)

	out := sendAll(t, s, 1, n)
	took := testutil.Eventually(t, "all adds in flight", 20*time.Second, func() bool { return h.mem.Held() == n })
	t.Logf("%d adds in flight after %v", n, took)
	if s.Pending() != n {
		t.Fatalf("pending = %d", s.Pending())
	}
	// Complete them last first: the responses come back in that order.
	h.mem.ReleaseHeld(func(n int, swap func(i, j int)) {
		for i := range n / 2 {
			swap(i, n-1-i)
		}
	})
	for i := range n {
		o := recv(t, out, 10*time.Second, "add outcome")
		if o.err != nil || o.entry != int64(n-1-i) {
			t.Fatalf("outcome %d = %+v, want entry %d ok", i, o, n-1-i)
		}
	}

	// A shuffled completion order, with some adds refused: each callback
	// gets its own entry's outcome.
	if _, err := c.Fence(testCtx(t), 2, key); err != nil {
		t.Fatal(err)
	}
	outs := make(chan addOutcome, n)
	for e := range int64(n) {
		l := int64(3)
		if e%3 == 0 {
			l = 2 // fenced
		}
		if err := s.Send(addReq(l, e), func(err error) { outs <- addOutcome{e, err} }); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, "second batch in flight", 20*time.Second, func() bool { return h.mem.Held() == n })
	rng := rand.New(rand.NewPCG(1, 2))
	h.mem.ReleaseHeld(rng.Shuffle)
	seen := make([]bool, n)
	inOrder := true
	for i := range n {
		o := recv(t, outs, 10*time.Second, "add outcome")
		seen[o.entry] = true
		inOrder = inOrder && o.entry == int64(i)
		wantFenced := o.entry%3 == 0
		if errors.Is(o.err, storage.ErrFenced) != wantFenced || (!wantFenced && o.err != nil) {
			t.Fatalf("entry %d: %v (fenced expected: %v)", o.entry, o.err, wantFenced)
		}
	}
	if inOrder || slices.Contains(seen, false) {
		t.Fatalf("completions in send order %v, all seen %v", inOrder, !slices.Contains(seen, false))
	}
	if s.Pending() != 0 {
		t.Fatalf("pending = %d", s.Pending())
	}
}

// TestAddStreamBoundsInFlight: the server takes at most MaxAddsInFlight
// adds of a stream at once; the rest wait in the client and in flow
// control, and all complete as slots free up.
func TestAddStreamBoundsInFlight(t *testing.T) {
	const limit, n = 8, 40
	h := startHarness(t, func(c *ServerConfig) { c.MaxAddsInFlight = limit })
	c := h.dial(t, "")
	s := openAdds(t, c)
	h.mem.Hold(true)

	out := make(chan addOutcome, n)
	var wg sync.WaitGroup
	wg.Go(func() {
		for e := range int64(n) {
			if err := s.Send(addReq(1, e), func(err error) { out <- addOutcome{e, err} }); err != nil {
				t.Errorf("send %d: %v", e, err)
				return
			}
		}
	})
	for done := 0; done < n; done += limit {
		testutil.Eventually(t, "a full window held", 10*time.Second, func() bool { return h.mem.Held() == limit })
		h.mem.ReleaseHeld(nil)
		for range limit {
			if o := recv(t, out, 10*time.Second, "add outcome"); o.err != nil {
				t.Fatalf("entry %d: %v", o.entry, o.err)
			}
		}
	}
	wg.Wait()
	if got := h.mem.MaxHeld(); got != limit {
		t.Fatalf("at most %d adds were in the engine at once; want %d", got, limit)
	}
}

// TestReadLACLongPoll: a long poll wakes on a later add, times out with the
// current LAC otherwise, is capped by MaxLongPoll, and ends with
// CODE_CLOSED when the server shuts down.
func TestReadLACLongPoll(t *testing.T) {
	h := startHarness(t, func(c *ServerConfig) { c.MaxLongPoll = 300 * time.Millisecond })
	waiting := make(chan int64, 16)
	h.mem.SetFault(func(op string, ledger, _ int64) error {
		if op == "wait_lac" {
			select {
			case waiting <- ledger:
			default:
			}
		}
		return nil
	})
	c := h.dial(t, "")
	s := openAdds(t, c)
	ctx := testCtx(t)
	for e := range int64(2) {
		if err := addSync(t, s, addReq(1, e)); err != nil {
			t.Fatal(err)
		}
	}

	// Wakes on a later add.
	type res struct {
		lac int64
		err error
	}
	got := make(chan res, 1)
	go func() {
		lac, err := c.ReadLAC(ctx, 1, 0, 10*time.Second)
		got <- res{lac, err}
	}()
	recv(t, waiting, 10*time.Second, "long poll waiting")
	if err := addSync(t, s, addReq(1, 2)); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, got, 10*time.Second, "long poll answer"); r.err != nil || r.lac != 1 {
		t.Fatalf("long poll = %+v, want LAC 1", r)
	}

	// Already past wait_after: answers at once.
	if lac, err := c.ReadLAC(ctx, 1, storage.NoEntry, 10*time.Second); err != nil || lac != 1 {
		t.Fatalf("ReadLAC past wait_after = %d, %v", lac, err)
	}

	// Times out with the current LAC.
	start := time.Now()
	lac, err := c.ReadLAC(ctx, 1, 1, 100*time.Millisecond)
	if el := time.Since(start); err != nil || lac != 1 || el < 100*time.Millisecond {
		t.Fatalf("timed-out long poll = %d, %v after %v", lac, err, el)
	}
	// The server's cap (300 ms) shortens a longer timeout.
	start = time.Now()
	lac, err = c.ReadLAC(ctx, 1, 1, time.Hour)
	if el := time.Since(start); err != nil || lac != 1 || el < 300*time.Millisecond || el > 20*time.Second {
		t.Fatalf("capped long poll = %d, %v after %v", lac, err, el)
	}
	t.Logf("capped long poll answered after %v", time.Since(start))

	if _, err := c.ReadLAC(ctx, 99, 0, time.Second); !errors.Is(err, storage.ErrNoLedger) {
		t.Fatalf("long poll on an unknown ledger: %v", err)
	}

	// A fence ends a waiting long poll with the current LAC (the ledger's
	// writer is gone), and a fenced ledger's long poll does not wait. A
	// server whose cap is a minute, so that only the fence can end the
	// poll in time.
	hf := startHarness(t, func(c *ServerConfig) { c.MaxLongPoll = time.Minute })
	hf.mem.SetFault(func(op string, _, _ int64) error {
		if op == "wait_lac" {
			select {
			case waiting <- 1:
			default:
			}
		}
		return nil
	})
	c = hf.dial(t, "")
	s = openAdds(t, c)
	for e := range int64(3) {
		if err := addSync(t, s, addReq(1, e)); err != nil {
			t.Fatal(err)
		}
	}
	for len(waiting) > 0 {
		<-waiting
	}
	go func() {
		lac, err := c.ReadLAC(ctx, 1, 1, time.Minute)
		got <- res{lac, err}
	}()
	recv(t, waiting, 10*time.Second, "long poll waiting")
	if _, err := c.Fence(ctx, 1, key); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, got, 10*time.Second, "long poll answer at a fence"); r.err != nil || r.lac != 1 {
		t.Fatalf("long poll at a fence = %+v, want LAC 1", r)
	}
	if lac, err := c.ReadLAC(ctx, 1, 1, time.Minute); err != nil || lac != 1 {
		t.Fatalf("long poll on a fenced ledger = %d, %v", lac, err)
	}

	// A delete ends a waiting long poll with CODE_NO_LEDGER.
	if err := addSync(t, s, addReq(3, 0)); err != nil {
		t.Fatal(err)
	}
	for len(waiting) > 0 {
		<-waiting
	}
	go func() {
		lac, err := c.ReadLAC(ctx, 3, 5, time.Minute)
		got <- res{lac, err}
	}()
	recv(t, waiting, 10*time.Second, "long poll waiting")
	if err := hf.mem.DeleteLedger(3); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, got, 10*time.Second, "long poll answer at a delete"); !errors.Is(r.err, storage.ErrNoLedger) {
		t.Fatalf("long poll at a delete = %+v", r)
	}

	// Shutdown ends a waiting long poll with CODE_CLOSED.
	h2 := startHarness(t, func(c *ServerConfig) { c.MaxLongPoll = time.Minute })
	h2.mem.SetFault(func(op string, _, _ int64) error {
		if op == "wait_lac" {
			select {
			case waiting <- 7:
			default:
			}
		}
		return nil
	})
	c2 := h2.dial(t, "")
	if err := addSync(t, openAdds(t, c2), addReq(7, 0)); err != nil {
		t.Fatal(err)
	}
	for len(waiting) > 0 {
		<-waiting
	}
	go func() {
		lac, err := c2.ReadLAC(ctx, 7, 5, time.Minute)
		got <- res{lac, err}
	}()
	recv(t, waiting, 10*time.Second, "long poll waiting")
	h2.srv.Shutdown()
	if r := recv(t, got, 10*time.Second, "long poll answer at shutdown"); !errors.Is(r.err, storage.ErrClosed) || r.lac != storage.NoEntry {
		t.Fatalf("long poll at shutdown = %+v", r)
	}
}

// TestWrongInstance: every request naming another instance is refused
// with ErrWrongInstance, reaches nothing in the engine, and one such add
// on a stream does not end the stream.
func TestWrongInstance(t *testing.T) {
	h := startHarness(t)
	good := h.dial(t, "")
	gs := openAdds(t, good)
	if err := addSync(t, gs, addReq(1, 0)); err != nil {
		t.Fatal(err)
	}
	old := h.dial(t, "00000000-0000-0000-0000-000000000000")
	ctx := testCtx(t)
	s := openAdds(t, old)
	checks := map[string]error{
		"add": addSync(t, s, addReq(1, 1)),
	}
	_, checks["read"] = old.Read(ctx, 1, 0)
	_, checks["read range"] = old.ReadRange(ctx, 1, 0, 5, 0)
	_, _, checks["recovery read"] = old.RecoveryRead(ctx, 1, 0, 0, key)
	_, checks["read lac"] = old.ReadLAC(ctx, 1, -1, 0)
	_, checks["long poll"] = old.ReadLAC(ctx, 1, 5, time.Second)
	_, checks["fence"] = old.Fence(ctx, 1, key)
	_, checks["info"] = old.Info(ctx, true)
	for what, err := range checks {
		var ce *CodeError
		if !errors.Is(err, ErrWrongInstance) || !errors.As(err, &ce) || ce.Code.String() != "CODE_WRONG_INSTANCE" {
			t.Errorf("%s: %v, want ErrWrongInstance", what, err)
		}
	}
	// The stream with the refused add still works for adds it may take:
	// here none (same instance), so check it still answers.
	if err := addSync(t, s, addReq(1, 2)); !errors.Is(err, ErrWrongInstance) {
		t.Fatalf("second add on the stream: %v", err)
	}
	if h.mem.Adds() != 1 || h.mem.Ledgers()[0].Fenced || h.mem.Ledgers()[0].Entries != 1 {
		t.Fatalf("the engine saw refused requests: adds %d, ledgers %+v", h.mem.Adds(), h.mem.Ledgers())
	}
	// On one raw stream, a wrong-instance add followed by a right one.
	raw, err := good.rpc.Add(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.CloseSend()
	for i, inst := range []string{"someone-else", h.instance} {
		req := rawAdd(1, 1)
		req.Instance, req.Entries[0].Tag = inst, uint64(i)
		if err := raw.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	got := rawResults(t, raw, 2, 0)
	for i, want := range []string{"CODE_WRONG_INSTANCE", "CODE_OK"} {
		if r := got.results[uint64(i)]; r.GetCode().String() != want {
			t.Fatalf("raw stream result %d = %v; want %s", i, r, want)
		}
	}
	if e, err := good.Read(ctx, 1, 1); err != nil || !bytes.Equal(e.Payload, []byte("p")) {
		t.Fatalf("read = %+v, %v", e, err)
	}
}

// TestShutdownEndsStreams: Shutdown ends open Add streams (pending adds
// fail with ErrStreamClosed) and refuses later requests with ErrClosed.
func TestShutdownEndsStreams(t *testing.T) {
	h := startHarness(t)
	c := h.dial(t, "")
	s := openAdds(t, c)
	h.mem.Hold(true)
	out := sendAll(t, s, 1, 3)
	testutil.Eventually(t, "adds in flight", 10*time.Second, func() bool { return h.mem.Held() == 3 })
	h.srv.Shutdown()
	for range 3 {
		if o := recv(t, out, 10*time.Second, "add outcome"); !errors.Is(o.err, ErrStreamClosed) {
			t.Fatalf("pending add at shutdown: %v", o.err)
		}
	}
	if err := s.Send(addReq(1, 9), func(error) {}); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("Send on a broken stream: %v", err)
	}
	if _, err := c.Read(testCtx(t), 1, 0); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("read after shutdown: %v", err)
	}
	s2 := openAdds(t, c)
	if err := addSync(t, s2, addReq(1, 5)); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("add on a stream opened after shutdown: %v", err)
	}
	h.mem.ReleaseHeld(nil) // the engine completes them late: nobody listens
}

// TestAddStreamCloseWaitsAndCancels: Close waits for pending adds; when
// its context ends first it cancels them.
func TestAddStreamCloseWaitsAndCancels(t *testing.T) {
	h := startHarness(t)
	c := h.dial(t, "")
	s := openAdds(t, c)
	h.mem.Hold(true)
	out := sendAll(t, s, 1, 5)
	testutil.Eventually(t, "adds in flight", 10*time.Second, func() bool { return h.mem.Held() == 5 })
	closed := make(chan error, 1)
	go func() { closed <- s.Close(testCtx(t)) }()
	testutil.Eventually(t, "Close to begin", 10*time.Second, func() bool {
		return s.Send(addReq(1, 9), func(error) {}) != nil
	})
	if len(closed) != 0 {
		t.Fatal("Close returned with adds pending")
	}
	h.mem.ReleaseHeld(nil)
	if err := recv(t, closed, 10*time.Second, "Close"); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if o := recv(t, out, time.Second, "outcome"); o.err != nil {
			t.Fatal(o.err)
		}
	}

	s2 := openAdds(t, c)
	out = sendAll(t, s2, 2, 4)
	testutil.Eventually(t, "adds in flight", 10*time.Second, func() bool { return h.mem.Held() == 4 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s2.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with an ended context: %v", err)
	}
	for range 4 {
		if o := recv(t, out, 10*time.Second, "outcome"); !errors.Is(o.err, ErrStreamClosed) {
			t.Fatalf("pending add after a canceled Close: %v", o.err)
		}
	}
	h.mem.ReleaseHeld(nil)
}
