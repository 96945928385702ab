package storage

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/internal/vfs"
)

func TestAddReadFromCacheAndFromEntryLog(t *testing.T) {
	e := open(t, testConfig(vfs.NewMem()))
	addMany(t, e, 1, 0, 50)
	addMany(t, e, 2, 0, 20)
	for i := int64(0); i < 50; i++ {
		checkEntry(t, e, 1, i) // from the write cache
	}
	flush(t, e)
	for i := int64(0); i < 50; i++ {
		checkEntry(t, e, 1, i) // from the entry log
	}
	if _, err := e.Read(1, 50); !errors.Is(err, ErrNoEntry) {
		t.Fatalf("missing entry: %v", err)
	}
	if _, err := e.Read(3, 0); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("missing ledger: %v", err)
	}
	infos := e.Ledgers()
	if len(infos) != 2 || infos[0].LedgerID != 1 || infos[0].Entries != 50 || infos[0].LastEntry != 49 ||
		infos[0].LAC != 48 || infos[1].LedgerID != 2 || infos[1].Entries != 20 {
		t.Fatalf("ledgers: %+v", infos)
	}
	var bytes int64
	for i := int64(0); i < 50; i++ {
		bytes += int64(len(payload(1, i)))
	}
	if infos[0].Bytes != bytes {
		t.Fatalf("bytes %d, want %d", infos[0].Bytes, bytes)
	}
	// Rewriting an entry replaces it and is not counted twice.
	req := addReq(1, 10)
	req.Payload = []byte("rewritten")
	mustAdd(t, e, req)
	got, err := e.Read(1, 10)
	if err != nil || string(got.Payload) != "rewritten" {
		t.Fatalf("rewritten entry: %q %v", got.Payload, err)
	}
	info := e.Ledgers()[0]
	if info.Entries != 50 || info.Bytes != bytes-int64(len(payload(1, 10)))+9 {
		t.Fatalf("after rewrite: %+v", info)
	}
}

func TestInvalidRequests(t *testing.T) {
	e := open(t, testConfig(vfs.NewMem()))
	for _, req := range []AddRequest{
		{LedgerID: -1, EntryID: 0, LAC: -1},
		{LedgerID: 1, EntryID: -1, LAC: -1},
		{LedgerID: 1, EntryID: 0, LAC: -2},
		{LedgerID: 1, EntryID: 0, LAC: -1, Payload: make([]byte, e.cfg.MaxEntryBytes+1)},
	} {
		wantErr(t, "invalid add", add(t, e, req), ErrInvalid)
	}
	if _, err := e.Fence(context.Background(), -5, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("fence of a negative ledger: %v", err)
	}
}

func TestMasterKey(t *testing.T) {
	e := open(t, testConfig(vfs.NewMem()))
	mustAdd(t, e, addReq(1, 0))
	req := addReq(1, 1)
	req.MasterKey = []byte("other")
	wantErr(t, "add with another key", add(t, e, req), ErrMasterKey)
	if _, err := e.Fence(context.Background(), 1, []byte("other")); !errors.Is(err, ErrMasterKey) {
		t.Fatalf("fence with another key: %v", err)
	}
	// A fence creates the ledger and sets its key.
	if _, err := e.Fence(context.Background(), 2, []byte("k2")); err != nil {
		t.Fatal(err)
	}
	req = addReq(2, 0)
	req.MasterKey = []byte("k2")
	req.Recovery = true
	mustAdd(t, e, req)
	req.MasterKey = []byte("nope")
	wantErr(t, "recovery add with another key", add(t, e, req), ErrMasterKey)
}

func TestFencing(t *testing.T) {
	e := open(t, testConfig(vfs.NewMem()))
	addMany(t, e, 1, 0, 5)
	lac, err := e.Fence(context.Background(), 1, key(1))
	if err != nil || lac != 3 {
		t.Fatalf("fence: lac %d err %v", lac, err)
	}
	wantErr(t, "add after fence", add(t, e, addReq(1, 5)), ErrFenced)
	rec := addReq(1, 5)
	rec.Recovery = true
	mustAdd(t, e, rec)
	checkEntry(t, e, 1, 5)
	if info := e.Ledgers()[0]; !info.Fenced || info.LastEntry != 5 {
		t.Fatalf("info %+v", info)
	}
	// Fencing again is fine and returns the current LAC.
	if lac, err := e.Fence(context.Background(), 1, key(1)); err != nil || lac != 4 {
		t.Fatalf("second fence: %d %v", lac, err)
	}
	// Reads still work.
	checkEntry(t, e, 1, 0)
}

// TestFenceOrdersAfterAdmittedAdds: every add admitted before the fence is
// acknowledged by the time Fence returns, and none after it is.
func TestFenceOrdersAfterAdmittedAdds(t *testing.T) {
	e := open(t, testConfig(vfs.NewMem()))
	mustAdd(t, e, addReq(1, 0))
	var mu sync.Mutex
	acked := map[int64]bool{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	inflight := make(chan struct{}, 64)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := int64(1); ; i++ {
			select {
			case <-stop:
				return
			case inflight <- struct{}{}:
			}
			wg.Add(1)
			e.Add(addReq(1, i), func(err error) {
				if err == nil {
					mu.Lock()
					acked[i] = true
					mu.Unlock()
				} else if !errors.Is(err, ErrFenced) {
					t.Errorf("add %d: %v", i, err)
				}
				<-inflight
				wg.Done()
			})
		}
	}()
	testutil.Eventually(t, "adds flowing", 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 100
	})
	if _, err := e.Fence(context.Background(), 1, key(1)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	atFence := len(acked)
	mu.Unlock()
	close(stop)
	wg.Wait()
	if len(acked) != atFence {
		t.Fatalf("%d adds acked after Fence returned (had %d)", len(acked)-atFence, atFence)
	}
}

func TestLACAndWaitLAC(t *testing.T) {
	e := open(t, testConfig(vfs.NewMem()))
	if _, err := e.LAC(1); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("LAC of unknown ledger: %v", err)
	}
	if _, err := e.WaitLAC(context.Background(), 1, 0); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("WaitLAC of unknown ledger: %v", err)
	}
	mustAdd(t, e, AddRequest{LedgerID: 1, EntryID: 0, LAC: NoEntry, MasterKey: key(1)})
	if lac, _ := e.LAC(1); lac != NoEntry {
		t.Fatalf("LAC %d", lac)
	}
	got := make(chan int64, 1)
	go func() {
		lac, err := e.WaitLAC(context.Background(), 1, NoEntry)
		if err != nil {
			t.Errorf("WaitLAC: %v", err)
		}
		got <- lac
	}()
	// LAC is the max piggybacked: an add with a lower LAC does not lower it.
	mustAdd(t, e, AddRequest{LedgerID: 1, EntryID: 2, LAC: 1, MasterKey: key(1)})
	if lac := <-got; lac != 1 {
		t.Fatalf("woke with LAC %d", lac)
	}
	mustAdd(t, e, AddRequest{LedgerID: 1, EntryID: 1, LAC: 0, MasterKey: key(1)})
	if lac, _ := e.LAC(1); lac != 1 {
		t.Fatalf("LAC went down to %d", lac)
	}
	// Already past: returns at once.
	if lac, err := e.WaitLAC(context.Background(), 1, 0); err != nil || lac != 1 {
		t.Fatalf("WaitLAC past: %d %v", lac, err)
	}
	// Context end: current LAC and ctx's error.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if lac, err := e.WaitLAC(ctx, 1, 1); !errors.Is(err, context.DeadlineExceeded) || lac != 1 {
		t.Fatalf("WaitLAC timeout: %d %v", lac, err)
	}
	// A fence wakes waiters with the current LAC (BookKeeper's bookies
	// do the same), and a fenced ledger's WaitLAC does not wait.
	mustAdd(t, e, addReq(3, 0))
	fenced := make(chan int64, 1)
	go func() {
		lac, err := e.WaitLAC(context.Background(), 3, 0)
		if err != nil {
			t.Errorf("WaitLAC at fence: %v", err)
		}
		fenced <- lac
	}()
	testutil.Eventually(t, "waiter parked", 5*time.Second, func() bool {
		e.mu.RLock()
		defer e.mu.RUnlock()
		return e.ledgers[3].lacCh != nil
	})
	if _, err := e.Fence(context.Background(), 3, key(3)); err != nil {
		t.Fatal(err)
	}
	if lac := <-fenced; lac != NoEntry {
		t.Fatalf("waiter woken by the fence got LAC %d", lac)
	}
	if lac, err := e.WaitLAC(context.Background(), 3, 0); err != nil || lac != NoEntry {
		t.Fatalf("WaitLAC on a fenced ledger: %d %v", lac, err)
	}
	// Delete wakes waiters with ErrNoLedger; Close wakes them with ErrClosed.
	errs := make(chan error, 2)
	go func() { _, err := e.WaitLAC(context.Background(), 1, 5); errs <- err }()
	mustAdd(t, e, addReq(2, 0))
	go func() { _, err := e.WaitLAC(context.Background(), 2, 5); errs <- err }()
	testutil.Eventually(t, "waiters parked", 5*time.Second, func() bool {
		e.mu.RLock()
		defer e.mu.RUnlock()
		return e.ledgers[1].lacCh != nil && e.ledgers[2].lacCh != nil
	})
	if err := e.DeleteLedger(1); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "waiter of a deleted ledger", <-errs, ErrNoLedger)
	e.Close()
	wantErr(t, "waiter at close", <-errs, ErrClosed)
}

func TestReadRangeLimits(t *testing.T) {
	e := open(t, testConfig(vfs.NewMem()))
	for i := int64(0); i < 10; i++ {
		mustAdd(t, e, AddRequest{LedgerID: 1, EntryID: i, LAC: i - 1, MasterKey: key(1), Payload: make([]byte, 100)})
	}
	mustAdd(t, e, AddRequest{LedgerID: 1, EntryID: 12, LAC: 9, MasterKey: key(1), Payload: make([]byte, 100)})
	flush(t, e)
	mustAdd(t, e, AddRequest{LedgerID: 1, EntryID: 10, LAC: 9, MasterKey: key(1), Payload: make([]byte, 100)})
	check := func(first, last int64, maxBytes int, want ...int64) {
		t.Helper()
		got, err := e.ReadRange(1, first, last, maxBytes)
		if err != nil {
			t.Fatalf("ReadRange(%d, %d, %d): %v", first, last, maxBytes, err)
		}
		if len(got) != len(want) {
			t.Fatalf("ReadRange(%d, %d, %d): %d entries, want %v", first, last, maxBytes, len(got), want)
		}
		for i := range got {
			if got[i].EntryID != want[i] {
				t.Fatalf("ReadRange(%d, %d, %d): entry %d is %d", first, last, maxBytes, i, got[i].EntryID)
			}
		}
	}
	check(0, 3, 0, 0, 1, 2, 3)
	check(8, 20, 0, 8, 9, 10) // stops at the first missing (11), cache and log mixed
	check(0, 9, 250, 0, 1)    // 3 × 100 > 250
	check(0, 9, 300, 0, 1, 2) // exactly at the limit
	check(0, 9, 50, 0)        // the first entry always
	check(5, 4, 0)            // empty range
	check(11, 12, 0)          // first missing: nothing
	if _, err := e.ReadRange(9, 0, 1, 0); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("ReadRange of unknown ledger: %v", err)
	}
}

func TestReadOnlyThreshold(t *testing.T) {
	var mu sync.Mutex
	used := 0.5
	cfg := testConfig(vfs.NewMem())
	cfg.DiskSpace = func(string) (vfs.DiskSpace, error) {
		mu.Lock()
		defer mu.Unlock()
		return vfs.DiskSpace{Total: 1000, Free: int64(1000 * (1 - used))}, nil
	}
	e := open(t, cfg)
	mustAdd(t, e, addReq(1, 0))
	mu.Lock()
	used = 0.96
	mu.Unlock()
	u := e.Usage()
	if !u.ReadOnly || u.TotalBytes != 1000 || u.FreeBytes != 40 || u.UsedBytes <= 0 {
		t.Fatalf("usage %+v", u)
	}
	wantErr(t, "add when disk is full", add(t, e, addReq(1, 1)), ErrReadOnly)
	checkEntry(t, e, 1, 0)
	if _, err := e.Fence(context.Background(), 1, key(1)); err != nil {
		t.Fatalf("fence when read-only: %v", err)
	}
	mu.Lock()
	used = 0.5
	mu.Unlock()
	if e.Usage().ReadOnly {
		t.Fatal("still read-only")
	}
	rec := addReq(1, 1)
	rec.Recovery = true
	mustAdd(t, e, rec)
	e.SetReadOnly(true)
	wantErr(t, "add when set read-only", add(t, e, addReq(1, 2)), ErrReadOnly)
	if !e.Usage().ReadOnly {
		t.Fatal("SetReadOnly not reported")
	}
	// Ledger recovery's rewrites still land (BookKeeper's high-priority
	// writes): a drained bookie does not block the takeover of its ledgers.
	rec2 := addReq(1, 2)
	rec2.Recovery = true
	mustAdd(t, e, rec2)
	checkEntry(t, e, 1, 2)
}

func TestReadOnlyCheckedOnFlushTick(t *testing.T) {
	clk := newManualClock()
	var mu sync.Mutex
	used := 0.5
	cfg := testConfig(vfs.NewMem())
	cfg.Clock = clk
	cfg.FlushInterval = time.Second
	cfg.DiskSpace = func(string) (vfs.DiskSpace, error) {
		mu.Lock()
		defer mu.Unlock()
		return vfs.DiskSpace{Total: 1000, Free: int64(1000 * (1 - used))}, nil
	}
	cfg.JournalGroupWindow = 0
	e := open(t, cfg)
	mustAdd(t, e, addReq(1, 0))
	mu.Lock()
	used = 0.99
	mu.Unlock()
	testutil.Eventually(t, "flush timer armed", 5*time.Second, func() bool { return clk.armedWithin(time.Second) > 0 })
	clk.Advance(time.Second)
	testutil.Eventually(t, "read-only after the flush tick", 5*time.Second, func() bool { return e.readOnly() })
	// The tick flushed too: the entry is in the index now.
	testutil.Eventually(t, "flushed", 5*time.Second, func() bool { return e.Stats().Flushes > 0 })
}

func TestDeleteLedger(t *testing.T) {
	e := open(t, testConfig(vfs.NewMem()))
	addMany(t, e, 1, 0, 10)
	addMany(t, e, 2, 0, 10)
	flush(t, e)
	addMany(t, e, 1, 10, 5) // some in the cache, some in the log
	if err := e.DeleteLedger(1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Read(1, 0); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("read of deleted ledger: %v", err)
	}
	if err := e.DeleteLedger(1); !errors.Is(err, ErrNoLedger) {
		t.Fatalf("second delete: %v", err)
	}
	if infos := e.Ledgers(); len(infos) != 1 || infos[0].LedgerID != 2 {
		t.Fatalf("ledgers %+v", infos)
	}
	checkEntry(t, e, 2, 5)
	// Adding again creates a new ledger, with a new key.
	req := addReq(1, 3)
	req.MasterKey = []byte("new")
	mustAdd(t, e, req)
	if _, err := e.Read(1, 0); !errors.Is(err, ErrNoEntry) {
		t.Fatalf("old entry of a re-created ledger: %v", err)
	}
	flush(t, e)
	if info := e.Ledgers()[0]; info.LedgerID != 1 || info.Entries != 1 {
		t.Fatalf("re-created ledger %+v", info)
	}
}

func TestCloseIsIdempotentAndRefuses(t *testing.T) {
	e := open(t, testConfig(vfs.NewMem()))
	mustAdd(t, e, addReq(1, 0))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	wantErr(t, "add after close", add(t, e, addReq(1, 1)), ErrClosed)
	if _, err := e.Read(1, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if _, err := e.Fence(context.Background(), 1, key(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("fence after close: %v", err)
	}
	if err := e.DeleteLedger(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("delete after close: %v", err)
	}
	if _, err := e.Compact(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("compact after close: %v", err)
	}
}

func TestOpenRejectsBadConfigAndSecondOpen(t *testing.T) {
	if _, err := Open(Config{}); err == nil {
		t.Fatal("open with zero config")
	}
	fs := vfs.NewMem()
	open(t, testConfig(fs))
	if e, err := Open(testConfig(fs)); err == nil {
		e.Close()
		t.Fatal("second engine on the same directory")
	}
}

// TestAddRecordInPlace: an add whose payload sits in a NewRecord buffer
// is stored in that buffer (no copy); a Record of another shape is
// ignored and the payload copied. Both read back intact, from the cache
// and from the entry log.
func TestAddRecordInPlace(t *testing.T) {
	e := open(t, testConfig(vfs.NewMem()))
	req := addReq(1, 0)
	req.Record = NewRecord(len(req.Payload))
	copy(req.Record[EntryHeaderSize:], req.Payload)
	req.Payload = req.Record[EntryHeaderSize:]
	mustAdd(t, e, req)
	if rec, ok := e.cache.get(1, 0); !ok || &rec[0] != &req.Record[0] {
		t.Fatal("the record buffer was not kept")
	}
	odd := addReq(1, 1)
	odd.Record = make([]byte, EntryHeaderSize+len(odd.Payload)) // payload not in it
	mustAdd(t, e, odd)
	if rec, ok := e.cache.get(1, 1); !ok || &rec[0] == &odd.Record[0] {
		t.Fatal("a record of another shape was kept")
	}
	empty := addReq(1, 2)
	empty.Record = NewRecord(0)
	empty.Payload = empty.Record[EntryHeaderSize:]
	mustAdd(t, e, empty)
	for i := int64(0); i < 2; i++ {
		checkEntry(t, e, 1, i)
	}
	check := func() {
		t.Helper()
		if got, err := e.Read(1, 2); err != nil || len(got.Payload) != 0 {
			t.Fatalf("empty entry: %q %v", got.Payload, err)
		}
	}
	check()
	flush(t, e)
	for i := int64(0); i < 2; i++ {
		checkEntry(t, e, 1, i)
	}
	check()
}

// TestAddBatch: the entries of one AddBatch get their own outcomes (an
// invalid one and one with the wrong master key fail alone) and the valid
// ones enter the journal together, in one group commit.
func TestAddBatch(t *testing.T) {
	e := open(t, testConfig(vfs.NewMem()))
	mustAdd(t, e, addReq(1, 0))
	before := e.Stats().JournalBatches
	reqs := []AddRequest{addReq(1, 1), addReq(2, 0), {LedgerID: 1, EntryID: -1, LAC: -1}, addReq(1, 2), addReq(1, 3)}
	reqs[3].MasterKey = []byte("wrong")
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	dones := make([]func(error), len(reqs))
	for i := range reqs {
		wg.Add(1)
		dones[i] = func(err error) { errs[i] = err; wg.Done() }
	}
	e.AddBatch(reqs, dones)
	wg.Wait()
	for i, want := range []error{nil, nil, ErrInvalid, ErrMasterKey, nil} {
		if !errors.Is(errs[i], want) || (want == nil && errs[i] != nil) {
			t.Fatalf("entry %d: %v, want %v", i, errs[i], want)
		}
	}
	if n := e.Stats().JournalBatches - before; n != 1 {
		t.Fatalf("%d group commits for one AddBatch", n)
	}
	for _, le := range [][2]int64{{1, 1}, {2, 0}, {1, 3}} {
		checkEntry(t, e, le[0], le[1])
	}
	if _, err := e.Read(1, 2); !errors.Is(err, ErrNoEntry) {
		t.Fatalf("refused entry: %v", err)
	}
}

// TestReadOnlyJournalDirFull: the journal's file system passing the
// threshold turns the bookie read-only as the data directory's does,
// whether Config.JournalDir names it or the default journal/ under Dir
// is a mount point; a failing check of one hides neither the other's
// reading nor, when it cannot tell, changes the state.
func TestReadOnlyJournalDirFull(t *testing.T) {
	var mu sync.Mutex
	used := map[string]float64{}
	failing := map[string]bool{}
	space := func(dir string) (vfs.DiskSpace, error) {
		mu.Lock()
		defer mu.Unlock()
		if failing[dir] {
			return vfs.DiskSpace{}, errors.New("statfs: input/output error")
		}
		return vfs.DiskSpace{Total: 1000, Free: int64(1000 * (1 - used[dir]))}, nil
	}
	set := func(dir string, f float64, fail bool) {
		mu.Lock()
		defer mu.Unlock()
		used[dir], failing[dir] = f, fail
	}

	cfg := testConfig(vfs.NewMem())
	cfg.JournalDir = "/journal-device/j"
	cfg.DiskSpace = space
	e := open(t, cfg)
	mustAdd(t, e, addReq(1, 0))
	set(cfg.JournalDir, 0.97, false)
	if u := e.Usage(); !u.ReadOnly || u.JournalDir != cfg.JournalDir || u.JournalFreeBytes != 30 || u.JournalTotalBytes != 1000 {
		t.Fatalf("journal file system 97%% full: usage %+v, want read-only and the journal's 30 of 1000 bytes free", u)
	}
	wantErr(t, "add with the journal's file system full", add(t, e, addReq(1, 1)), ErrReadOnly)
	checkEntry(t, e, 1, 0)
	set(cfg.JournalDir, 0.5, false)
	set(cfg.Dir, 0.97, false)
	if !e.Usage().ReadOnly {
		t.Fatal("data file system 97% full: not read-only")
	}
	set(cfg.Dir, 0.5, false)
	if e.Usage().ReadOnly {
		t.Fatal("both file systems half full: still read-only")
	}
	mustAdd(t, e, addReq(1, 1))

	// The journal's check fails: the data disk filling up still counts;
	// with the data disk fine again the state cannot be known to have
	// changed and stays; once the journal answers again it is lifted.
	set(cfg.JournalDir, 0, true)
	set(cfg.Dir, 0.97, false)
	if u := e.Usage(); !u.ReadOnly || u.JournalDir != cfg.JournalDir || u.JournalTotalBytes != 0 {
		t.Fatalf("data disk full, journal check failing: usage %+v, want read-only and the journal's space unknown", u)
	}
	set(cfg.Dir, 0.5, false)
	if !e.Usage().ReadOnly {
		t.Fatal("read-only lifted while the journal's file system could not be checked")
	}
	set(cfg.JournalDir, 0.5, false)
	if e.Usage().ReadOnly {
		t.Fatal("both file systems half full again: still read-only")
	}

	// The default journal directory, journal/ under Dir, on a device of
	// its own (a mount point): its own file system is asked too, and
	// Usage names no journal directory (none was configured).
	cfg2 := testConfig(vfs.NewMem())
	cfg2.Dir = "/data2" // e still holds testDir's index lock
	cfg2.DiskSpace = space
	e2 := open(t, cfg2)
	set(filepath.Join(cfg2.Dir, "journal"), 0.97, false)
	if u := e2.Usage(); !u.ReadOnly || u.JournalDir != "" || u.JournalTotalBytes != 0 {
		t.Fatalf("journal/ under the data dir on a full device: usage %+v, want read-only, no journal dir named", u)
	}
}

// ReadRange reads entries that lie back to back in an entry log with one
// read (readRun), not one per entry, across ledgers flushed together and
// flushes appended to one log, and still returns each entry checked.
func TestReadRangeCoalescesLogReads(t *testing.T) {
	var reads atomic.Int64
	efs := vfs.NewErrorFS(vfs.NewMem(), vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpRead && strings.Contains(op.Path, "/"+logsDir+"/") {
			reads.Add(1)
		}
		return nil
	}))
	e := open(t, testConfig(efs))
	for round := range 2 { // two flushes into one log, two ledgers in each
		addMany(t, e, 1, int64(round*100), 100)
		addMany(t, e, 2, int64(round*100), 100)
		flush(t, e)
	}
	reads.Store(0)
	got, err := e.ReadRange(1, 0, 199, 0)
	if err != nil || len(got) != 200 {
		t.Fatalf("ReadRange: %d entries, %v", len(got), err)
	}
	if n := reads.Load(); n != 2 { // one run per flush: ledger 2's entries lie between
		t.Fatalf("ReadRange of 200 entries in two runs made %d log reads, want 2", n)
	}
	for i, ent := range got {
		if ent.EntryID != int64(i) {
			t.Fatalf("entry %d is %d", i, ent.EntryID)
		}
		single, err := e.Read(1, ent.EntryID)
		if err != nil || !bytes.Equal(single.Payload, ent.Payload) || single.LAC != ent.LAC {
			t.Fatalf("entry %d from the range differs from a single read: %v", i, err)
		}
	}
	reads.Store(0)
	if got, err := e.ReadRange(2, 50, 149, 0); err != nil || len(got) != 100 || got[0].EntryID != 50 || got[99].EntryID != 149 {
		t.Fatalf("ReadRange of ledger 2: %d entries, %v", len(got), err)
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("ReadRange of 100 entries in two runs made %d log reads, want 2", n)
	}
}

// A flush that moves entries to the log and drops them from the cache
// between readRun's index snapshot and its cache checks must not make
// ReadRange return the older copies of entries rewritten before it began.
func TestReadRangeAcrossAFlushReturnsTheNewestCopies(t *testing.T) {
	e := open(t, testConfig(vfs.NewMem()))
	for i := int64(0); i < 10; i++ {
		mustAdd(t, e, AddRequest{LedgerID: 1, EntryID: i, LAC: i - 1, MasterKey: key(1), Payload: []byte("same")})
	}
	flush(t, e)
	for i := int64(5); i < 10; i++ { // rewritten (as by recovery) with a newer LAC
		mustAdd(t, e, AddRequest{LedgerID: 1, EntryID: i, LAC: 100 + i, MasterKey: key(1), Payload: []byte("same")})
	}
	e.hooks.readRunScanning = func() {
		e.hooks.readRunScanning = nil
		if err := e.Flush(context.Background()); err != nil {
			t.Error(err)
		}
	}
	got, err := e.ReadRange(1, 0, 9, 0)
	if err != nil || len(got) != 10 {
		t.Fatalf("ReadRange: %d entries, %v", len(got), err)
	}
	if e.hooks.readRunScanning != nil {
		t.Fatal("the hook never ran: the test did not reach readRun")
	}
	for _, ent := range got[5:] {
		if ent.LAC != 100+ent.EntryID {
			t.Fatalf("entry %d: LAC %d, the copy from before its rewrite (want %d)", ent.EntryID, ent.LAC, 100+ent.EntryID)
		}
	}
}
