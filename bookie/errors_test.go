package bookie

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/bookiepb"
	"github.com/stratamesh/strata/bookie/storage"
)

// TestCodeCatalogue: every code of the enum but OK and UNSPECIFIED maps
// to exactly one error and back, and every error to its code (wrapped
// too).
func TestCodeCatalogue(t *testing.T) {
	seen := map[bookiepb.Code]bool{}
	for _, c := range codeTable {
		if seen[c.code] {
			t.Fatalf("code %v twice in the table", c.code)
		}
		seen[c.code] = true
		if got := CodeOf(c.err); got != c.code {
			t.Errorf("CodeOf(%v) = %v, want %v", c.err, got, c.code)
		}
		if got := CodeOf(fmt.Errorf("ledger 7: %w", c.err)); got != c.code {
			t.Errorf("CodeOf(wrapped %v) = %v, want %v", c.err, got, c.code)
		}
		err := ErrorOf(c.code, "detail")
		if !errors.Is(err, c.err) {
			t.Errorf("ErrorOf(%v) = %v, does not match %v", c.code, err, c.err)
		}
		for _, other := range codeTable {
			if other.code != c.code && errors.Is(err, other.err) {
				t.Errorf("ErrorOf(%v) also matches %v", c.code, other.err)
			}
		}
		if CodeOf(err) != c.code {
			t.Errorf("CodeOf(ErrorOf(%v)) = %v", c.code, CodeOf(err))
		}
	}
	for v, name := range bookiepb.Code_name {
		code := bookiepb.Code(v)
		if code != bookiepb.Code_CODE_OK && code != bookiepb.Code_CODE_UNSPECIFIED && !seen[code] {
			t.Errorf("code %s has no error", name)
		}
	}
	if ErrorOf(bookiepb.Code_CODE_OK, "") != nil || CodeOf(nil) != bookiepb.Code_CODE_OK {
		t.Error("OK does not map to nil")
	}
	if CodeOf(errors.New("disk on fire")) != bookiepb.Code_CODE_INTERNAL {
		t.Error("an unknown error is not INTERNAL")
	}
	for _, c := range []bookiepb.Code{bookiepb.Code_CODE_UNSPECIFIED, 99} {
		err := ErrorOf(c, "")
		if !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), "unexpected response code") {
			t.Errorf("ErrorOf(%v) = %v, want ErrInternal naming the code", c, err)
		}
	}
	// Messages: the bookie's detail, with the sentinel's text once.
	if got := ErrorOf(bookiepb.Code_CODE_FENCED, "ledger 3: bookie: ledger fenced").Error(); got != "ledger 3: bookie: ledger fenced" {
		t.Errorf("message = %q", got)
	}
	if got := ErrorOf(bookiepb.Code_CODE_INTERNAL, "disk on fire").Error(); got != "bookie: internal error: disk on fire" {
		t.Errorf("message = %q", got)
	}
}

// TestErrorCodesOverTheWire: each engine error and each refusal of the
// service reaches the client as the same error, on the Add stream and on
// the unary RPCs.
func TestErrorCodesOverTheWire(t *testing.T) {
	h := startHarness(t)
	c := h.dial(t, "")
	s := openAdds(t, c)
	ctx := testCtx(t)
	for e := range int64(3) {
		if err := addSync(t, s, addReq(1, e)); err != nil {
			t.Fatal(err)
		}
	}
	var fault error
	h.mem.SetFault(func(op string, ledger, _ int64) error {
		if ledger == 50 {
			return fault
		}
		return nil
	})
	type check struct {
		name string
		want error
		do   func() error
	}
	ignore := func(_ any, err error) error { return err }
	checks := []check{
		{"fenced add", storage.ErrFenced, func() error {
			if _, err := c.Fence(ctx, 2, key); err != nil {
				return err
			}
			return addSync(t, s, addReq(2, 0))
		}},
		{"add with another master key", storage.ErrMasterKey, func() error {
			r := addReq(1, 3)
			r.MasterKey = []byte("other")
			return addSync(t, s, r)
		}},
		{"fence with another master key", storage.ErrMasterKey, func() error { return ignore(c.Fence(ctx, 1, []byte("other"))) }},
		{"read of an unknown ledger", storage.ErrNoLedger, func() error { return ignore(c.Read(ctx, 40, 0)) }},
		{"range read of an unknown ledger", storage.ErrNoLedger, func() error { return ignore(c.ReadRange(ctx, 40, 0, 3, 0)) }},
		{"lac of an unknown ledger", storage.ErrNoLedger, func() error { return ignore(c.ReadLAC(ctx, 40, -1, 0)) }},
		{"read of a missing entry", storage.ErrNoEntry, func() error { return ignore(c.Read(ctx, 1, 7)) }},
		{"range read from a missing entry", storage.ErrNoEntry, func() error { return ignore(c.ReadRange(ctx, 1, 7, 9, 0)) }},
		{"read of a corrupt entry", storage.ErrCorrupt, func() error {
			h.mem.Corrupt(1, 1)
			return ignore(c.Read(ctx, 1, 1))
		}},
		{"range read from a corrupt entry", storage.ErrCorrupt, func() error { return ignore(c.ReadRange(ctx, 1, 1, 2, 0)) }},
		{"add to a read-only bookie", storage.ErrReadOnly, func() error {
			h.mem.SetReadOnly(true)
			defer h.mem.SetReadOnly(false)
			return addSync(t, s, addReq(1, 3))
		}},
		{"invalid add", ErrInvalid, func() error { return addSync(t, s, addReq(-1, 0)) }},
		{"invalid read", ErrInvalid, func() error { return ignore(c.ReadRange(ctx, 1, 5, 2, 0)) }},
		{"invalid fence", ErrInvalid, func() error { return ignore(c.Fence(ctx, 1, nil)) }},
		{"closed engine (add)", storage.ErrClosed, func() error {
			fault = fmt.Errorf("engine: %w", storage.ErrClosed)
			return addSync(t, s, addReq(50, 0))
		}},
		{"closed engine (read)", storage.ErrClosed, func() error { return ignore(c.Read(ctx, 50, 0)) }},
		{"engine failure (add)", ErrInternal, func() error {
			fault = errors.New("disk on fire")
			return addSync(t, s, addReq(50, 0))
		}},
		{"engine failure (fence)", ErrInternal, func() error { return ignore(c.Fence(ctx, 50, key)) }},
		{"engine failure (long poll)", ErrInternal, func() error { return ignore(c.ReadLAC(ctx, 50, 0, time.Second)) }},
		{"wrong instance", ErrWrongInstance, func() error { return ignore(h.dial(t, "not-me").Read(ctx, 1, 0)) }},
	}
	for _, ch := range checks {
		err := ch.do()
		var ce *CodeError
		if !errors.Is(err, ch.want) || !errors.As(err, &ce) || ce.Code != CodeOf(ch.want) {
			t.Errorf("%s: %v, want %v (code %v)", ch.name, err, ch.want, CodeOf(ch.want))
		}
	}
	// After all these refusals the stream still takes adds.
	if err := addSync(t, s, addReq(1, 3)); err != nil {
		t.Fatalf("add after refusals: %v", err)
	}
}
