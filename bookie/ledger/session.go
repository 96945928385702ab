package ledger

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/bookie/storage"
)

// addSession carries adds to one bookie instance over one AddStream, from
// a goroutine of its own: AddStream.Send can block on gRPC flow control
// (a stalled bookie), and the goroutine that owns a core.Writer or
// core.Recovery must never block. Whoever starts a session watches its
// adds for timeouts and kills it (kill) when it must be abandoned.
//
// A stream found broken while none of its adds were in flight (the bookie
// restarted, the connection was recycled) is reopened once,
// transparently: no add was lost, so there is no failure to report.
//
// When the goroutine is idle with its stream open, enqueue hands the add
// to the stream itself if that does not wait (AddStream.TrySend): one
// goroutine wake-up less on every add's path. Otherwise the goroutine
// sends it.
type addSession struct {
	c        *Client
	bookie   core.BookieID
	instance string
	ctx      context.Context
	cancel   context.CancelFunc

	mu      sync.Mutex
	queue   []sessionItem
	closing bool // close after sending what is queued
	busy    bool // the goroutine is sending items it took from queue
	// stream is the goroutine's open stream while it is idle (nil: none,
	// or not idle): enqueue may send on it directly.
	stream AddStream
	wake   chan struct{}

	inflight atomic.Int64 // adds sent on the current stream, not answered

	// Owned by the goroutine that started the session (the writer's
	// owner): sequence numbers of its sends in send order, for timeouts.
	fifo     []uint64
	lastUsed time.Time
}

type sessionItem struct {
	req  storage.AddRequest
	done func(error)
}

// startSession starts a session; wg tracks its goroutine; ctx ends it
// (as kill does).
func startSession(ctx context.Context, wg *sync.WaitGroup, c *Client, b core.BookieID, instance string) *addSession {
	s := &addSession{c: c, bookie: b, instance: instance, wake: make(chan struct{}, 1), lastUsed: time.Now()}
	s.ctx, s.cancel = context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.run()
	}()
	return s
}

// enqueue queues an add; done is called exactly once (with the bookie's
// answer, a transport error, or the session's end).
func (s *addSession) enqueue(req storage.AddRequest, done func(error)) {
	it := sessionItem{req: req, done: done}
	s.mu.Lock()
	if !s.busy && len(s.queue) == 0 && s.stream != nil && !s.closing && s.ctx.Err() == nil && s.trySend(s.stream, it) {
		s.mu.Unlock()
		return
	}
	s.queue = append(s.queue, it)
	s.mu.Unlock()
	s.signal()
}

// trySend sends it on stream if that does not wait; false if it did not
// (the stream is full or broken: the goroutine takes over).
func (s *addSession) trySend(stream AddStream, it sessionItem) bool {
	s.inflight.Add(1)
	ok, err := stream.TrySend(it.req, s.answered(it.done))
	if !ok || err != nil {
		s.inflight.Add(-1)
		return false
	}
	return true
}

// answered wraps an add's done: the stream's answer ends its flight.
func (s *addSession) answered(done func(error)) func(error) {
	return func(err error) {
		s.inflight.Add(-1)
		if err != nil {
			s.c.noteFailure(s.bookie, s.instance, err)
		}
		done(err)
	}
}

func (s *addSession) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// kill ends the session at once: adds not answered fail.
func (s *addSession) kill() { s.cancel() }

// closeGracefully sends what is queued, waits (briefly) for the answers,
// then ends the session.
func (s *addSession) closeGracefully() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.signal()
}

func (s *addSession) run() {
	var stream AddStream
	defer func() {
		s.mu.Lock()
		s.stream, s.busy = nil, true // enqueue no longer sends
		s.mu.Unlock()
		if stream != nil {
			closeStream(s.ctx, stream)
		}
		s.cancel()
	}()
	for {
		s.mu.Lock()
		items, closing := s.queue, s.closing
		s.queue = nil
		s.busy = len(items) > 0
		s.stream = nil
		if !s.busy && !closing {
			s.stream = stream
		}
		s.mu.Unlock()
		for i, it := range items {
			if err := s.ctx.Err(); err != nil {
				for _, rest := range items[i:] {
					rest.done(fmt.Errorf("ledger: add to bookie %s abandoned: %w", s.bookie, err))
				}
				return
			}
			stream = s.send(stream, it)
		}
		if len(items) > 0 {
			continue
		}
		if closing {
			return
		}
		select {
		case <-s.wake:
		case <-s.ctx.Done():
			// Loop once more to fail what is queued.
			s.mu.Lock()
			s.closing = true
			s.mu.Unlock()
		}
	}
}

// send sends one add on stream (opening one if nil) and returns the
// stream to use next (nil after a failure).
func (s *addSession) send(stream AddStream, it sessionItem) AddStream {
	for attempt := 0; ; attempt++ {
		if stream == nil {
			conn, err := s.c.conn(s.ctx, s.bookie, s.instance)
			if err == nil {
				stream, err = conn.NewAddStream(s.ctx)
				if err != nil {
					s.c.noteFailure(s.bookie, s.instance, err)
				}
			}
			if err != nil {
				it.done(fmt.Errorf("ledger: bookie %s: %w", s.bookie, err))
				return nil
			}
		}
		s.inflight.Add(1)
		err := stream.Send(it.req, s.answered(it.done))
		if err == nil {
			return stream
		}
		idle := s.inflight.Add(-1) == 0
		s.c.noteFailure(s.bookie, s.instance, err)
		closeStream(s.ctx, stream)
		stream = nil
		if attempt == 0 && idle && s.ctx.Err() == nil {
			continue
		}
		it.done(fmt.Errorf("ledger: bookie %s: %w", s.bookie, err))
		return nil
	}
}

// closeStream closes stream, waiting at most a second for its answers
// (none are expected when the session is being abandoned).
func closeStream(ctx context.Context, stream AddStream) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	if ctx.Err() != nil {
		cancel()
	}
	_ = stream.Close(cctx)
	cancel()
}
