package jetstream

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// fenceTimeout bounds how long an API request waits for earlier
// publishes (they take one ledger add; longer means the ledger is
// stalled, and the request is answered from the confirmed state).
const fenceTimeout = 2 * time.Second

// publishFence counts the publishes a topic hands to its managed ledger
// and the answers it gets back (the ML answers every publish once, in
// call order), so that an API request can wait for the publishes that
// reached the topic before it. A client that publishes without a reply
// and then asks for STREAM.INFO on the same connection thus sees its
// message, as on the reference, which handles both in order.
type publishFence struct {
	issued   atomic.Uint64 // publishes handed to the ML
	answered atomic.Uint64 // of those, answered (stored, refused or failed)
	waiting  atomic.Int32  // len(waiters), read without mu

	mu      sync.Mutex
	waiters []fenceWaiter
}

type fenceWaiter struct {
	mark uint64
	ch   chan struct{}
}

// issue counts a publish; call it before handing the publish to the ML.
func (f *publishFence) issue() { f.issued.Add(1) }

// answer counts a publish's answer, releasing the waits it completes.
func (f *publishFence) answer() {
	f.answered.Add(1)
	if f.waiting.Load() == 0 {
		return
	}
	f.mu.Lock()
	f.release()
	f.mu.Unlock()
}

// release closes the waits that are complete; f.mu is held.
func (f *publishFence) release() {
	n := f.answered.Load()
	keep := f.waiters[:0]
	for _, w := range f.waiters {
		if w.mark <= n {
			close(w.ch)
		} else {
			keep = append(keep, w)
		}
	}
	clear(f.waiters[len(keep):])
	f.waiters = keep
	f.waiting.Store(int32(len(keep)))
}

// mark is the number of publishes issued so far, for wait.
func (f *publishFence) mark() uint64 { return f.issued.Load() }

// wait returns once the first mark publishes are answered, or with ctx's
// error.
func (f *publishFence) wait(ctx context.Context, mark uint64) error {
	if f.answered.Load() >= mark {
		return nil
	}
	w := fenceWaiter{mark: mark, ch: make(chan struct{})}
	f.mu.Lock()
	f.waiters = append(f.waiters, w)
	f.waiting.Add(1)
	f.release() // an answer may have come in between
	f.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		for i := range f.waiters {
			if f.waiters[i].ch == w.ch {
				f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
				f.waiting.Add(-1)
				break
			}
		}
		f.mu.Unlock()
		return ctx.Err()
	}
}
