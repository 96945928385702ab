package bookie

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/stratamesh/strata/bookie/bookiepb"
	"github.com/stratamesh/strata/bookie/bookietest"
	"github.com/stratamesh/strata/bookie/storage"
	"github.com/stratamesh/strata/internal/testutil"
)

// stats reads the server's Add stream counters.
func (h *harness) stats() (requests, entries, responses int64) {
	s := &h.srv.addStats
	return s.requests.Load(), s.entries.Load(), s.responses.Load()
}

// TestAddStreamBatches: adds sent while the stream's sender is busy travel
// together, many per request, and results completing together travel in
// few responses; an add sent on an idle stream goes at once, alone.
func TestAddStreamBatches(t *testing.T) {
	h := startHarness(t)
	c := h.dial(t, "")
	s := openAdds(t, c)

	// One add at a time: each goes in its own request (nothing waits for
	// company) and gets its own response.
	for e := range int64(5) {
		if err := addSync(t, s, addReq(1, e)); err != nil {
			t.Fatal(err)
		}
	}
	if req, ent, resp := h.stats(); req != 5 || ent != 5 || resp != 5 {
		t.Fatalf("5 adds one at a time: %d requests, %d entries, %d responses", req, ent, resp)
	}

	// A burst: far fewer requests than entries.
	const n = 2000
	h.mem.Hold(true)
	outs := make(chan addOutcome, n)
	for e := range int64(n) {
		if err := s.Send(addReq(2, e), func(err error) { outs <- addOutcome{e, err} }); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, "the burst in flight", 20*time.Second, func() bool { return h.mem.Held() == n })
	req, ent, resp := h.stats()
	req, ent = req-5, ent-5
	t.Logf("%d adds in %d requests", ent, req)
	if ent != n || req >= n/4 {
		t.Fatalf("%d adds sent in a burst took %d requests (%d entries)", n, req, ent)
	}
	if resp != 5 {
		t.Fatalf("%d responses before any add of the burst completed", resp-5)
	}

	// Completed together (in a shuffled order): few responses, and each
	// outcome reaches its own callback once.
	h.mem.ReleaseHeld(rand.New(rand.NewPCG(3, 4)).Shuffle)
	seen := make(map[int64]bool, n)
	for range n {
		o := recv(t, outs, 10*time.Second, "add outcome")
		if o.err != nil || seen[o.entry] {
			t.Fatalf("entry %d: %v (seen before: %v)", o.entry, o.err, seen[o.entry])
		}
		seen[o.entry] = true
	}
	_, _, resp = h.stats()
	t.Logf("%d results in %d responses", n, resp-5)
	if resp-5 >= n/4 {
		t.Fatalf("%d adds completing together took %d responses", n, resp-5)
	}
	if s.Pending() != 0 {
		t.Fatalf("pending = %d", s.Pending())
	}
	if ls := h.mem.Ledgers(); len(ls) != 2 || ls[1].Entries != n {
		t.Fatalf("ledgers = %+v", ls)
	}
}

// TestAddBatchPerEntryOutcomes: the entries of one request meet different
// fates (stored, fenced, bad master key, invalid, engine failure); each
// gets its own code, and the client maps each to its own sentinel error.
func TestAddBatchPerEntryOutcomes(t *testing.T) {
	h := startHarness(t)
	c := h.dial(t, "")
	ctx := testCtx(t)
	if _, err := c.Fence(ctx, 2, key); err != nil {
		t.Fatal(err)
	}
	if err := addSync(t, openAdds(t, c), addReq(3, 0)); err != nil {
		t.Fatal(err)
	}
	h.mem.SetFault(func(op string, ledger, entry int64) error {
		if op == bookietest.OpAdd && ledger == 4 {
			return errors.New("disk on fire")
		}
		return nil
	})
	badKey := addReq(3, 1)
	badKey.MasterKey = []byte("another-key")
	badLAC := addReq(1, 5)
	badLAC.LAC = 5
	recovery := addReq(2, 0)
	recovery.Recovery = true
	cases := []struct {
		req  storage.AddRequest
		code bookiepb.Code
		err  error
	}{
		{addReq(1, 0), bookiepb.Code_CODE_OK, nil},
		{addReq(2, 1), bookiepb.Code_CODE_FENCED, storage.ErrFenced},
		{badKey, bookiepb.Code_CODE_BAD_MASTER_KEY, storage.ErrMasterKey},
		{badLAC, bookiepb.Code_CODE_INVALID, ErrInvalid},
		{addReq(4, 0), bookiepb.Code_CODE_INTERNAL, ErrInternal},
		{recovery, bookiepb.Code_CODE_OK, nil},
		{addReq(1, 1), bookiepb.Code_CODE_OK, nil},
	}

	// Raw: all in one request.
	raw, err := c.rpc.Add(ctx)
	if err != nil {
		t.Fatal(err)
	}
	one := &bookiepb.AddRequest{Instance: h.instance}
	for i, tc := range cases {
		r := tc.req
		one.Entries = append(one.Entries, &bookiepb.AddEntry{Tag: uint64(100 + i), LedgerId: r.LedgerID, EntryId: r.EntryID,
			Lac: r.LAC, MasterKey: r.MasterKey, Payload: r.Payload, Recovery: r.Recovery})
	}
	if err := raw.Send(one); err != nil {
		t.Fatal(err)
	}
	got := rawResults(t, raw, len(cases), 0)
	for i, tc := range cases {
		r := got.results[uint64(100+i)]
		if r.GetCode() != tc.code {
			t.Errorf("entry %d (ledger %d entry %d): %v %q, want %v", i, tc.req.LedgerID, tc.req.EntryID, r.GetCode(), r.GetMessage(), tc.code)
		}
		if tc.code != bookiepb.Code_CODE_OK && (r.GetLedgerId() != tc.req.LedgerID || r.GetEntryId() != tc.req.EntryID) {
			t.Errorf("entry %d: result names ledger %d entry %d", i, r.GetLedgerId(), r.GetEntryId())
		}
	}
	if err := raw.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Recv(); err == nil {
		t.Fatal("raw stream did not end after half-close")
	}

	// Through the client, in a burst (entries 10.. of the same ledgers).
	s := openAdds(t, c)
	h.mem.Hold(true)
	outs := make(chan addOutcome, len(cases))
	for i, tc := range cases {
		r := tc.req
		r.EntryID += 10
		r.LAC += 10
		if err := s.Send(r, func(err error) { outs <- addOutcome{int64(i), err} }); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, "adds in flight", 10*time.Second, func() bool { return h.mem.Held() == len(cases)-1 }) // badLAC never reaches it
	h.mem.ReleaseHeld(nil)
	for range cases {
		o := recv(t, outs, 10*time.Second, "add outcome")
		tc := cases[o.entry]
		if (tc.err == nil) != (o.err == nil) || tc.err != nil && !errors.Is(o.err, tc.err) {
			t.Errorf("case %d (%v): %v", o.entry, tc.code, o.err)
		}
	}
}

// TestAddBatchBeyondInFlightLimit: a request of more entries than
// MaxAddsInFlight is handed to the engine a few at a time, never more
// than the limit at once, and every entry is answered.
func TestAddBatchBeyondInFlightLimit(t *testing.T) {
	const limit, n = 8, 50
	h := startHarness(t, func(c *ServerConfig) { c.MaxAddsInFlight = limit })
	c := h.dial(t, "")
	h.mem.Hold(true)
	raw, err := c.rpc.Add(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	req := &bookiepb.AddRequest{Instance: h.instance}
	for e := range int64(n) {
		en := rawEntry(1, e)
		en.Tag = uint64(e)
		req.Entries = append(req.Entries, en)
	}
	if err := raw.Send(req); err != nil {
		t.Fatal(err)
	}
	// The responses are read as they come (else the server could not
	// free slots), until the stream ends.
	resps := make(chan *bookiepb.AddResponse, n)
	go func() {
		defer close(resps)
		for {
			r, err := raw.Recv()
			if err != nil {
				return
			}
			resps <- r
		}
	}()
	for released := 0; released < n; {
		want := min(limit, n-released)
		testutil.Eventually(t, "a window held", 10*time.Second, func() bool { return h.mem.Held() == want })
		released += h.mem.ReleaseHeld(nil)
	}
	if err := raw.CloseSend(); err != nil {
		t.Fatal(err)
	}
	ok := map[uint64]bool{}
	for r := range resps {
		if len(r.GetFailed()) != 0 || r.GetCode() != bookiepb.Code_CODE_UNSPECIFIED {
			t.Fatalf("response %v", r)
		}
		for _, tag := range r.GetOkTags() {
			ok[tag] = true
		}
	}
	if len(ok) != n {
		t.Fatalf("%d of %d entries answered OK", len(ok), n)
	}
	if m := h.mem.MaxHeld(); m != limit {
		t.Fatalf("%d adds were in the engine at once; want %d", m, limit)
	}
}

// TestAddBatchOversized: entries of one request whose payloads total more
// than MaxAddBatchBytes are all refused; a single entry that large is
// bound by MaxEntrySize only.
func TestAddBatchOversized(t *testing.T) {
	h := startHarness(t)
	c := h.dial(t, "")
	raw, err := c.rpc.Add(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	half := MaxAddBatchBytes/2 + 1
	two := &bookiepb.AddRequest{Instance: h.instance}
	for e := range int64(2) {
		en := rawEntry(1, e)
		en.Tag, en.Payload = uint64(e), make([]byte, half)
		two.Entries = append(two.Entries, en)
	}
	alone := &bookiepb.AddRequest{Instance: h.instance, Entries: []*bookiepb.AddEntry{rawEntry(2, 0)}}
	alone.Entries[0].Tag, alone.Entries[0].Payload = 2, make([]byte, MaxAddBatchBytes+1)
	for _, r := range []*bookiepb.AddRequest{two, alone} {
		if err := raw.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	got := rawResults(t, raw, 3, 0)
	for tag := range uint64(2) {
		if r := got.results[tag]; r.GetCode() != bookiepb.Code_CODE_INVALID || !strings.Contains(r.GetMessage(), "payload bytes in all") {
			t.Errorf("entry %d of an oversized request: %v", tag, r)
		}
	}
	if r := got.results[2]; r.GetCode() != bookiepb.Code_CODE_OK {
		t.Errorf("a single entry of %d bytes: %v", MaxAddBatchBytes+1, r)
	}
	if h.mem.Adds() != 1 {
		t.Fatalf("the engine saw %d adds; want 1", h.mem.Adds())
	}
	if err := raw.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Recv(); err == nil {
		t.Fatal("stream did not end after half-close")
	}
}

// TestAddStreamCopiesPayload: Send copies the payload and key, so the
// caller may reuse its buffers at once, while the add is still queued or
// in flight.
func TestAddStreamCopiesPayload(t *testing.T) {
	h := startHarness(t)
	c := h.dial(t, "")
	s := openAdds(t, c)
	h.mem.Hold(true)
	buf := []byte("original")
	k := bytes.Clone(key)
	const n = 100
	outs := make(chan addOutcome, n)
	for e := range int64(n) {
		copy(buf, fmt.Sprintf("%08d", e))
		if err := s.Send(storage.AddRequest{LedgerID: 1, EntryID: e, LAC: e - 1, MasterKey: k, Payload: buf}, func(err error) { outs <- addOutcome{e, err} }); err != nil {
			t.Fatal(err)
		}
		copy(buf, "scribble")
	}
	k[0] = 'X' // the ledger's key is the one sent, not this
	testutil.Eventually(t, "adds in flight", 10*time.Second, func() bool { return h.mem.Held() == n })
	h.mem.ReleaseHeld(nil)
	for range n {
		if o := recv(t, outs, 10*time.Second, "add outcome"); o.err != nil {
			t.Fatalf("entry %d: %v", o.entry, o.err)
		}
	}
	es, err := c.ReadRange(testCtx(t), 1, 0, n-1, 0)
	if err != nil || len(es) != n {
		t.Fatalf("read back %d entries, %v", len(es), err)
	}
	for i, e := range es {
		if want := fmt.Sprintf("%08d", i); string(e.Payload) != want {
			t.Fatalf("entry %d holds %q, want %q", i, e.Payload, want)
		}
	}
	if _, err := c.Fence(testCtx(t), 1, key); err != nil {
		t.Fatalf("fence with the key sent: %v", err)
	}
}

// TestAddStreamCloseFlushesQueue: Close sends what is still queued before
// half-closing, and returns once all of it has completed.
func TestAddStreamCloseFlushesQueue(t *testing.T) {
	h := startHarness(t)
	c := h.dial(t, "")
	s := openAdds(t, c)
	const n = 3000
	outs := sendAll(t, s, 1, n)
	if err := s.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if len(outs) != n {
		t.Fatalf("Close returned with %d of %d adds completed", len(outs), n)
	}
	for range n {
		if o := <-outs; o.err != nil {
			t.Fatalf("entry %d: %v", o.entry, o.err)
		}
	}
	if ls := h.mem.Ledgers(); len(ls) != 1 || ls[0].Entries != n {
		t.Fatalf("ledgers = %+v", ls)
	}
}

// TestAddBatchBounds checks how the client fills a request: up to
// sendBatchEntries entries and sendBatchBytes bytes, a larger entry alone,
// payloads and keys copied, and nothing kept after reset.
func TestAddBatchBounds(t *testing.T) {
	var b addBatch
	small := storage.AddRequest{LedgerID: 1, MasterKey: key, Payload: make([]byte, 100)}
	size := len(small.Payload) + len(small.MasterKey)
	for i := range sendBatchEntries {
		if !b.fits(size) {
			t.Fatalf("entry %d does not fit", i)
		}
		small.EntryID = int64(i)
		b.add(uint64(i), &small, false)
	}
	if b.fits(size) {
		t.Fatalf("entry %d fits", sendBatchEntries)
	}
	for i, e := range b.entries {
		if e.GetTag() != uint64(i) || e.GetEntryId() != int64(i) || &e.GetMasterKey()[0] != &b.entries[0].GetMasterKey()[0] {
			t.Fatalf("entry %d = %v (key shared: %v)", i, e, &e.GetMasterKey()[0] == &b.entries[0].GetMasterKey()[0])
		}
	}
	reused := b.entries[0]
	b.reset()
	if len(b.entries) != 0 || b.bytes != 0 || reused.GetPayload() != nil || reused.GetMasterKey() != nil {
		t.Fatalf("after reset: %d entries, %d bytes, %v", len(b.entries), b.bytes, reused)
	}

	big := storage.AddRequest{LedgerID: 1, MasterKey: key, Payload: bytes.Repeat([]byte("x"), sendBatchBytes)}
	if !b.fits(len(big.Payload) + len(key)) {
		t.Fatal("an entry larger than a batch does not fit an empty batch")
	}
	b.add(1, &big, false)
	if &b.entries[0].GetPayload()[0] == &big.Payload[0] || !bytes.Equal(b.entries[0].GetPayload(), big.Payload) {
		t.Fatal("payload not copied")
	}
	if b.entries[0] != reused {
		t.Fatal("entry messages are not reused")
	}
	if b.fits(1) {
		t.Fatal("an entry fits after a full batch's worth of bytes")
	}
	b.reset()
	mid := storage.AddRequest{LedgerID: 1, MasterKey: key, Payload: make([]byte, sendBatchBytes/2)}
	b.add(1, &mid, false)
	if !b.fits(sendBatchBytes/2 - len(key)) {
		t.Fatal("half a batch does not fit beside another half")
	}
	if b.fits(sendBatchBytes/2 + 1) {
		t.Fatal("more than half a batch fits beside another half")
	}

	// Borrowing: payload and key are kept, not copied; the bytes count.
	b.reset()
	b.add(7, &small, true)
	if e := b.entries[0]; &e.GetPayload()[0] != &small.Payload[0] || &e.GetMasterKey()[0] != &small.MasterKey[0] ||
		b.bytes != size || len(b.data) != 0 {
		t.Fatalf("borrowed entry %v, %d bytes, %d copied", e, b.bytes, len(b.data))
	}
}

// fakeBookie is a bookie.v1 server whose Add is a test's function.
type fakeBookie struct {
	bookiepb.UnimplementedBookieServer
	add func(bookiepb.Bookie_AddServer) error
}

func (f *fakeBookie) Add(s bookiepb.Bookie_AddServer) error { return f.add(s) }

func startFake(t *testing.T, add func(bookiepb.Bookie_AddServer) error) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(ServerOptions()...)
	bookiepb.RegisterBookieServer(gs, &fakeBookie{add: add})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-served
	})
	return lis.Addr().String()
}

// TestAddStreamBadResponses: a response the client cannot match to its
// adds (an unknown tag, a refusal of a request it never sent) breaks the
// stream, failing every pending add with ErrInternal; a failure naming
// another entry than the add's fails that add with ErrInternal.
func TestAddStreamBadResponses(t *testing.T) {
	answers := []struct {
		name string
		resp func(tags []uint64) *bookiepb.AddResponse
		// what the adds get: by position
		want func(i int, err error) bool
	}{
		{"unknown tag", func(tags []uint64) *bookiepb.AddResponse {
			return &bookiepb.AddResponse{OkTags: []uint64{tags[0], 999}}
		}, func(i int, err error) bool {
			if i == 0 {
				return err == nil
			}
			return errors.Is(err, ErrStreamClosed) && errors.Is(err, ErrInternal) && strings.Contains(err.Error(), "unknown tag 999")
		}},
		{"refusal", func([]uint64) *bookiepb.AddResponse {
			return &bookiepb.AddResponse{Code: bookiepb.Code_CODE_INVALID, Message: "add request without entries"}
		}, func(_ int, err error) bool {
			return errors.Is(err, ErrStreamClosed) && errors.Is(err, ErrInternal) && strings.Contains(err.Error(), "without entries")
		}},
		{"wrong entry", func(tags []uint64) *bookiepb.AddResponse {
			return &bookiepb.AddResponse{OkTags: tags[1:], Failed: []*bookiepb.AddResult{
				{Tag: tags[0], LedgerId: 1, EntryId: 77, Code: bookiepb.Code_CODE_FENCED},
			}}
		}, func(i int, err error) bool {
			if i == 0 {
				return errors.Is(err, ErrInternal) && !errors.Is(err, ErrStreamClosed) && strings.Contains(err.Error(), "entry 77")
			}
			return err == nil
		}},
	}
	for _, a := range answers {
		t.Run(strings.ReplaceAll(a.name, " ", "_"), func(t *testing.T) {
			addr := startFake(t, func(s bookiepb.Bookie_AddServer) error {
				var tags []uint64
				for len(tags) < 3 {
					req, err := s.Recv()
					if err != nil {
						return err
					}
					for _, e := range req.GetEntries() {
						tags = append(tags, e.GetTag())
					}
				}
				if err := s.Send(a.resp(tags)); err != nil {
					return err
				}
				// Then wait for the client to go.
				for {
					if _, err := s.Recv(); err != nil {
						return nil
					}
				}
			})
			c, err := Dial(testCtx(t), addr, DialOptions{Instance: "fake"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s := openAdds(t, c)
			outs := sendAll(t, s, 1, 3)
			for range 3 {
				o := recv(t, outs, 10*time.Second, "add outcome")
				if !a.want(int(o.entry), o.err) {
					t.Errorf("add %d: %v", o.entry, o.err)
				}
			}
			if a.name != "wrong entry" {
				if err := s.Send(addReq(1, 9), func(error) {}); !errors.Is(err, ErrStreamClosed) {
					t.Fatalf("Send on the broken stream: %v", err)
				}
			}
		})
	}
}

// TestAddStreamRefusesUnsendableEntry: an entry too big for any bookie
// message fails alone with ErrInvalid; the stream and the adds around it
// carry on (gRPC would otherwise end the stream for all of them).
func TestAddStreamRefusesUnsendableEntry(t *testing.T) {
	h := startHarness(t)
	c := h.dial(t, "")
	s, err := c.NewAddStream(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan error, 3)
	send := func(entry int64, size int) {
		req := storage.AddRequest{LedgerID: 7, EntryID: entry, LAC: entry - 1, MasterKey: []byte("k"), Payload: make([]byte, size)}
		if err := s.Send(req, func(err error) { results <- err }); err != nil {
			t.Fatalf("Send %d: %v", entry, err)
		}
	}
	send(0, 10)
	send(1, MaxMessageSize+1)
	send(2, 10)
	var oks, invalid int
	for range 3 {
		switch err := <-results; {
		case err == nil:
			oks++
		case errors.Is(err, ErrInvalid) && strings.Contains(err.Error(), "more than a bookie message carries"):
			invalid++
		default:
			t.Fatalf("unexpected result: %v", err)
		}
	}
	if oks != 2 || invalid != 1 {
		t.Fatalf("oks=%d invalid=%d; want 2 and 1", oks, invalid)
	}
	if err := s.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}
