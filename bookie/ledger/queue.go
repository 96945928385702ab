package ledger

import (
	"context"
	"errors"
	"sync"
)

// mailbox is an unbounded queue feeding one owner goroutine: push never
// blocks (it is called from gRPC callbacks, which must not wait), the
// owner waits on notify and takes everything at once.
type mailbox[T any] struct {
	mu     sync.Mutex
	items  []T
	notify chan struct{} // capacity 1: "something was pushed"
}

func newMailbox[T any]() *mailbox[T] { return &mailbox[T]{notify: make(chan struct{}, 1)} }

func (m *mailbox[T]) push(v T) {
	m.mu.Lock()
	m.items = append(m.items, v)
	m.mu.Unlock()
	select {
	case m.notify <- struct{}{}:
	default:
	}
}

// take returns and removes everything queued.
func (m *mailbox[T]) take() []T {
	m.mu.Lock()
	defer m.mu.Unlock()
	items := m.items
	m.items = nil
	return items
}

// callbackQueue runs callbacks one at a time, in push order, on its own
// goroutine, so that a slow callback never blocks the goroutine that
// queued it (CONVENTIONS item 8: the writer's core never waits for its
// consumer; a slow consumer only delays its own later callbacks, which
// queue up in memory).
type callbackQueue struct {
	mu      sync.Mutex
	items   []func()
	closing bool // no internal pushes follow; exit once empty
	exited  bool // the goroutine is gone: push refuses
	wake    chan struct{}
	done    chan struct{}
}

func startCallbackQueue(wg *sync.WaitGroup) *callbackQueue {
	q := &callbackQueue{wake: make(chan struct{}, 1), done: make(chan struct{})}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(q.done)
		q.run()
	}()
	return q
}

// push queues f; false if the goroutine has exited (every earlier
// callback has run): the caller may then run f itself, in order.
func (q *callbackQueue) push(f func()) bool {
	q.mu.Lock()
	if q.exited {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, f)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// close lets the goroutine exit once it has run everything queued.
func (q *callbackQueue) close() {
	q.mu.Lock()
	q.closing = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *callbackQueue) run() {
	for {
		q.mu.Lock()
		items := q.items
		q.items = nil
		if len(items) == 0 && q.closing {
			q.exited = true
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		for i, f := range items {
			f()
			items[i] = nil
		}
		if len(items) == 0 {
			<-q.wake
		}
	}
}

// errFlowClosed: the writer stopped while an append waited for room.
var errFlowClosed = errors.New("ledger: writer stopped")

// flow bounds the unconfirmed bytes of a writer (Config.MaxPendingBytes).
type flow struct {
	mu     sync.Mutex
	limit  int64
	used   int64
	closed bool
	room   chan struct{} // closed and replaced when bytes are released
}

func newFlow(limit int64) *flow { return &flow{limit: limit, room: make(chan struct{})} }

// acquire waits until n bytes fit (always at once when nothing is used),
// ctx ends, or the flow closes (errFlowClosed; nothing acquired).
func (f *flow) acquire(ctx context.Context, n int64) error {
	for {
		f.mu.Lock()
		switch {
		case f.closed:
			f.mu.Unlock()
			return errFlowClosed
		case f.used == 0 || f.used+n <= f.limit:
			f.used += n
			f.mu.Unlock()
			return nil
		}
		room := f.room
		f.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *flow) release(n int64) {
	if n == 0 {
		return
	}
	f.mu.Lock()
	f.used -= n
	close(f.room)
	f.room = make(chan struct{})
	f.mu.Unlock()
}

// close wakes every waiter and makes acquire fail from now on.
func (f *flow) close() {
	f.mu.Lock()
	f.closed = true
	close(f.room)
	f.room = make(chan struct{})
	f.mu.Unlock()
}
