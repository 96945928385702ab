package ledger

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/bookie/storage"
)

// TestRoundTrip: create (E=3 Qw=2 Qa=2 over 4 bookies), append (sync and
// pipelined), close, read back; striping checked on each bookie directly;
// the CLOSED metadata has the right LastEntryID and Length.
func TestRoundTrip(t *testing.T) {
	start := time.Now()
	e := newEnv(t, 4)
	ctx := testCtx(t)
	c := e.client()
	w, err := c.Create(ctx, CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2, Password: []byte("pw"),
		Custom: map[string]string{"owner": "test"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	var length int64
	for i := range int64(10) {
		id, err := w.Append(ctx, payload(i))
		if err != nil || id != i {
			t.Fatalf("Append %d = %d, %v", i, id, err)
		}
		length += int64(len(payload(i)))
	}
	var (
		mu   sync.Mutex
		got  []int64
		wg   sync.WaitGroup
		errs []error
	)
	for i := int64(10); i < n; i++ {
		length += int64(len(payload(i)))
		wg.Add(1)
		done := func(id int64, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			got = append(got, id)
			if err != nil {
				errs = append(errs, err)
			}
		}
		if i%2 == 0 {
			w.AppendAsync(payload(i), done)
		} else { // built in place, header bytes junk: the writer fills them
			w.AppendFrameAsync(append(bytes.Repeat([]byte{0xaa}, FrameHeaderSize), payload(i)...), done)
		}
	}
	wg.Wait()
	if len(errs) > 0 || !slices.Equal(got, seq(10, n-1)) {
		t.Fatalf("async appends: errors %v, ids in callback order %v", errs, got)
	}
	if w.LAC() != n-1 {
		t.Fatalf("LAC %d, want %d", w.LAC(), n-1)
	}
	md, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md.State != core.StateClosed || md.LastEntryID != n-1 || md.Length != length || len(md.Segments) != 1 {
		t.Fatalf("closed metadata %+v; want CLOSED, last %d, length %d, one segment", md, n-1, length)
	}
	stored, err := c.Get(ctx, w.ID())
	if err != nil || stored.Version != md.Version || stored.LastEntryID != n-1 || stored.State != core.StateClosed {
		t.Fatalf("Get = %+v, %v; Close returned version %d", stored, err, md.Version)
	}
	if md2, err := w.Close(ctx); err != nil || md2.Version != md.Version {
		t.Fatalf("second Close = %+v, %v", md2, err)
	}
	if _, err := w.Append(ctx, []byte("late")); !errors.Is(err, ErrWriterClosed) {
		t.Fatalf("append after Close: %v", err)
	}
	if custom, err := c.Custom(ctx, w.ID()); err != nil || custom["owner"] != "test" {
		t.Fatalf("Custom = %v, %v", custom, err)
	}

	// Striping: entry i is on exactly the bookies at ensemble indexes
	// (i+k) mod 3, k < 2, with its frame; the fourth bookie has nothing.
	seg := md.Segments[0]
	for idx, b := range seg.Ensemble {
		bc := e.direct(b)
		var running int64
		for i := range int64(n) {
			running += int64(len(payload(i)))
			ent, err := bc.Read(ctx, w.ID(), i)
			want := slices.Contains(core.WriteSet(i, 3, 2), idx)
			switch {
			case want && err != nil:
				t.Fatalf("bookie %s lacks entry %d: %v", b, i, err)
			case !want && !errors.Is(err, storage.ErrNoEntry):
				t.Fatalf("bookie %s (index %d) has entry %d outside its write sets: %v", b, idx, i, err)
			case want:
				p, l, err := openFrame(ent.Payload, w.ID(), i)
				if err != nil || !bytes.Equal(p, payload(i)) || l != running {
					t.Fatalf("bookie %s entry %d: payload %q, length %d, %v; want length %d", b, i, p, l, err, running)
				}
			}
		}
	}
	for id := range e.bookies {
		if !slices.Contains(seg.Ensemble, core.BookieID(id)) {
			if _, err := e.direct(core.BookieID(id)).Read(ctx, w.ID(), 0); !errors.Is(err, storage.ErrNoLedger) {
				t.Fatalf("bookie %s outside the ensemble: %v", id, err)
			}
		}
	}

	// Reading back.
	r, err := c.OpenReader(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if r.LAC() != n-1 {
		t.Fatalf("reader LAC %d", r.LAC())
	}
	checkRead(t, r, 0, n-1)
	if _, err := r.Read(ctx, 0, n); !errors.Is(err, ErrBeyondLAC) {
		t.Fatalf("read past LastEntryID: %v", err)
	}
	if lac, err := r.WaitLAC(ctx, n-1, time.Minute); err != nil || lac != n-1 {
		t.Fatalf("WaitLAC on a closed ledger = %d, %v", lac, err)
	}
	if got, err := c.OpenForTakeover(ctx, w.ID(), []byte("pw")); err != nil || got.Version != md.Version {
		t.Fatalf("OpenForTakeover of a closed ledger = %+v, %v", got, err)
	}

	// List and Delete.
	w2, err := c.Create(ctx, CreateOptions{Ensemble: 2, WriteQuorum: 2, AckQuorum: 1})
	if err != nil {
		t.Fatal(err)
	}
	if w2.ID() != w.ID()+1 {
		t.Fatalf("second ledger id %d, first %d", w2.ID(), w.ID())
	}
	if _, err := w2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	all, err := c.List(ctx)
	if err != nil || len(all) != 2 || all[0].LedgerID != w.ID() || all[1].LedgerID != w2.ID() {
		t.Fatalf("List = %+v, %v", all, err)
	}
	if err := c.Delete(ctx, w2.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, w2.ID()); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("Get after Delete: %v", err)
	}
	t.Logf("round trip of %d entries in %v", n, time.Since(start).Round(time.Millisecond))
}

func seq(from, to int64) []int64 {
	var s []int64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// checkRead reads first..last through r and compares with payload(i).
func checkRead(t *testing.T, r *Reader, first, last int64) {
	t.Helper()
	es, err := r.Read(testCtx(t), first, last)
	if err != nil {
		t.Fatalf("read %d..%d: %v", first, last, err)
	}
	for i, en := range es {
		if id := first + int64(i); en.ID != id || !bytes.Equal(en.Payload, payload(id)) {
			t.Fatalf("entry %d read as %d %q", id, en.ID, en.Payload)
		}
	}
}

// TestCreateErrors: bad quorums and too few writable bookies are refused
// with errors that say why.
func TestCreateErrors(t *testing.T) {
	e := newEnv(t, 3)
	ctx := testCtx(t)
	c := e.client()
	if _, err := c.Create(ctx, CreateOptions{Ensemble: 2, WriteQuorum: 3, AckQuorum: 1}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Qw > E: %v", err)
	}
	if _, err := c.Create(ctx, CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 0}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Qa 0: %v", err)
	}
	_, err := c.Create(ctx, CreateOptions{Ensemble: 4, WriteQuorum: 2, AckQuorum: 2})
	if !errors.Is(err, ErrNotEnoughBookies) || !strings.Contains(err.Error(), "need 4 writable bookies, have 3") {
		t.Fatalf("E=4 over 3 bookies: %v", err)
	}
	if _, err := c.Get(ctx, 1); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("nothing was created, yet: %v", err)
	}
	if _, err := NewClient(Config{}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("NewClient without Store: %v", err)
	}
	w, err := c.Create(ctx, CreateOptions{Ensemble: 3, WriteQuorum: 3, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, DefaultMaxEntrySize+1)
	if _, err := w.Append(ctx, big); !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("oversize append: %v", err)
	}
	if id, err := w.Append(ctx, payload(0)); err != nil || id != 0 {
		t.Fatalf("append after a refused one = %d, %v", id, err)
	}
	if _, err := c.OpenForTakeover(ctx, w.ID(), []byte("wrong")); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("takeover with a wrong password: %v", err)
	}
	if _, err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := c.Get(ctx, w.ID()); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
}

// TestTailing: a reader's WaitLAC sees entries as a writer appends them,
// and the last one once the writer closes the ledger.
func TestTailing(t *testing.T) {
	e := newEnv(t, 3)
	ctx := testCtx(t)
	wc, rc := e.client(), e.client()
	w, err := wc.Create(ctx, CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	r, err := rc.OpenReader(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	if r.LAC() != core.NoEntry {
		t.Fatalf("reader of an empty ledger: LAC %d", r.LAC())
	}
	if lac, err := r.WaitLAC(ctx, core.NoEntry, 50*time.Millisecond); err != nil || lac != core.NoEntry {
		t.Fatalf("WaitLAC with nothing written = %d, %v", lac, err)
	}
	const n = 20
	seen := core.NoEntry
	var worst time.Duration
	for i := range int64(n) {
		if _, err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			continue // bookies learn entry i is confirmed from entry i+1's add
		}
		start := time.Now()
		lac, err := r.WaitLAC(ctx, seen, 10*time.Second)
		if err != nil || lac != i-1 {
			t.Fatalf("after appending %d: WaitLAC = %d, %v; want %d", i, lac, err, i-1)
		}
		worst = max(worst, time.Since(start))
		checkRead(t, r, seen+1, lac)
		seen = lac
	}
	// The last entry: learnt from the metadata when the writer closes.
	got := make(chan int64, 1)
	go func() {
		lac, err := r.WaitLAC(ctx, seen, 20*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- lac
	}()
	if _, err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if lac := <-got; lac != n-1 {
		t.Fatalf("WaitLAC across the close = %d, want %d", lac, n-1)
	}
	checkRead(t, r, seen+1, n-1)
	if md := r.Metadata(); md.State != core.StateClosed {
		t.Fatalf("reader's metadata after the close: %s", md.State)
	}
	t.Logf("slowest WaitLAC %v; close seen after %v", worst.Round(time.Microsecond), time.Since(start).Round(time.Microsecond))
}

// TestStalledBookieReplaced: a bookie that stops answering adds (a frozen
// process) is replaced after AddTimeout; no entry is lost.
func TestStalledBookieReplaced(t *testing.T) {
	e := newEnv(t, 4)
	ctx := testCtx(t)
	ft := &faultTransport{}
	c := e.client(func(cfg *Config) { cfg.Transport = ft; cfg.AddTimeout = 500 * time.Millisecond })
	w, err := c.Create(ctx, CreateOptions{Ensemble: 3, WriteQuorum: 3, AckQuorum: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(5) {
		if _, err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	frozen := string(w.Metadata().Segments[0].Ensemble[1])
	ft.setHook(func(ctx context.Context, op, b string, _ int64) error {
		if op == "add" && b == frozen {
			<-ctx.Done() // never answers
			return ctx.Err()
		}
		return nil
	})
	start := time.Now()
	for i := int64(5); i < 10; i++ {
		if _, err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	md, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Segments) != 2 || md.Segments[1].FirstEntry != 5 || slices.Contains(md.Segments[1].Ensemble, core.BookieID(frozen)) {
		t.Fatalf("segments %+v; want a second one from entry 5 without %s", md.Segments, frozen)
	}
	r, err := c.OpenReader(ctx, w.ID())
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, r, 0, 9)
	t.Logf("stalled bookie %s replaced; 5 appends took %v (AddTimeout 500ms)", frozen, took.Round(time.Millisecond))
}
