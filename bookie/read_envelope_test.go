package bookie

import (
	"testing"

	"github.com/stratamesh/strata/bookie/storage"
)

// TestRangeReadFitsTheMessageWithLargeIDs: with MaxReadBytes at its
// allowed maximum, a range of entries whose ids and LAC take the most
// bytes on the wire (ledger and entry ids near 2^62, LAC -1) is cut short
// to fit MaxMessageSize, not sent whole and refused by gRPC
// (ResourceExhausted): the per-entry envelope counted too little.
func TestRangeReadFitsTheMessageWithLargeIDs(t *testing.T) {
	h := startHarness(t, func(c *ServerConfig) { c.MaxReadBytes = MaxMessageSize - envelopeRoom })
	const ledger = int64(1) << 62
	const base = int64(1) << 62
	payload := make([]byte, 500)
	const n = 17000
	for i := range int64(n) {
		h.mem.Add(storage.AddRequest{LedgerID: ledger, EntryID: base + i, LAC: storage.NoEntry, MasterKey: key, Payload: payload},
			func(err error) {
				if err != nil {
					t.Fatal(err)
				}
			})
	}
	c := h.dial(t, "")
	es, err := c.ReadRange(testCtx(t), ledger, base, base+n-1, 0)
	if err != nil {
		t.Fatalf("range read of %d 500-byte entries: %v", n, err)
	}
	if len(es) == 0 || len(es) >= n || es[0].EntryID != base {
		t.Fatalf("range read returned %d entries; want a prefix, from entry %d, cut to the message size", len(es), base)
	}
}
