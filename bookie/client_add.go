package bookie

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/stratamesh/strata/bookie/bookiepb"
	"github.com/stratamesh/strata/bookie/storage"
)

// AddStream is a pipelined stream of adds to one bookie: Send does not
// wait for the add to complete, and each add's done callback is called
// when its response arrives (in completion order, not send order). Safe
// for concurrent use.
//
// Flow control: the bookie keeps a bounded number of adds in flight per
// stream (ServerConfig.MaxAddsInFlight); beyond it Send blocks until the
// bookie has answered some. Callbacks run on the stream's receiving
// goroutine, one at a time: a slow callback delays every later response of
// the stream (and, through flow control, its Sends). A callback must not
// call Send or Close on its own stream (Send may wait for flow control,
// which waits for this very goroutine), nor wait for another callback;
// hand such work to another goroutine.
type AddStream struct {
	c      *Client
	stream bookiepb.Bookie_AddClient
	cancel context.CancelFunc
	done   chan struct{} // closed when the receiver has exited

	sendMu     sync.Mutex // serializes stream.Send and CloseSend
	sendClosed bool

	mu      sync.Mutex
	nextTag uint64
	pending map[uint64]pendingAdd
	err     error // non-nil once Send must fail (closed or broken)
}

type pendingAdd struct {
	ledgerID, entryID int64
	done              func(error)
}

// NewAddStream opens an Add stream. ctx bounds the stream's whole life:
// when it ends, the stream breaks and pending adds fail.
func (c *Client) NewAddStream(ctx context.Context) (*AddStream, error) {
	sctx, cancel := context.WithCancel(ctx)
	stream, err := c.rpc.Add(sctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("bookie: open add stream to %s: %w", c.addr, err)
	}
	s := &AddStream{c: c, stream: stream, cancel: cancel, done: make(chan struct{}), pending: map[uint64]pendingAdd{}}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cancel()
		return nil, errClientClosed
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		s.receive()
	}()
	return s, nil
}

// Send sends one add. If it returns nil, done will be called exactly once:
// with nil once the bookie has made the entry durable, with an error
// matching the bookie's refusal (storage.ErrFenced, storage.ErrReadOnly,
// ErrWrongInstance, ...), or with an error wrapping ErrStreamClosed if the
// stream broke first (the add may or may not have been stored). If Send
// returns an error (wrapping ErrStreamClosed), done is never called.
func (s *AddStream) Send(req storage.AddRequest, done func(error)) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	tag := s.nextTag
	s.nextTag++
	s.pending[tag] = pendingAdd{ledgerID: req.LedgerID, entryID: req.EntryID, done: done}
	s.mu.Unlock()
	err := s.stream.Send(&bookiepb.AddRequest{
		Tag: tag, Instance: s.c.instance,
		LedgerId: req.LedgerID, EntryId: req.EntryID, Lac: req.LAC,
		MasterKey: req.MasterKey, Payload: req.Payload, Recovery: req.Recovery,
	})
	if err == nil {
		return nil
	}
	s.mu.Lock()
	_, still := s.pending[tag]
	delete(s.pending, tag)
	cause := s.err
	s.mu.Unlock()
	if !still {
		return nil // the receiver already failed it: done has been called
	}
	if cause == nil {
		cause = fmt.Errorf("%w (%s): %w", ErrStreamClosed, s.c.addr, err)
	}
	return cause
}

// Pending is the number of adds sent and not yet completed.
func (s *AddStream) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Close half-closes the stream (later Sends fail), waits until every
// pending add has completed, and releases the stream. If ctx ends first
// the stream is canceled: the adds still pending fail, and Close returns
// ctx's error. Idempotent.
func (s *AddStream) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.err == nil {
		s.err = fmt.Errorf("%w (%s)", ErrStreamClosed, s.c.addr)
	}
	s.mu.Unlock()
	// A Send blocked by flow control holds sendMu; canceling the stream
	// (when ctx ends first) releases it.
	locked := make(chan struct{})
	go func() {
		s.sendMu.Lock()
		close(locked)
	}()
	var err error
	select {
	case <-locked:
	case <-ctx.Done():
		err = ctx.Err()
		s.cancel()
		<-locked
	}
	if !s.sendClosed {
		s.sendClosed = true
		_ = s.stream.CloseSend()
	}
	s.sendMu.Unlock()
	if err == nil {
		select {
		case <-s.done:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	s.cancel()
	<-s.done
	return err
}

// receive completes pending adds from the responses until the stream
// ends, then fails whatever is still pending.
func (s *AddStream) receive() {
	defer close(s.done)
	defer s.cancel() // the stream is over: release its context
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			s.fail(err)
			return
		}
		s.mu.Lock()
		p, ok := s.pending[resp.GetTag()]
		delete(s.pending, resp.GetTag())
		s.mu.Unlock()
		if !ok {
			s.cancel()
			s.fail(fmt.Errorf("%w: response for unknown tag %d", ErrInternal, resp.GetTag()))
			return
		}
		if resp.GetLedgerId() != p.ledgerID || resp.GetEntryId() != p.entryID {
			p.done(fmt.Errorf("%w: response for ledger %d entry %d answered ledger %d entry %d", ErrInternal,
				p.ledgerID, p.entryID, resp.GetLedgerId(), resp.GetEntryId()))
			continue
		}
		p.done(ErrorOf(resp.GetCode(), resp.GetMessage()))
	}
}

// fail ends the stream for Send and fails every pending add with cause.
func (s *AddStream) fail(cause error) {
	if cause == io.EOF {
		cause = errors.New("bookie: add stream ended by the bookie")
	}
	err := fmt.Errorf("%w (%s): %w", ErrStreamClosed, s.c.addr, cause)
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	pending := s.pending
	s.pending = map[uint64]pendingAdd{}
	s.mu.Unlock()
	for _, p := range pending {
		p.done(err)
	}
}
