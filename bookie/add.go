package bookie

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/stratamesh/strata/bookie/bookiepb"
	"github.com/stratamesh/strata/bookie/storage"
)

// Batches on the Add stream: an AddRequest carries up to MaxAddBatch
// entries and, when it has more than one, up to MaxAddBatchBytes of
// payload in all. The server answers every entry of a request beyond
// either bound with CODE_INVALID (so a single entry is bound by
// Limits.MaxEntrySize only). The Client stays well within both.
const (
	MaxAddBatch      = 1024
	MaxAddBatchBytes = 4 << 20
)

// maxDecodedEntries bounds the entries of an AddRequest the server
// decodes at all: one with more is a protocol error that ends the stream
// (gRPC Internal, naming the count) before anything is allocated for its
// entries. An empty entry takes 2 bytes on the wire and several hundred
// in memory once decoded, so without it an 8 MiB request cost over a
// GiB; up to this bound each entry past MaxAddBatch still gets its
// CODE_INVALID.
const maxDecodedEntries = 4 * MaxAddBatch

// maxResultsPerResponse bounds the results of one AddResponse; more wait
// for the next one.
const maxResultsPerResponse = 4096

// addStream is one Add stream on the server. Two goroutines serve it:
//
//   - the receiver (owned by the Server) reads requests and hands each of
//     their entries to Storage.Add (or answers it at once when it is
//     invalid or for another instance), taking an in-flight slot per entry
//     first;
//   - the sender (the gRPC handler goroutine) is the only one that calls
//     stream.Send: whenever results are queued it sends them all (up to
//     maxResultsPerResponse) in one response, then frees their slots.
//     Results completing while it sends go in the next response: it never
//     waits for more.
//
// Storage.Add's callback only appends the result to the queue under mu,
// so it never blocks; the queue holds at most one result per slot. When
// every slot is taken the receiver stops reading; gRPC flow control then
// holds the client back. A client that never reads its responses thus
// stalls its own stream (the sender blocks in Send, slots stay taken, the
// receiver stops reading) and nothing else: memory stays bounded by
// MaxAddsInFlight entries plus the request being handed in.
type addStream struct {
	srv      *Server
	stream   bookiepb.Bookie_AddServer
	recvDone chan struct{} // closed when the receiver stops
	recvErr  error         // why it stopped (nil: client half-closed); read after recvDone

	// ready is signaled (never blocking, capacity 1) when results are
	// queued; freed when slots are.
	ready, freed chan struct{}

	mu      sync.Mutex
	free    int      // slots not taken: MaxAddsInFlight - entries in flight
	ok      []uint64 // tags completed OK, not yet sent
	failed  []*bookiepb.AddResult
	refused int // requests without entries, not yet answered
}

// Add implements bookiepb.BookieServer.
func (s *Server) Add(stream bookiepb.Bookie_AddServer) error {
	as := &addStream{
		srv: s, stream: stream,
		recvDone: make(chan struct{}),
		ready:    make(chan struct{}, 1),
		freed:    make(chan struct{}, 1),
		free:     s.cfg.MaxAddsInFlight,
	}
	if s.isClosed() || !s.goStream(as.receive) {
		return errUnavailable
	}
	return as.send()
}

// send is the stream's single sender. It returns nil once the client has
// half-closed and every entry received has been answered.
func (as *addStream) send() error {
	ctx := as.stream.Context()
	recvDone := as.recvDone
	for {
		resp, n, idle := as.take()
		if resp != nil {
			if err := as.stream.Send(resp); err != nil {
				return err
			}
			as.srv.addStats.responses.Add(1)
			as.release(n)
			continue
		}
		if recvDone == nil && idle {
			return nil
		}
		select {
		case <-as.ready:
		case <-recvDone:
			if as.recvErr != nil {
				return as.recvErr
			}
			recvDone = nil
		case <-ctx.Done():
			return ctx.Err()
		case <-as.srv.base.Done():
			return errUnavailable
		}
	}
}

// take dequeues the next response to send and the number of slots its
// results hold, or returns a nil response (and whether no entry is in
// flight) when nothing is queued.
func (as *addStream) take() (resp *bookiepb.AddResponse, slots int, idle bool) {
	as.mu.Lock()
	defer as.mu.Unlock()
	if len(as.ok) == 0 && len(as.failed) == 0 && as.refused == 0 {
		return nil, 0, as.free == as.srv.cfg.MaxAddsInFlight
	}
	resp = &bookiepb.AddResponse{}
	nf := min(len(as.failed), maxResultsPerResponse)
	if nf > 0 {
		resp.Failed = as.failed[:nf:nf]
		as.failed = as.failed[nf:]
		if len(as.failed) == 0 {
			as.failed = nil
		}
	}
	nok := min(len(as.ok), maxResultsPerResponse-nf)
	if nok > 0 {
		resp.OkTags = as.ok[:nok:nok]
		as.ok = as.ok[nok:]
		if len(as.ok) == 0 {
			as.ok = nil
		}
	}
	if as.refused > 0 {
		resp.Code = bookiepb.Code_CODE_INVALID
		resp.Message = errEmptyAdd.Error()
		as.refused = 0
	}
	return resp, nf + nok, false
}

// release frees n slots.
func (as *addStream) release(n int) {
	if n == 0 {
		return
	}
	as.mu.Lock()
	as.free += n
	as.mu.Unlock()
	select {
	case as.freed <- struct{}{}:
	default:
	}
}

// acquire takes between 1 and want slots, waiting until one is free; it
// returns 0 (and sets recvErr) when the stream or the server ends first.
func (as *addStream) acquire(want int) int {
	ctx := as.stream.Context()
	for {
		as.mu.Lock()
		if as.free > 0 {
			n := min(want, as.free)
			as.free -= n
			as.mu.Unlock()
			return n
		}
		as.mu.Unlock()
		select {
		case <-as.freed:
		case <-ctx.Done():
			as.recvErr = ctx.Err()
			return 0
		case <-as.srv.base.Done():
			as.recvErr = errUnavailable
			return 0
		}
	}
}

// receive reads requests until the client half-closes, the stream ends, or
// the server closes.
func (as *addStream) receive() {
	defer close(as.recvDone)
	for {
		// A new message each time: its entries' buffers now belong to
		// the engine.
		in := new(addRequestIn)
		if err := as.stream.RecvMsg(in); err != nil {
			if err != io.EOF {
				as.recvErr = err
			}
			return
		}
		as.srv.addStats.requests.Add(1)
		as.srv.addStats.entries.Add(int64(len(in.GetEntries())))
		if !as.srv.add(&in.AddRequest, in.recs, as.acquire, as) {
			return
		}
	}
}

// complete implements addResponder: it queues the result for the sender
// and never blocks (the entry holds a slot until its result is sent).
func (as *addStream) complete(c *addCall, code bookiepb.Code, msg string) {
	as.mu.Lock()
	wake := len(as.ok) == 0 && len(as.failed) == 0
	if code == bookiepb.Code_CODE_OK {
		as.ok = append(as.ok, c.tag)
	} else {
		as.failed = append(as.failed, &bookiepb.AddResult{Tag: c.tag, LedgerId: c.ledger, EntryId: c.entry, Code: code, Message: msg})
	}
	as.mu.Unlock()
	if wake {
		as.signal()
	}
}

// refuse implements addResponder.
func (as *addStream) refuse() {
	as.mu.Lock()
	as.refused++
	as.mu.Unlock()
	as.signal()
}

func (as *addStream) signal() {
	select {
	case as.ready <- struct{}{}:
	default:
	}
}

// addResponder receives the outcomes of add: complete is called exactly
// once per entry (c names it by tag, ledger and entry), possibly on the
// engine's goroutines, and must not block; refuse is called for a request
// without entries.
type addResponder interface {
	complete(c *addCall, code bookiepb.Code, msg string)
	refuse()
}

// add validates a request and passes its entries to the engine, in order,
// after acquire(k) granted slots for the next k of them (acquire returns
// between 1 and the number asked for, or 0 to stop: add then returns
// false, and the entries not handed in get no outcome). recs, when not
// nil, holds each entry's record buffer (see addRequestIn), handed to the
// engine with it.
func (s *Server) add(req *bookiepb.AddRequest, recs [][]byte, acquire func(int) int, r addResponder) bool {
	entries := req.GetEntries()
	if len(entries) == 0 {
		r.refuse()
		return true
	}
	batchErr := validateAddBatch(req)
	calls := make([]addCall, len(entries))
	sreqs := make([]storage.AddRequest, 0, len(entries))
	dones := make([]func(error), 0, len(entries))
	for i := 0; i < len(entries); {
		n := acquire(len(entries) - i)
		if n <= 0 {
			return false
		}
		sreqs, dones = sreqs[:0], dones[:0]
		for j, e := range entries[i : i+n] {
			c := &calls[i+j]
			c.srv, c.r = s, r
			c.tag, c.ledger, c.entry = e.GetTag(), e.GetLedgerId(), e.GetEntryId()
			var rec []byte
			if recs != nil {
				rec = recs[i+j]
			}
			sr, err := s.checkEntry(e, rec, batchErr, req.GetInstance())
			if err != nil {
				// Outcomes keep the entries' order with an engine that
				// completes at once (tests rely on it).
				s.store(sreqs, dones)
				sreqs, dones = sreqs[:0], dones[:0]
				c.done(err)
				continue
			}
			sreqs, dones = append(sreqs, sr), append(dones, c.done)
		}
		s.store(sreqs, dones)
		i += n
	}
	return true
}

// batchAdder is a Storage taking several adds at once, which it journals
// together (storage.Engine.AddBatch).
type batchAdder interface {
	AddBatch(reqs []storage.AddRequest, done []func(error))
}

// store hands adds to the engine: all at once when it takes batches.
func (s *Server) store(reqs []storage.AddRequest, dones []func(error)) {
	if len(reqs) == 0 {
		return
	}
	if b, ok := s.st.(batchAdder); ok {
		b.AddBatch(reqs, dones)
		return
	}
	for i := range reqs {
		s.st.Add(reqs[i], dones[i])
	}
}

// addCall is one entry of a request on its way through the engine. The
// calls of a request share one allocation, and none keeps the payload.
type addCall struct {
	srv           *Server
	r             addResponder
	tag           uint64
	ledger, entry int64
	once          atomic.Bool
}

// checkEntry validates entry e (after its request's batchErr) and
// returns it as the engine's request, with rec (nil, or e's payload in a
// record buffer: see storage.AddRequest.Record), or the error to answer.
func (s *Server) checkEntry(e *bookiepb.AddEntry, rec []byte, batchErr error, instance string) (storage.AddRequest, error) {
	err := batchErr
	if err == nil {
		err = validateAddEntry(e, s.cfg.MaxEntrySize)
	}
	if err := s.checkFor(err, instance); err != nil {
		return storage.AddRequest{}, err
	}
	return storage.AddRequest{
		LedgerID: e.GetLedgerId(), EntryID: e.GetEntryId(), LAC: e.GetLac(),
		MasterKey: e.GetMasterKey(), Payload: e.GetPayload(), Recovery: e.GetRecovery(), Record: rec,
	}, nil
}

// done is the engine's completion callback.
func (c *addCall) done(err error) {
	if !c.once.CompareAndSwap(false, true) {
		c.srv.log.Error("storage completed an add twice", "ledger", c.ledger, "entry", c.entry, "err", err)
		return
	}
	code, msg := c.srv.codeMsg("add", c.ledger, err)
	c.r.complete(c, code, msg)
}
