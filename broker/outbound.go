package broker

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/broker/natsproto"
)

// outbound is one connection's queue of bytes to write and the goroutine
// that writes them. Producers (any goroutine delivering to the connection)
// append under mu and signal; the writer takes up to maxWriteBatch bytes of
// whole blocks and writes them with one writev, so bursts coalesce into
// large writes.
//
// The queue is a list of blocks accounted in the server's outBudget: what
// the writer wrote goes back to the budget's idle list at once, so a queue
// shrinks with its backlog, and a connection that is closed or cut holds
// nothing but the write in progress.
//
// Memory is bounded twice. Per connection by max: a connection whose
// unwritten bytes would pass it is a slow consumer and is closed (the bytes
// are dropped, core NATS is at-most-once); producers that see a connection
// over half full are told to stall (see stalled), which holds a fast
// publisher back to its slowest reader's pace for a moment instead of
// dropping that reader. Server-wide by the budget (see outBudget).
type outbound struct {
	conn     net.Conn
	max      int
	deadline time.Duration
	budget   *outBudget

	mu      sync.Mutex
	q       [][]byte      // queued blocks, oldest first; producers fill the last
	queued  int           // bytes in q
	writing int           // bytes the writer is writing now
	closing bool          // write what is queued, then close
	closed  bool          // nothing more is queued or written
	drained chan struct{} // closed and replaced whenever the writer empties q; nil when nobody waits
	// stallUntil ends the current stall episode: the connection went over
	// half of max at stallUntil-stallBudget, and producers are held back
	// only until stallUntil. Zero while at most half full.
	stallUntil time.Time

	// pend mirrors queued+writing for the budget's choice of whom to cut.
	pend atomic.Int64
	// cut is set once the budget chose this connection to cut.
	cut atomic.Bool

	// onTimeout is called (once, from the writer) when a write passed its
	// deadline: the reader is not reading. May be nil.
	onTimeout func()
	// onShed cuts the connection as a slow consumer when the budget is
	// spent (it must end in abort). Nil: never cut for the budget (routes).
	// Set before run starts.
	onShed func()

	// Writer-only scratch: the blocks of the write in progress, and the
	// copy of their headers that net.Buffers consumes.
	batch, wbufs [][]byte

	signal chan struct{} // capacity 1: q has data or closing was set
	done   chan struct{} // closed when the writer exits
}

func newOutbound(conn net.Conn, max int, deadline time.Duration, budget *outBudget) *outbound {
	return &outbound{
		conn: conn, max: max, deadline: deadline, budget: budget,
		signal: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
}

// enqueueResult reports how a queue stands after an enqueue.
type enqueueResult int

const (
	enqOK     enqueueResult = iota
	enqStall                // queued, but the connection is over half full
	enqClosed               // dropped: the connection is closing
	enqSlow                 // dropped: over max; the connection must be closed as a slow consumer
)

// shedTries is how many connections one enqueue may cut for the budget
// before it takes a block past the limit.
const shedTries = 3

// lockRoom locks mu with room for n contiguous bytes at the end of the
// last block, taking a block from the budget when needed; when the budget
// is spent it cuts the slowest connection (outside mu) and retries. It
// reports false, with mu released, when the connection is closing.
func (o *outbound) lockRoom(n int) bool {
	for try := 0; ; try++ {
		o.mu.Lock()
		if o.closed || o.closing {
			o.mu.Unlock()
			return false
		}
		if o.roomLocked(n, try >= shedTries) {
			return true
		}
		o.mu.Unlock()
		if !o.budget.shed() {
			try = shedTries - 1 // nobody left to cut: take it anyway
		}
	}
}

func (o *outbound) roomLocked(n int, force bool) bool {
	if k := len(o.q); k > 0 && cap(o.q[k-1])-len(o.q[k-1]) >= n {
		return true
	}
	c, ok := o.budget.take(n, force)
	if !ok {
		return false
	}
	o.q = append(o.q, c)
	return true
}

// appendedLocked accounts the last block's growth from len0/cap0 (cap
// grows only if a size estimate was short), classifies the queue and
// unlocks mu.
func (o *outbound) appendedLocked(len0, cap0 int) enqueueResult {
	t := o.q[len(o.q)-1]
	if cap(t) != cap0 {
		o.budget.used.Add(int64(cap(t) - cap0))
	}
	o.queued += len(t) - len0
	r := o.afterAppendLocked()
	o.mu.Unlock()
	return r
}

// frameSlack bounds the bytes of a frame besides its subject, sid, reply,
// queue names, header and payload: op, separators, sizes, CRLFs.
const frameSlack = 64

// appendMsg queues a MSG/HMSG (natsproto.AppendMsg) and returns how the
// queue stands.
func (o *outbound) appendMsg(subject, sid, reply, hdr, payload []byte) enqueueResult {
	if !o.lockRoom(frameSlack + len(subject) + len(sid) + len(reply) + len(hdr) + len(payload)) {
		return enqClosed
	}
	t := &o.q[len(o.q)-1]
	len0, cap0 := len(*t), cap(*t)
	*t = natsproto.AppendMsg(*t, subject, sid, reply, hdr, payload)
	return o.appendedLocked(len0, cap0)
}

// appendRMsg queues a route RMSG (natsproto.AppendRMsg).
func (o *outbound) appendRMsg(m *natsproto.Msg, queues [][]byte) enqueueResult {
	n := frameSlack + len(m.Subject) + len(m.Reply) + len(m.Header) + len(m.Payload)
	for _, q := range queues {
		n += 1 + len(q)
	}
	if !o.lockRoom(n) {
		return enqClosed
	}
	t := &o.q[len(o.q)-1]
	len0, cap0 := len(*t), cap(*t)
	*t = natsproto.AppendRMsg(*t, m.Subject, m.Reply, m.Header, m.Payload, queues)
	return o.appendedLocked(len0, cap0)
}

// afterAppendLocked classifies the queue after an append (mu held).
func (o *outbound) afterAppendLocked() enqueueResult {
	pending := o.queued + o.writing
	o.pend.Store(int64(pending))
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
	if !o.lockRoom(len(b)) {
		return enqClosed
	}
	t := &o.q[len(o.q)-1]
	len0, cap0 := len(*t), cap(*t)
	*t = append(*t, b...)
	return o.appendedLocked(len0, cap0)
}

// appendForcedLocked appends b past any bound (mu held): the last bytes
// a closing connection gets.
func (o *outbound) appendForcedLocked(b []byte) {
	if len(b) == 0 {
		return
	}
	o.roomLocked(len(b), true)
	t := &o.q[len(o.q)-1]
	cap0 := cap(*t)
	*t = append(*t, b...)
	if cap(*t) != cap0 {
		o.budget.used.Add(int64(cap(*t) - cap0))
	}
	o.queued += len(b)
	o.pend.Store(int64(o.queued + o.writing))
}

// releaseLocked gives every queued block back to the budget (mu held).
func (o *outbound) releaseLocked() {
	for i, c := range o.q {
		o.budget.give(c)
		o.q[i] = nil
	}
	o.q = o.q[:0]
	if cap(o.q) > 64 {
		o.q = nil
	}
	o.queued = 0
	o.pend.Store(int64(o.writing))
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
		o.appendForcedLocked(b)
		o.closing = true
	}
	o.mu.Unlock()
	o.kick()
}

// abortDrain is how long a connection closed for falling behind may take
// to accept the rest of the write in progress and the final -ERR.
const abortDrain = 2 * time.Second

// abort drops everything queued and not yet being written (its blocks go
// back to the budget at once), queues b (the final -ERR) and closes after
// it: what a slow consumer gets. The write in progress, if any, and b must
// go out within abortDrain. It reports false, doing nothing, when the
// connection was already closing.
func (o *outbound) abort(b []byte) bool {
	o.mu.Lock()
	if o.closed || o.closing {
		o.mu.Unlock()
		return false
	}
	o.cut.Store(true)
	o.releaseLocked()
	o.appendForcedLocked(b)
	o.closing = true
	o.mu.Unlock()
	_ = o.conn.SetWriteDeadline(time.Now().Add(abortDrain))
	o.kick()
	return true
}

// waitDrained waits until the queue holds at most half of max, the
// connection closes, or d passes. Used by publishers that got enqStall.
func (o *outbound) waitDrained(d time.Duration) {
	o.mu.Lock()
	if o.closed || o.queued+o.writing <= o.max/2 || !time.Now().Before(o.stallUntil) {
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
	o.budget.join(o)
	defer o.budget.leave(o)
	defer close(o.done)
	defer o.conn.Close()
	for {
		<-o.signal
		for {
			o.mu.Lock()
			if o.queued == 0 {
				o.releaseLocked() // an empty last block, if any
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
			size := o.takeBatchLocked()
			closing := o.closing
			o.mu.Unlock()

			if o.deadline > 0 && !closing { // closing: abort's shorter deadline stands
				_ = o.conn.SetWriteDeadline(time.Now().Add(o.deadline))
			}
			o.wbufs = append(o.wbufs[:0], o.batch...)
			bufs := net.Buffers(o.wbufs)
			_, err := bufs.WriteTo(o.conn)
			clear(o.wbufs)
			for i, c := range o.batch {
				o.budget.give(c)
				o.batch[i] = nil
			}
			o.batch = o.batch[:0]

			o.mu.Lock()
			o.writing -= size
			o.pend.Store(int64(o.queued + o.writing))
			if o.queued <= o.max/2 {
				o.stallUntil = time.Time{}
				if o.drained != nil {
					close(o.drained)
					o.drained = nil
				}
			}
			if err != nil {
				closing = closing || o.closing // cut meanwhile: abort's deadline passed, not ours
				o.closed = true
				o.releaseLocked()
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

// takeBatchLocked moves the oldest blocks, up to maxWriteBatch bytes (at
// least one block), from q to o.batch and returns their bytes (mu held).
// The last block goes too when it fits: producers start a new one.
func (o *outbound) takeBatchLocked() int {
	size, k := 0, 0
	for k < len(o.q) && (k == 0 || size+len(o.q[k]) <= maxWriteBatch) {
		size += len(o.q[k])
		k++
	}
	o.batch = append(o.batch, o.q[:k]...)
	n := copy(o.q, o.q[k:])
	clear(o.q[n:])
	o.q = o.q[:n]
	o.queued -= size
	o.writing += size
	return size
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
