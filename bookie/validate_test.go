package bookie

import (
	"strings"
	"testing"

	"github.com/stratamesh/strata/bookie/bookiepb"
)

func rawAdd(l, e int64) *bookiepb.AddRequest {
	return &bookiepb.AddRequest{LedgerId: l, EntryId: e, Lac: e - 1, MasterKey: key, Payload: []byte("p")}
}

// TestMalformedRequestsAreInvalid sends malformed requests over the wire
// (raw protobuf, bypassing the Client) and checks each is refused with
// CODE_INVALID, names its problem, and never reaches the engine.
func TestMalformedRequestsAreInvalid(t *testing.T) {
	h := startHarness(t, func(c *ServerConfig) { c.MaxEntrySize = 1024 })
	c := h.dial(t, "")
	ctx := testCtx(t)
	inst := h.instance

	adds := []struct {
		want string
		mod  func(r *bookiepb.AddRequest)
	}{
		{"instance is required", func(r *bookiepb.AddRequest) { r.Instance = "" }},
		{"instance is 65 bytes", func(r *bookiepb.AddRequest) { r.Instance = strings.Repeat("x", 65) }},
		{"ledger_id -1", func(r *bookiepb.AddRequest) { r.LedgerId = -1 }},
		{"entry_id -3", func(r *bookiepb.AddRequest) { r.EntryId, r.Lac = -3, -4 }},
		{"lac -2", func(r *bookiepb.AddRequest) { r.Lac = -2 }},
		{"lac 4 must be", func(r *bookiepb.AddRequest) { r.Lac = 4 }},
		{"lac 5 must be", func(r *bookiepb.AddRequest) { r.Lac = 5 }},
		{"master_key is required", func(r *bookiepb.AddRequest) { r.MasterKey = nil }},
		{"master_key is 1025 bytes", func(r *bookiepb.AddRequest) { r.MasterKey = make([]byte, 1025) }},
		{"payload is 1025 bytes", func(r *bookiepb.AddRequest) { r.Payload = make([]byte, 1025) }},
	}
	stream, err := c.rpc.Add(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range adds {
		r := rawAdd(1, 4)
		r.Tag, r.Instance = uint64(i), inst
		a.mod(r)
		if err := stream.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	for range adds {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		a := adds[resp.GetTag()]
		if resp.GetCode() != bookiepb.Code_CODE_INVALID || !strings.Contains(resp.GetMessage(), a.want) || resp.GetEntryId() != entryOf(a.mod) {
			t.Errorf("add %q: %v %q (entry %d)", a.want, resp.GetCode(), resp.GetMessage(), resp.GetEntryId())
		}
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
	if h.mem.Adds() != 0 || len(h.mem.Ledgers()) != 0 {
		t.Fatalf("malformed requests reached the engine: %d adds, %v", h.mem.Adds(), h.mem.Ledgers())
	}
}

// entryOf is the entry id an add test case sends.
func entryOf(mod func(*bookiepb.AddRequest)) int64 {
	r := rawAdd(1, 4)
	mod(r)
	return r.GetEntryId()
}
