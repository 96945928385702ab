package bookietest

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stratamesh/strata/bookie/storage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var key = []byte("k")

func add(t *testing.T, m *Mem, l, e int64, recovery bool) error {
	t.Helper()
	var got error
	called := 0
	m.Add(storage.AddRequest{LedgerID: l, EntryID: e, LAC: e - 1, MasterKey: key, Payload: []byte{byte(e)}, Recovery: recovery},
		func(err error) { got = err; called++ })
	if called != 1 {
		t.Fatalf("done called %d times", called)
	}
	return got
}

// TestMemContract checks the fake against the storage contract the
// service relies on.
func TestMemContract(t *testing.T) {
	m := NewMem()
	for e := range int64(5) {
		if err := add(t, m, 1, e, false); err != nil {
			t.Fatal(err)
		}
	}
	if lac, err := m.LAC(1); err != nil || lac != 3 {
		t.Fatalf("LAC = %d, %v", lac, err)
	}
	if _, err := m.Read(2, 0); !errors.Is(err, storage.ErrNoLedger) {
		t.Fatalf("read unknown ledger: %v", err)
	}
	if _, err := m.Read(1, 9); !errors.Is(err, storage.ErrNoEntry) {
		t.Fatalf("read missing entry: %v", err)
	}
	if es, err := m.ReadRange(1, 1, 10, 0); err != nil || len(es) != 4 {
		t.Fatalf("range = %d, %v", len(es), err)
	}
	if es, err := m.ReadRange(1, 1, 10, 2); err != nil || len(es) != 2 {
		t.Fatalf("range with 2 bytes = %d, %v", len(es), err)
	}
	m.Corrupt(1, 2)
	if _, err := m.Read(1, 2); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("corrupt read: %v", err)
	}
	if _, err := m.Fence(context.Background(), 1, []byte("other")); !errors.Is(err, storage.ErrMasterKey) {
		t.Fatalf("fence with another key: %v", err)
	}
	if lac, err := m.Fence(context.Background(), 1, key); err != nil || lac != 3 {
		t.Fatalf("fence = %d, %v", lac, err)
	}
	if err := add(t, m, 1, 5, false); !errors.Is(err, storage.ErrFenced) {
		t.Fatalf("add after fence: %v", err)
	}
	if err := add(t, m, 1, 5, true); err != nil {
		t.Fatalf("recovery add: %v", err)
	}
	m.SetReadOnly(true)
	if err := add(t, m, 3, 0, false); !errors.Is(err, storage.ErrReadOnly) || !m.Usage().ReadOnly {
		t.Fatalf("read-only add: %v", err)
	}
	m.SetReadOnly(false)
	if ls := m.Ledgers(); len(ls) != 1 || ls[0] != (storage.LedgerInfo{LedgerID: 1, LAC: 4, LastEntry: 5, Entries: 6, Bytes: 6, Fenced: true}) {
		t.Fatalf("ledgers = %+v", ls)
	}

	// A range meeting a damaged entry: the entries before it, and the error.
	if es, err := m.ReadRange(1, 0, 4, 0); !errors.Is(err, storage.ErrCorrupt) || len(es) != 2 {
		t.Fatalf("range over a damaged entry = %d, %v", len(es), err)
	}

	// WaitLAC: wakes on a LAC past after, times out with the current one,
	// returns at once on a fenced ledger, ends at Close.
	for e := range int64(5) {
		if err := add(t, m, 5, e, false); err != nil {
			t.Fatal(err)
		}
	}
	woke := make(chan int64, 1)
	go func() {
		lac, _ := m.WaitLAC(context.Background(), 5, 3)
		woke <- lac
	}()
	if err := add(t, m, 5, 5, false); err != nil {
		t.Fatal(err)
	}
	if lac := <-woke; lac != 4 {
		t.Fatalf("woke with LAC %d", lac)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if lac, err := m.WaitLAC(ctx, 5, 4); lac != 4 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timed-out wait = %d, %v", lac, err)
	}
	if lac, err := m.WaitLAC(context.Background(), 1, 100); lac != 4 || err != nil {
		t.Fatalf("wait on a fenced ledger = %d, %v", lac, err)
	}
	waitErr := make(chan error, 1)
	go func() {
		_, err := m.WaitLAC(context.Background(), 5, 100)
		waitErr <- err
	}()

	// Held completions: released in any order, or with ErrClosed at Close.
	m.Hold(true)
	var order []int64
	for e := range int64(3) {
		m.Add(storage.AddRequest{LedgerID: 4, EntryID: e, LAC: e - 1, MasterKey: key}, func(error) { order = append(order, e) })
	}
	if m.Held() != 3 || m.MaxHeld() != 3 {
		t.Fatalf("held %d", m.Held())
	}
	m.ReleaseHeld(func(n int, swap func(i, j int)) { swap(0, 2) })
	if len(order) != 3 || order[0] != 2 || order[2] != 0 {
		t.Fatalf("release order %v", order)
	}
	var closedErr error
	m.Add(storage.AddRequest{LedgerID: 4, EntryID: 3, LAC: 2, MasterKey: key}, func(err error) { closedErr = err })
	m.Close()
	if werr := <-waitErr; !errors.Is(closedErr, storage.ErrClosed) || !errors.Is(werr, storage.ErrClosed) {
		t.Fatalf("at close: held add %v, waiter %v", closedErr, werr)
	}
	if _, err := m.Read(1, 0); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
}
