package bookie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/stratamesh/strata/bookie/bookiepb"
	"github.com/stratamesh/strata/bookie/storage"
)

// Bounds of one AddRequest as the AddStream coalesces entries: at most
// sendBatchEntries entries and sendBatchBytes of payload and keys (a
// larger entry goes alone). Both are well within what the server accepts
// (MaxAddBatch, MaxAddBatchBytes). The byte bound is small on purpose:
// the bookie starts on a request only once all of it has arrived (gRPC
// carries it in 16 KiB HTTP/2 frames), so a window of adds sent as one
// large request reaches the journal as one convoy that leaves the
// journal idle while the next one travels. Requests of 64 KiB pipeline:
// the journal writes the first while the rest are on the wire
// (docs/perf.md, issue 3: 1 MiB requests kept the journal idle half the
// time at 256 adds in flight).
const (
	sendBatchEntries = 256
	sendBatchBytes   = 64 << 10
)

// ownCopyBytes: an entry at least this large (payload) gets its own copy
// instead of a place in its batch's shared buffer.
const ownCopyBytes = 64 << 10

// AddStream is a pipelined stream of adds to one bookie: Send does not
// wait for the add to complete, and each add's done callback is called
// when its response arrives (in completion order, not send order). Safe
// for concurrent use.
//
// Send queues the add (copying its payload and key, so that the caller
// may reuse them once Send returns, unless
// AddStreamOptions.BorrowPayloads); the stream's sender goroutine sends
// what is queued as one request as soon as it can — at once when it is
// idle — so adds sent while it is busy travel together, up to 256 entries
// or 64 KiB per request; nothing waits for more adds to come.
//
// Flow control: the bookie keeps a bounded number of adds in flight per
// stream (ServerConfig.MaxAddsInFlight); beyond it the sender waits, the
// queue fills up and Send blocks until the bookie has answered some.
// Callbacks run on the stream's receiving goroutine, one at a time: a slow
// callback delays every later response of the stream (and, through flow
// control, its Sends). A callback must not call Send or Close on its own
// stream (Send may wait for flow control, which waits for this very
// goroutine), nor wait for another callback; hand such work to another
// goroutine.
type AddStream struct {
	c      *Client
	stream bookiepb.Bookie_AddClient
	cancel context.CancelFunc
	done   chan struct{} // closed when the receiver has exited
	sent   chan struct{} // closed when the sender has exited
	borrow bool          // AddStreamOptions.BorrowPayloads

	mu          sync.Mutex
	work        sync.Cond // the sender waits on it for adds to send, Close, or a failure
	room        sync.Cond // Sends wait on it for room in the queue
	idle        bool      // the sender waits on work
	roomWaiters int
	nextTag     uint64
	pending     map[uint64]pendingAdd // sent or queued, not completed
	queue       *addBatch             // queued, not yet sent
	err         error                 // non-nil once Send must fail (closed or broken)
	sendErr     error                 // the sender's own failure (not io.EOF), for fail
	closing     bool                  // Close began: the sender sends what is queued, then half-closes
	broken      bool                  // the stream failed: the sender stops
}

type pendingAdd struct {
	ledgerID, entryID int64
	done              func(error)
}

// addBatch is the entries of one AddRequest. The AddEntry messages and
// the buffer holding their payloads and keys are reused from request to
// request (protobuf has encoded them when Send returns).
type addBatch struct {
	entries []*bookiepb.AddEntry // len: entries in use; beyond: spare messages
	data    []byte               // payload and key copies of the entries in use
	bytes   int                  // payload and key bytes of the entries in use
}

// fits tells whether an entry of size bytes may join the batch.
func (b *addBatch) fits(size int) bool {
	return len(b.entries) == 0 || len(b.entries) < sendBatchEntries && b.bytes+size <= sendBatchBytes
}

// add appends req as the entry tagged tag, copying its payload and key
// unless borrow (then it keeps them: they must never change).
func (b *addBatch) add(tag uint64, req *storage.AddRequest, borrow bool) {
	n := len(b.entries)
	if n < cap(b.entries) {
		b.entries = b.entries[:n+1]
	} else {
		b.entries = append(b.entries, nil)
	}
	e := b.entries[n]
	if e == nil {
		e = &bookiepb.AddEntry{}
		b.entries[n] = e
	}
	e.Tag, e.LedgerId, e.EntryId, e.Lac, e.Recovery = tag, req.LedgerID, req.EntryID, req.LAC, req.Recovery
	b.bytes += len(req.Payload) + len(req.MasterKey)
	if borrow {
		e.MasterKey, e.Payload = req.MasterKey, req.Payload
		return
	}
	if n > 0 && bytes.Equal(b.entries[n-1].MasterKey, req.MasterKey) {
		e.MasterKey = b.entries[n-1].MasterKey
	} else {
		e.MasterKey = b.copy(req.MasterKey)
	}
	if len(req.Payload) >= ownCopyBytes {
		e.Payload = bytes.Clone(req.Payload)
	} else {
		e.Payload = b.copy(req.Payload)
	}
}

// copy copies p into the batch's buffer. When the buffer is full a new
// one replaces it (up to sendBatchBytes, twice the size of the last); the
// entries already in keep their slices of the old one, unchanged.
func (b *addBatch) copy(p []byte) []byte {
	if len(p) == 0 {
		return nil
	}
	if cap(b.data)-len(b.data) < len(p) {
		b.data = make([]byte, 0, max(min(2*cap(b.data), sendBatchBytes), len(p), 4096))
	}
	off := len(b.data)
	b.data = append(b.data, p...)
	return b.data[off:len(b.data):len(b.data)]
}

// reset empties the batch for reuse, dropping its references to payloads.
func (b *addBatch) reset() {
	for _, e := range b.entries {
		e.MasterKey, e.Payload = nil, nil
	}
	b.entries = b.entries[:0]
	b.data = b.data[:0]
	b.bytes = 0
}

// AddStreamOptions configures an AddStream (NewAddStreamWith).
type AddStreamOptions struct {
	// BorrowPayloads makes Send keep references to the payloads and
	// master keys it is given instead of copying them, until they are
	// encoded: the caller promises never to modify them after Send (the
	// ledger client's entry frames are immutable once sealed). Saves a
	// copy of every entry per bookie.
	BorrowPayloads bool
}

// NewAddStream opens an Add stream. ctx bounds the stream's whole life:
// when it ends, the stream breaks and pending adds fail.
func (c *Client) NewAddStream(ctx context.Context) (*AddStream, error) {
	return c.NewAddStreamWith(ctx, AddStreamOptions{})
}

// NewAddStreamWith is NewAddStream with options.
func (c *Client) NewAddStreamWith(ctx context.Context, o AddStreamOptions) (*AddStream, error) {
	sctx, cancel := context.WithCancel(ctx)
	stream, err := c.rpc.Add(sctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("bookie: open add stream to %s: %w", c.addr, err)
	}
	s := &AddStream{
		c: c, stream: stream, cancel: cancel,
		done: make(chan struct{}), sent: make(chan struct{}),
		pending: map[uint64]pendingAdd{}, queue: &addBatch{}, borrow: o.BorrowPayloads,
	}
	s.work.L, s.room.L = &s.mu, &s.mu
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cancel()
		return nil, errClientClosed
	}
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		s.receive()
	}()
	go func() {
		defer c.wg.Done()
		s.send()
	}()
	return s, nil
}

// Send sends one add. If it returns nil, done will be called exactly once:
// with nil once the bookie has made the entry durable, with an error
// matching the bookie's refusal (storage.ErrFenced, storage.ErrReadOnly,
// ErrWrongInstance, ...), or with an error wrapping ErrStreamClosed if the
// stream broke first (the add may or may not have been stored). If Send
// returns an error (wrapping ErrStreamClosed), done is never called. Send
// copies req.Payload and req.MasterKey (unless BorrowPayloads).
func (s *AddStream) Send(req storage.AddRequest, done func(error)) error {
	_, err := s.send1(req, done, true)
	return err
}

// TrySend is Send without the wait: if the stream's queue has no room
// for the add it returns false and done is not called. An add too large
// for any message is failed through done and counts as sent. It never
// waits for flow control.
func (s *AddStream) TrySend(req storage.AddRequest, done func(error)) (bool, error) {
	return s.send1(req, done, false)
}

func (s *AddStream) send1(req storage.AddRequest, done func(error), wait bool) (bool, error) {
	size := len(req.Payload) + len(req.MasterKey)
	if size > MaxMessageSize-envelopeRoom {
		// It could never be sent: gRPC would refuse the message and end
		// the stream for every add on it. Fail this add alone (on an
		// open stream; a closed one says so, as for any add).
		s.mu.Lock()
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return false, err
		}
		done(fmt.Errorf("%w: entry %d/%d is %d bytes, more than a bookie message carries (%d)",
			ErrInvalid, req.LedgerID, req.EntryID, size, MaxMessageSize-envelopeRoom))
		return true, nil
	}
	s.mu.Lock()
	for s.err == nil && !s.queue.fits(size) {
		if !wait {
			s.mu.Unlock()
			return false, nil
		}
		s.roomWaiters++
		s.room.Wait()
		s.roomWaiters--
	}
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return false, err
	}
	tag := s.nextTag
	s.nextTag++
	s.pending[tag] = pendingAdd{ledgerID: req.LedgerID, entryID: req.EntryID, done: done}
	s.queue.add(tag, &req, s.borrow)
	if s.idle {
		s.idle = false
		s.work.Signal()
	}
	s.mu.Unlock()
	return true, nil
}

// Pending is the number of adds sent and not yet completed.
func (s *AddStream) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Close half-closes the stream (later Sends fail) once the adds queued
// are sent, waits until every pending add has completed, and releases the
// stream. If ctx ends first the stream is canceled: the adds still pending
// fail, and Close returns ctx's error. Idempotent.
func (s *AddStream) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.err == nil {
		s.err = fmt.Errorf("%w (%s)", ErrStreamClosed, s.c.addr)
	}
	s.closing = true
	s.work.Signal()
	s.room.Broadcast()
	s.mu.Unlock()
	var err error
	select {
	case <-s.done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.cancel()
	<-s.done
	<-s.sent
	return err
}

// send is the stream's single sender: it sends whatever is queued as one
// request, again and again, and half-closes the stream once Close has
// begun and nothing is queued.
func (s *AddStream) send() {
	defer close(s.sent)
	spare := &addBatch{}
	req := &bookiepb.AddRequest{Instance: s.c.instance}
	for {
		s.mu.Lock()
		for len(s.queue.entries) == 0 && !s.closing && !s.broken {
			s.idle = true
			s.work.Wait()
		}
		s.idle = false
		if s.broken {
			s.mu.Unlock()
			return
		}
		if len(s.queue.entries) == 0 { // closing
			s.mu.Unlock()
			_ = s.stream.CloseSend()
			return
		}
		b := s.queue
		s.queue = spare
		if s.roomWaiters > 0 {
			s.room.Broadcast()
		}
		s.mu.Unlock()

		req.Entries = b.entries
		err := s.stream.Send(req)
		req.Entries = nil
		b.reset()
		spare = b
		if err != nil {
			if err != io.EOF {
				// A failure of the client's own (io.EOF: the stream ended;
				// the receiver learns why). The receiver fails the pending
				// adds with it once the canceled stream ends, so that
				// callbacks run on its goroutine only.
				s.mu.Lock()
				s.sendErr = err
				s.mu.Unlock()
				s.cancel()
			}
			return
		}
	}
}

// receive completes pending adds from the responses until the stream
// ends, then fails whatever is still pending.
func (s *AddStream) receive() {
	defer close(s.done)
	defer s.cancel() // the stream is over: release its context
	type completion struct {
		done func(error)
		err  error
	}
	var calls []completion
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			s.fail(err)
			return
		}
		var bad error
		if c := resp.GetCode(); c != bookiepb.Code_CODE_UNSPECIFIED {
			// This client sends no request without entries.
			bad = fmt.Errorf("%w: bookie refused a request: %w", ErrInternal, ErrorOf(c, resp.GetMessage()))
		}
		s.mu.Lock()
		for _, tag := range resp.GetOkTags() {
			p, ok := s.pending[tag]
			if !ok {
				bad = fmt.Errorf("%w: response for unknown tag %d", ErrInternal, tag)
				break
			}
			delete(s.pending, tag)
			calls = append(calls, completion{done: p.done})
		}
		for _, r := range resp.GetFailed() {
			if bad != nil {
				break
			}
			p, ok := s.pending[r.GetTag()]
			if !ok {
				bad = fmt.Errorf("%w: response for unknown tag %d", ErrInternal, r.GetTag())
				break
			}
			delete(s.pending, r.GetTag())
			err := ErrorOf(r.GetCode(), r.GetMessage())
			if r.GetLedgerId() != p.ledgerID || r.GetEntryId() != p.entryID {
				err = fmt.Errorf("%w: response for ledger %d entry %d answered ledger %d entry %d", ErrInternal,
					p.ledgerID, p.entryID, r.GetLedgerId(), r.GetEntryId())
			}
			calls = append(calls, completion{done: p.done, err: err})
		}
		s.mu.Unlock()
		for _, c := range calls {
			c.done(c.err)
		}
		clear(calls)
		calls = calls[:0]
		if bad != nil {
			s.cancel()
			s.fail(bad)
			return
		}
	}
}

// fail ends the stream for Send and fails every pending add with cause
// (or the sender's error, which made the receiver stop). Only the
// receiver calls it.
func (s *AddStream) fail(cause error) {
	if cause == io.EOF {
		cause = errors.New("bookie: add stream ended by the bookie")
	}
	s.mu.Lock()
	if s.sendErr != nil {
		cause = s.sendErr
	}
	err := fmt.Errorf("%w (%s): %w", ErrStreamClosed, s.c.addr, cause)
	if s.err == nil {
		s.err = err
	}
	s.broken = true
	s.work.Signal()
	s.room.Broadcast()
	pending := s.pending
	s.pending = map[uint64]pendingAdd{}
	s.queue.reset()
	s.mu.Unlock()
	for _, p := range pending {
		p.done(err)
	}
}
