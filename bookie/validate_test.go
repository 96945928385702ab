package bookie

import (
	"strings"
	"testing"

	"github.com/stratamesh/strata/bookie/bookiepb"
)

// rawAdd is a request of one entry (ledger l, entry e, LAC e-1, payload
// "p") without instance.
func rawAdd(l, e int64) *bookiepb.AddRequest {
	return &bookiepb.AddRequest{Entries: []*bookiepb.AddEntry{rawEntry(l, e)}}
}

func rawEntry(l, e int64) *bookiepb.AddEntry {
	return &bookiepb.AddEntry{LedgerId: l, EntryId: e, Lac: e - 1, MasterKey: key, Payload: []byte("p")}
}

// rawReplies is what rawResults collected from a raw Add stream.
type rawReplies struct {
	results   map[uint64]*bookiepb.AddResult // by tag; OK ones carry only Tag and Code
	responses int                            // AddResponse messages received
	refusals  []*bookiepb.AddResponse        // responses with a code of their own
}

// rawResults receives responses on a raw Add stream until n entries have
// their result and the refusals expected (of requests without entries)
// have come; a second result for one tag fails the test.
func rawResults(t *testing.T, stream bookiepb.Bookie_AddClient, n, refusals int) rawReplies {
	t.Helper()
	r := rawReplies{results: map[uint64]*bookiepb.AddResult{}}
	put := func(res *bookiepb.AddResult) {
		if _, dup := r.results[res.GetTag()]; dup {
			t.Fatalf("two results for tag %d", res.GetTag())
		}
		r.results[res.GetTag()] = res
	}
	for len(r.results) < n || len(r.refusals) < refusals {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("after %d results: %v", len(r.results), err)
		}
		r.responses++
		if resp.GetCode() != bookiepb.Code_CODE_UNSPECIFIED {
			r.refusals = append(r.refusals, resp)
		}
		for _, tag := range resp.GetOkTags() {
			put(&bookiepb.AddResult{Tag: tag, Code: bookiepb.Code_CODE_OK})
		}
		for _, res := range resp.GetFailed() {
			if res.GetCode() == bookiepb.Code_CODE_OK {
				t.Fatalf("failed result with CODE_OK: %v", res)
			}
			put(res)
		}
	}
	return r
}

// TestMalformedRequestsAreInvalid sends malformed requests over the wire
// (raw protobuf, bypassing the Client) and checks each is refused with
// CODE_INVALID, names its problem, and never reaches the engine.
func TestMalformedRequestsAreInvalid(t *testing.T) {
	h := startHarness(t, func(c *ServerConfig) { c.MaxEntrySize = 1024 })
	c := h.dial(t, "")
	ctx := testCtx(t)
	inst := h.instance

	// Faults of one entry, all in one request: each gets its own answer.
	entries := []struct {
		want string
		mod  func(e *bookiepb.AddEntry)
	}{
		{"ledger_id -1", func(e *bookiepb.AddEntry) { e.LedgerId = -1 }},
		{"entry_id -3", func(e *bookiepb.AddEntry) { e.EntryId, e.Lac = -3, -4 }},
		{"lac -2", func(e *bookiepb.AddEntry) { e.Lac = -2 }},
		{"lac 4 must be", func(e *bookiepb.AddEntry) { e.Lac = 4 }},
		{"lac 5 must be", func(e *bookiepb.AddEntry) { e.Lac = 5 }},
		{"master_key is required", func(e *bookiepb.AddEntry) { e.MasterKey = nil }},
		{"master_key is 1025 bytes", func(e *bookiepb.AddEntry) { e.MasterKey = make([]byte, 1025) }},
		{"payload is 1025 bytes", func(e *bookiepb.AddEntry) { e.Payload = make([]byte, 1025) }},
	}
	// Faults of a whole request: every entry of it gets the answer.
	const perRequest = 3
	requests := []struct {
		want string
		mod  func(r *bookiepb.AddRequest)
	}{
		{"instance is required", func(r *bookiepb.AddRequest) { r.Instance = "" }},
		{"instance is 65 bytes", func(r *bookiepb.AddRequest) { r.Instance = strings.Repeat("x", 65) }},
		{"has 1025 entries (at most 1024)", func(r *bookiepb.AddRequest) {
			for len(r.Entries) < MaxAddBatch+1 {
				r.Entries = append(r.Entries, rawEntry(1, 4))
			}
		}},
	}
	stream, err := c.rpc.Add(ctx)
	if err != nil {
		t.Fatal(err)
	}
	one := &bookiepb.AddRequest{Instance: inst}
	for i, a := range entries {
		e := rawEntry(1, 4)
		e.Tag = uint64(i)
		a.mod(e)
		one.Entries = append(one.Entries, e)
	}
	if err := stream.Send(one); err != nil {
		t.Fatal(err)
	}
	var want []string // by tag
	for _, a := range entries {
		want = append(want, a.want)
	}
	for _, a := range requests {
		r := &bookiepb.AddRequest{Instance: inst}
		for range perRequest {
			r.Entries = append(r.Entries, rawEntry(1, 4))
		}
		a.mod(r)
		for _, e := range r.Entries {
			e.Tag = uint64(len(want))
			want = append(want, a.want)
		}
		if err := stream.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	// No entries at all: refused in the response's own code.
	if err := stream.Send(&bookiepb.AddRequest{Instance: inst}); err != nil {
		t.Fatal(err)
	}
	got := rawResults(t, stream, len(want), 1)
	for tag, w := range want {
		r := got.results[uint64(tag)]
		if r.GetCode() != bookiepb.Code_CODE_INVALID || !strings.Contains(r.GetMessage(), w) {
			t.Errorf("add %q: %v %q", w, r.GetCode(), r.GetMessage())
		}
	}
	for i, a := range entries {
		if r := got.results[uint64(i)]; r.GetEntryId() != entryOf(a.mod) || r.GetLedgerId() != ledgerOf(a.mod) {
			t.Errorf("add %q answered for ledger %d entry %d", a.want, r.GetLedgerId(), r.GetEntryId())
		}
	}
	if r := got.refusals[0]; r.GetCode() != bookiepb.Code_CODE_INVALID || !strings.Contains(r.GetMessage(), "without entries") {
		t.Errorf("request without entries: %v", r)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err == nil {
		t.Fatal("stream did not end after half-close")
	}

	reads := []struct {
		want string
		req  *bookiepb.ReadRequest
	}{
		{"instance is required", &bookiepb.ReadRequest{LedgerId: 1}},
		{"ledger_id -1", &bookiepb.ReadRequest{Instance: inst, LedgerId: -1}},
		{"first_entry_id -1", &bookiepb.ReadRequest{Instance: inst, LedgerId: 1, FirstEntryId: -1, LastEntryId: 3}},
		{"last_entry_id 2 is before first_entry_id 5", &bookiepb.ReadRequest{Instance: inst, LedgerId: 1, FirstEntryId: 5, LastEntryId: 2}},
		{"max_bytes -1", &bookiepb.ReadRequest{Instance: inst, LedgerId: 1, LastEntryId: 3, MaxBytes: -1}},
		{"fenced read: bookie: invalid request: master_key is required", &bookiepb.ReadRequest{Instance: inst, LedgerId: 1, Fence: true}},
	}
	for _, r := range reads {
		resp, err := c.rpc.Read(ctx, r.req)
		if err != nil || resp.GetCode() != bookiepb.Code_CODE_INVALID || !strings.Contains(resp.GetMessage(), r.want) || len(resp.GetEntries()) != 0 {
			t.Errorf("read %q: %v, %v", r.want, resp, err)
		}
	}
	lacs := []struct {
		want string
		req  *bookiepb.ReadLACRequest
	}{
		{"instance is required", &bookiepb.ReadLACRequest{LedgerId: 1}},
		{"ledger_id -9", &bookiepb.ReadLACRequest{Instance: inst, LedgerId: -9}},
		{"wait_after -2", &bookiepb.ReadLACRequest{Instance: inst, LedgerId: 1, WaitAfter: -2, TimeoutMs: 10}},
	}
	for _, r := range lacs {
		resp, err := c.rpc.ReadLAC(ctx, r.req)
		if err != nil || resp.GetCode() != bookiepb.Code_CODE_INVALID || !strings.Contains(resp.GetMessage(), r.want) {
			t.Errorf("read_lac %q: %v, %v", r.want, resp, err)
		}
	}
	fences := []struct {
		want string
		req  *bookiepb.FenceRequest
	}{
		{"instance is required", &bookiepb.FenceRequest{LedgerId: 1, MasterKey: key}},
		{"ledger_id -1", &bookiepb.FenceRequest{Instance: inst, LedgerId: -1, MasterKey: key}},
		{"master_key is required", &bookiepb.FenceRequest{Instance: inst, LedgerId: 1}},
	}
	for _, r := range fences {
		resp, err := c.rpc.Fence(ctx, r.req)
		if err != nil || resp.GetCode() != bookiepb.Code_CODE_INVALID || !strings.Contains(resp.GetMessage(), r.want) {
			t.Errorf("fence %q: %v, %v", r.want, resp, err)
		}
	}
	resp, err := c.rpc.Info(ctx, &bookiepb.InfoRequest{Instance: strings.Repeat("y", 100)})
	if err != nil || resp.GetCode() != bookiepb.Code_CODE_INVALID {
		t.Errorf("info with a 100-byte instance: %v, %v", resp, err)
	}
	resp, err = c.rpc.Info(ctx, &bookiepb.InfoRequest{ListLedgers: true, LedgersFrom: -1})
	if err != nil || resp.GetCode() != bookiepb.Code_CODE_INVALID || !strings.Contains(resp.GetMessage(), "ledgers_from -1") {
		t.Errorf("info from ledger -1: %v, %v", resp, err)
	}
	if h.mem.Adds() != 0 || len(h.mem.Ledgers()) != 0 {
		t.Fatalf("malformed requests reached the engine: %d adds, %v", h.mem.Adds(), h.mem.Ledgers())
	}
}

// entryOf and ledgerOf are the ids of an entry test case.
func entryOf(mod func(*bookiepb.AddEntry)) int64 {
	e := rawEntry(1, 4)
	mod(e)
	return e.GetEntryId()
}

func ledgerOf(mod func(*bookiepb.AddEntry)) int64 {
	e := rawEntry(1, 4)
	mod(e)
	return e.GetLedgerId()
}
