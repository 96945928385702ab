package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stratamesh/strata/internal/vfs"
)

func TestMain(m *testing.M) {
	// Nothing is ignored: the journal writer, flusher, compactor and
	// pebble's goroutines all stop in Close.
	goleak.VerifyTestMain(m)
}

const testDir = "/data"

// testConfig is a config on fsys with small sizes and no timed background
// work: flushes and compactions happen when a test asks.
func testConfig(fsys vfs.FS) Config {
	cfg := DefaultConfig()
	cfg.Dir = testDir
	cfg.FS = fsys
	cfg.FlushInterval = time.Hour
	cfg.CompactInterval = 0
	cfg.WriteCacheBytes = 64 << 20
	cfg.IndexCacheBytes = 1 << 20
	cfg.IndexMemTableBytes = 1 << 20
	cfg.JournalPreallocate = 16 << 10 // the reserve in small chunks: many fills
	cfg.EntryLogDirectIO = true       // MemFS then holds every log write to direct I/O's alignment
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}

// open opens an engine and closes it when the test ends.
func open(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e, err := Open(cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func key(l int64) []byte { return []byte(fmt.Sprintf("key-%d", l)) }

func payload(l, e int64) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("<%d/%d>", l, e)), int(1+e%7))
}

func addReq(l, e int64) AddRequest {
	return AddRequest{LedgerID: l, EntryID: e, LAC: e - 1, MasterKey: key(l), Payload: payload(l, e)}
}

// add adds synchronously and returns done's error.
func add(t testing.TB, e *Engine, req AddRequest) error {
	t.Helper()
	ch := make(chan error, 1)
	e.Add(req, func(err error) { ch <- err })
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("add %d/%d: done never ran", req.LedgerID, req.EntryID)
		return nil
	}
}

func mustAdd(t testing.TB, e *Engine, req AddRequest) {
	t.Helper()
	if err := add(t, e, req); err != nil {
		t.Fatalf("add %d/%d: %v", req.LedgerID, req.EntryID, err)
	}
}

// addMany adds entries 0..n-1 of ledger l pipelined and waits for all.
func addMany(t testing.TB, e *Engine, l int64, first, n int64) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := first; i < first+n; i++ {
		wg.Add(1)
		e.Add(addReq(l, i), func(err error) {
			if err != nil {
				errs <- fmt.Errorf("add %d/%d: %w", l, i, err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// checkEntry reads l/en and compares it with addReq(l, en).
func checkEntry(t testing.TB, e *Engine, l, en int64) {
	t.Helper()
	got, err := e.Read(l, en)
	if err != nil {
		t.Fatalf("read %d/%d: %v", l, en, err)
	}
	want := addReq(l, en)
	if got.LedgerID != l || got.EntryID != en || got.LAC != want.LAC || !bytes.Equal(got.Payload, want.Payload) {
		t.Fatalf("read %d/%d: got %+v", l, en, got)
	}
}

func flush(t testing.TB, e *Engine) {
	t.Helper()
	if err := e.Flush(context.Background()); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

func wantErr(t testing.TB, what string, got, want error) {
	t.Helper()
	if !errors.Is(got, want) {
		t.Fatalf("%s: got error %v, want %v", what, got, want)
	}
}

// manualClock is a Clock that moves only when told.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

func newManualClock() *manualClock { return &manualClock{now: time.Unix(1_000_000, 0)} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, ch: make(chan time.Time, 1), when: c.now.Add(d), active: true}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves time on and fires the timers that are due.
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for _, t := range c.timers {
		if t.active && !t.when.After(c.now) {
			t.active = false
			select {
			case t.ch <- c.now:
			default:
			}
		}
	}
}

// armedWithin counts active timers due within d.
func (c *manualClock) armedWithin(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if t.active && !t.when.After(c.now.Add(d)) {
			n++
		}
	}
	return n
}

type manualTimer struct {
	c      *manualClock
	ch     chan time.Time
	when   time.Time
	active bool
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	select {
	case <-t.ch:
	default:
	}
	return was
}

func (t *manualTimer) Reset(d time.Duration) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	select {
	case <-t.ch:
	default:
	}
	t.when, t.active = t.c.now.Add(d), true
}

// settleReserve waits until e's journal zero-filler is idle with its
// reserve filled (or failed), so that a test's next few small adds cause
// no fill and fault injection sees only the writer's own I/O. The filler
// broadcasts on the reserve's condition after every fill.
func settleReserve(t testing.TB, e *Engine) {
	t.Helper()
	r := e.j.res
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.busy || !r.failed && !r.closed && r.low() {
		r.cond.Wait()
	}
}
