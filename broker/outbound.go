package broker

import (
	"errors"
	"net"
	"sync"
	"time"
)

// outbound is one connection's queue of bytes to write and the goroutine
// that writes them. Producers (any goroutine delivering to the connection)
// append under mu and signal; the writer swaps the buffer out and writes it
// with one syscall, so bursts coalesce into large writes.
//
// Memory is bounded by max: a connection whose unwritten bytes would pass
// it is a slow consumer and is closed (the bytes are dropped, core NATS is
// at-most-once). Producers that see a connection over half full are told
// to stall (see stalled), which holds a fast publisher back to its
// slowest reader's pace for a moment instead of dropping that reader.
type outbound struct {
	conn     net.Conn
	max      int
	deadline time.Duration

	mu      sync.Mutex
	buf     []byte // queued, not yet handed to the writer
	writing int    // bytes the writer is writing now
	spare   []byte
	closing bool          // write what is queued, then close
	closed  bool          // nothing more is queued or written
	drained chan struct{} // closed and replaced whenever the writer empties buf; nil when nobody waits
	// stallUntil ends the current stall episode: the connection went over
	// half of max at stallUntil-stallBudget, and producers are held back
	// only until stallUntil. Zero while at most half full.
	stallUntil time.Time

	// onTimeout is called (once, from the writer) when a write passed its
	// deadline: the reader is not reading. May be nil.
	onTimeout func()

	signal chan struct{} // capacity 1: buf has data or closing was set
	done   chan struct{} // closed when the writer exits
}

func newOutbound(conn net.Conn, max int, deadline time.Duration) *outbound {
	return &outbound{
		conn: conn, max: max, deadline: deadline,
		signal: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
}

// errSlow reports that an enqueue passed the bound.
type enqueueResult int

const (
	enqOK     enqueueResult = iota
	enqStall                // queued, but the connection is over half full
	enqClosed               // dropped: the connection is closing
	enqSlow                 // dropped: over max; the connection must be closed as a slow consumer
)

// lockedAppend is called with o.mu held by producers that append directly
// to o.buf; it classifies the result after the append.
func (o *outbound) afterAppendLocked() enqueueResult {
	pending := len(o.buf) + o.writing
	if pending > o.max {
		return enqSlow
	}
	if pending > o.max/2 {
		now := time.Now()
		if o.stallUntil.IsZero() {
			o.stallUntil = now.Add(stallBudget)
		}
		if now.Before(o.stallUntil) {
			return enqStall
		}
	}
	return enqOK
}

// stallBudget bounds how long producers are held back by one connection
// in one episode of being over half full. Past it they go on at full
// speed, and a reader that still does not keep up reaches max and is
// closed as a slow consumer — so one stuck client delays its publishers by
// about this much, not until it is cut off.
const stallBudget = 100 * time.Millisecond

// enqueue appends b (copied) and returns how the queue stands. It does not
// signal the writer: callers call kick once after a batch of enqueues.
func (o *outbound) enqueue(b []byte) enqueueResult {
	o.mu.Lock()
	if o.closed || o.closing {
		o.mu.Unlock()
		return enqClosed
	}
	o.buf = append(o.buf, b...)
	r := o.afterAppendLocked()
	o.mu.Unlock()
	return r
}

// kick wakes the writer.
func (o *outbound) kick() {
	select {
	case o.signal <- struct{}{}:
	default:
	}
}

// closeAfter queues b (e.g. an -ERR line; may be nil), then makes the
// writer write everything queued and close the socket. Later enqueues are
// dropped.
func (o *outbound) closeAfter(b []byte) {
	o.mu.Lock()
	if !o.closed && !o.closing {
		o.buf = append(o.buf, b...)
		o.closing = true
	}
	o.mu.Unlock()
	o.kick()
}

// abortDrain is how long a connection closed for falling behind may take
// to accept the rest of the write in progress and the final -ERR.
const abortDrain = 2 * time.Second

// abort drops everything queued and not yet being written, queues b (the
// final -ERR) and closes after it: what a slow consumer gets. The write in
// progress, if any, and b must go out within abortDrain.
func (o *outbound) abort(b []byte) {
	o.mu.Lock()
	if !o.closed && !o.closing {
		o.buf = append(o.buf[:0], b...)
		o.closing = true
	}
	o.mu.Unlock()
	_ = o.conn.SetWriteDeadline(time.Now().Add(abortDrain))
	o.kick()
}

// waitDrained waits until the queue holds at most half of max, the
// connection closes, or d passes. Used by publishers that got enqStall.
func (o *outbound) waitDrained(d time.Duration) {
	o.mu.Lock()
	if o.closed || len(o.buf)+o.writing <= o.max/2 || !time.Now().Before(o.stallUntil) {
		o.mu.Unlock()
		return
	}
	if o.drained == nil {
		o.drained = make(chan struct{})
	}
	ch := o.drained
	o.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-o.done:
	case <-t.C:
	}
}

// run is the writer goroutine. It returns when the connection closed (an
// error, or closeAfter's bytes written); the socket is closed on return.
func (o *outbound) run() {
	defer close(o.done)
	defer o.conn.Close()
	for {
		<-o.signal
		for {
			o.mu.Lock()
			if len(o.buf) == 0 {
				if o.drained != nil {
					close(o.drained)
					o.drained = nil
				}
				closing := o.closing
				if closing {
					o.closed = true
				}
				o.mu.Unlock()
				if closing {
					return
				}
				break
			}
			out := o.buf
			o.buf, o.spare = o.spare[:0], nil
			o.writing = len(out)
			closing := o.closing
			o.mu.Unlock()

			if o.deadline > 0 && !closing { // closing: abort's shorter deadline stands
				_ = o.conn.SetWriteDeadline(time.Now().Add(o.deadline))
			}
			_, err := o.conn.Write(out)

			o.mu.Lock()
			o.writing = 0
			if cap(out) <= 1<<20 { // keep moderate buffers for reuse
				o.spare = out[:0]
			}
			if len(o.buf) <= o.max/2 {
				o.stallUntil = time.Time{}
				if o.drained != nil {
					close(o.drained)
					o.drained = nil
				}
			}
			if err != nil {
				o.closed = true
				o.buf = nil
				o.mu.Unlock()
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && !closing && o.onTimeout != nil {
					o.onTimeout()
				}
				return
			}
			o.mu.Unlock()
		}
	}
}

// isClosed reports whether the writer has stopped.
func (o *outbound) isClosed() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}
