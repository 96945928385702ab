package ledger

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/ledger/core"
)

// stalledWriter returns a writer (E=Qw=Qa=3) whose adds to one bookie
// never get an answer, with n appends pending, and their outcomes.
func stalledWriter(t *testing.T, e *env, n int64) (*Client, *Writer, *sync.WaitGroup, *[]error) {
	t.Helper()
	ft := &faultTransport{}
	c := e.client(func(c *Config) { c.Transport = ft; c.AddTimeout = time.Minute })
	w, err := c.Create(testCtx(t), CreateOptions{Ensemble: 3, WriteQuorum: 3, AckQuorum: 3})
	if err != nil {
		t.Fatal(err)
	}
	stalled := string(w.Metadata().Segments[0].Ensemble[0])
	ft.setHook(func(ctx context.Context, op, b string, _ int64) error {
		if op == "add" && b == stalled {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for i := range n {
		wg.Add(1)
		w.AppendAsync(payload(i), func(id int64, err error) {
			defer wg.Done()
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	return c, w, &wg, &errs
}

// TestCloseGivesUp: Close with appends that cannot complete returns when
// its ctx ends, fails them with ErrWriterClosed and leaves the ledger OPEN.
func TestCloseGivesUp(t *testing.T) {
	e := newEnv(t, 3)
	ctx := testCtx(t)
	c, w, wg, errs := stalledWriter(t, e, 5)
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := w.Close(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v; want the deadline", err)
	}
	wg.Wait()
	for _, err := range *errs {
		if !errors.Is(err, ErrWriterClosed) {
			t.Fatalf("pending append ended with %v", err)
		}
	}
	if md, err := c.Get(ctx, w.ID()); err != nil || md.State != core.StateOpen {
		t.Fatalf("after giving up: %+v, %v", md, err)
	}
	if _, err := w.Append(ctx, []byte("x")); !errors.Is(err, ErrWriterClosed) {
		t.Fatalf("append after Close: %v", err)
	}
}

// TestClientCloseAbandonsWriters: Client.Close stops a writer with
// appends in flight (they fail with ErrWriterClosed), leaves its ledger
// OPEN, and another client recovers it.
func TestClientCloseAbandonsWriters(t *testing.T) {
	e := newEnv(t, 3)
	ctx := testCtx(t)
	c, w, wg, errs := stalledWriter(t, e, 5)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, err := range *errs {
		if !errors.Is(err, ErrWriterClosed) {
			t.Fatalf("pending append ended with %v", err)
		}
	}
	if _, err := w.Close(ctx); !errors.Is(err, ErrWriterClosed) {
		t.Fatalf("Writer.Close after Client.Close: %v", err)
	}
	md, err := e.client().OpenForTakeover(ctx, w.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing was confirmed; the unconfirmed entries may or may not be
	// in the ledger, and it reads back either way.
	if md.State != core.StateClosed || md.LastEntryID > 4 {
		t.Fatalf("recovered %+v", md)
	}
	t.Logf("recovered an abandoned ledger of unconfirmed entries at %d", md.LastEntryID)
}
