package main

import (
	"testing"

	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/region"
)

// TestLedgerRowText: an open ledger has no last entry or length in its
// metadata yet (they are written at close), so the list shows "-" rather
// than a misleading 0; a closed one shows both, an empty closed one -1/0.
func TestLedgerRowText(t *testing.T) {
	for _, tc := range []struct {
		name             string
		md               core.Metadata
		lastEntry, bytes string
	}{
		{"open", core.Metadata{State: core.StateOpen, LastEntryID: core.NoEntry}, "-", "-"},
		{"in recovery", core.Metadata{State: core.StateInRecovery, LastEntryID: core.NoEntry}, "-", "-"},
		{"closed", core.Metadata{State: core.StateClosed, LastEntryID: 41, Length: 43008}, "41", "43008"},
		{"closed empty", core.Metadata{State: core.StateClosed, LastEntryID: core.NoEntry}, "-1", "0"},
	} {
		l := region.LedgerView{Metadata: tc.md}
		if got := lastEntryText(l); got != tc.lastEntry {
			t.Errorf("%s: last entry %q, want %q", tc.name, got, tc.lastEntry)
		}
		if got := lengthText(l); got != tc.bytes {
			t.Errorf("%s: length %q, want %q", tc.name, got, tc.bytes)
		}
	}
}
