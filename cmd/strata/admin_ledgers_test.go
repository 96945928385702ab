package main

import (
	"testing"

	"github.com/stratamesh/strata/admin"
)

// TestLedgerRowText: an open ledger has no last entry or length in its
// metadata yet (they are written at close), so the list shows "-" rather
// than a misleading 0; a closed one shows both, an empty closed one -1/0.
func TestLedgerRowText(t *testing.T) {
	for _, tc := range []struct {
		name             string
		l                admin.LedgerView
		lastEntry, bytes string
	}{
		{"open", admin.LedgerView{State: admin.LedgerOpen, LastEntryID: -1}, "-", "-"},
		{"in recovery", admin.LedgerView{State: admin.LedgerInRecovery, LastEntryID: -1}, "-", "-"},
		{"closed", admin.LedgerView{State: admin.LedgerClosed, LastEntryID: 41, Length: 43008}, "41", "43008"},
		{"closed empty", admin.LedgerView{State: admin.LedgerClosed, LastEntryID: -1}, "-1", "0"},
	} {
		if got := lastEntryText(tc.l); got != tc.lastEntry {
			t.Errorf("%s: last entry %q, want %q", tc.name, got, tc.lastEntry)
		}
		if got := lengthText(tc.l); got != tc.bytes {
			t.Errorf("%s: length %q, want %q", tc.name, got, tc.bytes)
		}
	}
}
