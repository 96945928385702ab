package bookie

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stratamesh/strata/bookie/storage"
)

// TestRangeReadStopsAtADamagedEntry: a range read that meets a damaged
// entry past its first answers the entries before it (the read stops
// early there), and a read starting at the damaged entry reports it as
// corruption. Before, the intact entries were dropped and the whole read
// was answered CODE_CORRUPT, as if the first entry were damaged.
func TestRangeReadStopsAtADamagedEntry(t *testing.T) {
	h := startHarness(t)
	c := h.dial(t, "")
	ctx := testCtx(t)
	s := openAdds(t, c)
	for e := range int64(10) {
		if err := addSync(t, s, addReq(1, e)); err != nil {
			t.Fatal(err)
		}
	}
	h.mem.Corrupt(1, 5)
	es, err := c.ReadRange(ctx, 1, 0, 9, 0)
	if err != nil || len(es) != 5 {
		t.Fatalf("range 0..9 with entry 5 damaged = %d entries, %v; want entries 0..4", len(es), err)
	}
	for i, e := range es {
		if e.EntryID != int64(i) || string(e.Payload) != fmt.Sprintf("l1-e%d", i) {
			t.Fatalf("entry %d = %+v", i, e)
		}
	}
	if _, err := c.ReadRange(ctx, 1, 5, 9, 0); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("range from the damaged entry: %v, want ErrCorrupt", err)
	}
	if _, err := c.Read(ctx, 1, 5); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("read of the damaged entry: %v, want ErrCorrupt", err)
	}
}

// TestInfoListsLedgersInPages: a bookie with more ledgers than one Info
// answer lists (whose size would pass MaxMessageSize) answers in pages,
// and Client.Info gathers them all, in order.
func TestInfoListsLedgersInPages(t *testing.T) {
	h := startHarness(t)
	n := 2*infoPageLedgers + 10
	for l := range int64(n) {
		h.mem.Add(addReq(l, 0), func(error) {})
	}
	c := h.dial(t, "")
	info, err := c.Info(testCtx(t), true)
	if err != nil {
		t.Fatalf("Info(list_ledgers) with %d ledgers: %v", n, err)
	}
	if info.NumLedgers != n || len(info.Ledgers) != n {
		t.Fatalf("%d ledgers counted, %d listed, want %d", info.NumLedgers, len(info.Ledgers), n)
	}
	for i, l := range info.Ledgers {
		if l.LedgerID != int64(i) {
			t.Fatalf("ledger %d listed as %d", i, l.LedgerID)
		}
	}
}
