package bookie

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/stratamesh/strata/bookie/bookiepb"
	"github.com/stratamesh/strata/bookie/bookietest"
)

// fuzzResponder collects the outcomes of Server.add.
type fuzzResponder struct {
	results []fuzzResult
	refused int
}

type fuzzResult struct {
	tag           uint64
	ledger, entry int64
	code          bookiepb.Code
}

func (f *fuzzResponder) complete(c *addCall, code bookiepb.Code, _ string) {
	f.results = append(f.results, fuzzResult{c.tag, c.ledger, c.entry, code})
}

func (f *fuzzResponder) refuse() { f.refused++ }

// FuzzServerRequest decodes arbitrary bytes as each request type and runs
// the result through the service (no network) against an engine holding
// a few entries: decoding and handling must never panic, every answer
// carries a known code, a request failing validation is CODE_INVALID and
// never reaches the engine, and successful reads are well-formed. An
// AddRequest gets one result per entry, echoing its ids, and the engine
// sees exactly its valid entries.
//
//	go test ./bookie -run '^$' -fuzz '^FuzzServerRequest$' -fuzztime 1m
func FuzzServerRequest(f *testing.F) {
	const inst = "fuzz-instance"
	seed := func(kind byte, m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(kind, b)
	}
	seed(0, &bookiepb.AddRequest{Instance: inst, Entries: []*bookiepb.AddEntry{
		{Tag: 1, LedgerId: 1, EntryId: 5, Lac: 4, MasterKey: key, Payload: []byte("x")},
		{Tag: 2, LedgerId: 1, EntryId: 5, Lac: 5, MasterKey: key},
		{Tag: 3, LedgerId: 2, EntryId: 0, Lac: -1, MasterKey: key, Payload: make([]byte, 65)},
		{Tag: 3, LedgerId: 1, EntryId: 7, Lac: 6, MasterKey: []byte("other")},
	}})
	seed(0, &bookiepb.AddRequest{Instance: "another", Entries: []*bookiepb.AddEntry{{LedgerId: 1, EntryId: 5, Lac: 4, MasterKey: key}}})
	seed(0, &bookiepb.AddRequest{Instance: inst})
	seed(1, &bookiepb.ReadRequest{Instance: inst, LedgerId: 1, FirstEntryId: 0, LastEntryId: 3, MaxBytes: 40})
	seed(1, &bookiepb.ReadRequest{Instance: inst, LedgerId: 1, FirstEntryId: 2, LastEntryId: 2, Fence: true, MasterKey: key})
	seed(2, &bookiepb.ReadLACRequest{Instance: inst, LedgerId: 1, WaitAfter: 7, TimeoutMs: 1})
	seed(3, &bookiepb.FenceRequest{Instance: inst, LedgerId: 1, MasterKey: key})
	seed(4, &bookiepb.InfoRequest{ListLedgers: true})
	f.Add(byte(1), []byte{0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})

	f.Fuzz(func(t *testing.T, kind byte, data []byte) {
		mem := bookietest.NewMem()
		for e := range int64(4) {
			mem.Add(addReq(1, e), func(error) {})
		}
		srv := NewServer(ServerConfig{Storage: mem, BookieID: "b1", Instance: inst,
			Limits: Limits{MaxEntrySize: 64, MaxReadBytes: 100, MaxLongPoll: time.Millisecond}})
		defer srv.Close()
		adds := mem.Adds()
		ctx := context.Background()
		known := func(c bookiepb.Code) {
			if _, ok := bookiepb.Code_name[int32(c)]; !ok || c == bookiepb.Code_CODE_UNSPECIFIED {
				t.Fatalf("answer with code %v", c)
			}
		}
		invalid := func(verr error, c bookiepb.Code) {
			if verr != nil && c != bookiepb.Code_CODE_INVALID {
				t.Fatalf("request failing validation (%v) answered %v", verr, c)
			}
			if verr != nil && mem.Adds() != adds {
				t.Fatal("invalid request reached the engine")
			}
		}
		switch kind % 5 {
		case 0:
			var req bookiepb.AddRequest
			if proto.Unmarshal(data, &req) != nil {
				return
			}
			var got fuzzResponder
			if !srv.add(&req, nil, func(n int) int { return n }, &got) {
				t.Fatal("add stopped")
			}
			es := req.GetEntries()
			if len(es) == 0 {
				if got.refused != 1 || len(got.results) != 0 {
					t.Fatalf("request without entries: %d refusals, %d results", got.refused, len(got.results))
				}
				return
			}
			// The engine (Mem, not holding) completes each add before
			// Add returns: the results come in the entries' order.
			if got.refused != 0 || len(got.results) != len(es) {
				t.Fatalf("%d entries: %d results, %d refusals", len(es), len(got.results), got.refused)
			}
			batchErr := validateAddBatch(&req)
			valid := 0
			for i, e := range es {
				r := got.results[i]
				known(r.code)
				verr := batchErr
				if verr == nil {
					verr = validateAddEntry(e, 64)
				}
				if verr != nil && r.code != bookiepb.Code_CODE_INVALID {
					t.Fatalf("entry %v failing validation (%v) answered %v", e, verr, r.code)
				}
				if verr == nil && req.GetInstance() == inst {
					valid++
				}
				if r.tag != e.GetTag() || r.ledger != e.GetLedgerId() || r.entry != e.GetEntryId() {
					t.Fatalf("result %+v does not echo entry %v", r, e)
				}
			}
			if mem.Adds() != adds+valid {
				t.Fatalf("the engine saw %d adds, want %d (the valid ones for this instance)", mem.Adds()-adds, valid)
			}
		case 1:
			var req bookiepb.ReadRequest
			if proto.Unmarshal(data, &req) != nil {
				return
			}
			r, err := srv.Read(ctx, &req)
			if err != nil {
				t.Fatal(err)
			}
			known(r.GetCode())
			invalid(validateRead(&req), r.GetCode())
			if r.GetCode() == bookiepb.Code_CODE_OK {
				es := r.GetEntries()
				size := 0
				for i, e := range es {
					size += len(e.GetPayload()) + entryEnvelope
					if e.GetLedgerId() != req.GetLedgerId() || e.GetEntryId() != req.GetFirstEntryId()+int64(i) || e.GetEntryId() > req.GetLastEntryId() {
						t.Fatalf("read %v returned entry %v at %d", &req, e, i)
					}
				}
				if len(es) == 0 || (len(es) > 1 && size > 100) {
					t.Fatalf("read %v returned %d entries, %d bytes", &req, len(es), size)
				}
			}
		case 2:
			var req bookiepb.ReadLACRequest
			if proto.Unmarshal(data, &req) != nil {
				return
			}
			r, err := srv.ReadLAC(ctx, &req)
			if err != nil {
				t.Fatal(err)
			}
			known(r.GetCode())
			invalid(validateReadLAC(&req), r.GetCode())
		case 3:
			var req bookiepb.FenceRequest
			if proto.Unmarshal(data, &req) != nil {
				return
			}
			r, err := srv.Fence(ctx, &req)
			if err != nil {
				t.Fatal(err)
			}
			known(r.GetCode())
			invalid(validateFence(&req), r.GetCode())
		case 4:
			var req bookiepb.InfoRequest
			if proto.Unmarshal(data, &req) != nil {
				return
			}
			r, err := srv.Info(ctx, &req)
			if err != nil {
				t.Fatal(err)
			}
			known(r.GetCode())
			invalid(validateInfo(&req), r.GetCode())
		}
	})
}
