package region

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Ledger ids in admin paths are plain decimal: no sign, no leading zeros,
// nothing that merely parses as an integer.
func TestLedgerIDIsStrict(t *testing.T) {
	for raw, ok := range map[string]bool{"0": true, "1": true, "42": true, "+1": false, "01": false, "-1": false, "abc": false, "": false, "99999999999999999999": false} {
		r := httptest.NewRequest(http.MethodGet, "/admin/v1/ledgers/x", nil)
		r.SetPathValue("id", raw)
		w := httptest.NewRecorder()
		_, got := ledgerID(w, r)
		if got != ok {
			t.Errorf("ledger id %q: accepted=%v, want %v", raw, got, ok)
		}
		if !ok && w.Code != http.StatusBadRequest {
			t.Errorf("ledger id %q: status %d, want 400", raw, w.Code)
		}
	}
}
