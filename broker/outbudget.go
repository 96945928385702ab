package broker

import (
	"sync"
	"sync/atomic"
	"time"
)

// chunkSize is the size of the blocks outbound queues are made of, in
// bytes. Frames up to this size are packed into shared blocks taken from
// the budget's idle list; a larger frame gets a block of its own size,
// which is not kept idle after it is written.
const chunkSize = 64 << 10

// maxWriteBatch bounds the bytes a writer hands to one socket write (one
// writev of whole blocks; a single larger frame goes alone). It is also
// what a connection cut as a slow consumer keeps referenced until that
// write returns: everything queued behind it is dropped at once.
const maxWriteBatch = 1 << 20

// budgetStall is how long the budget may stay over half full before a
// producer that it held back cuts the connection with the largest backlog
// (see outBudget.hold).
const budgetStall = 100 * time.Millisecond

// trimEvery is how often idle blocks above the floor are released to the
// garbage collector (half of the excess each time).
const trimEvery = time.Second

// idleChunkFloor is how many bytes of idle blocks the budget keeps for
// reuse however long it is idle: a sixteenth of the budget, at most 8 MiB.
func idleChunkFloor(limit int) int {
	return min(limit/16, 8<<20)
}

// outBudget is the server-wide bound on memory held for outbound bytes
// (Config.MaxOutboundTotal). Every connection's queue is made of blocks
// accounted here; the blocks of queues, of writes in progress and of the
// idle list together stay within limit:
//
//   - a producer whose frame needs a new block while the budget is spent
//     cuts the client connection with the largest backlog (the slowest
//     reader; its queued blocks come back at once) and retries; only if
//     there is none left to cut does it take the block anyway (routes are
//     never cut for the budget: they have their own bound);
//   - while more than half is in use, client readers that queued to any
//     connection are held back after each read (hold) for up to stallWait,
//     and an episode over half that lasts budgetStall cuts the connection
//     with the largest backlog, so publishers slow down to what readers
//     take before anyone is cut, but are never stopped for long.
//
// Lock order: an outbound's mu may be held while calling take or give;
// mu here is never held while taking an outbound's mu.
type outBudget struct {
	limit int64
	floor int // idle blocks kept after trimming, in bytes

	used  atomic.Int64 // capacity of blocks held by queues and writes
	sheds atomic.Int64 // connections cut for the budget

	mu        sync.Mutex
	idle      []*[chunkSize]byte
	members   map[*outbound]struct{} // outbounds whose writer runs
	overSince time.Time              // start of the episode over half; zero when at most half
	drained   chan struct{}          // closed when used falls to half; nil when nobody waits
	trim      *time.Timer            // armed while idle holds more than floor
	stopped   bool

	shedMu sync.Mutex // one cut at a time
}

func newOutBudget(limit int) *outBudget {
	return &outBudget{limit: int64(limit), floor: idleChunkFloor(limit), members: map[*outbound]struct{}{}}
}

// take returns an empty block with room for n bytes, accounted as used.
// It fails (nil, false) when that would pass the limit, unless force.
func (b *outBudget) take(n int, force bool) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n <= chunkSize && len(b.idle) > 0 {
		c := b.idle[len(b.idle)-1]
		b.idle[len(b.idle)-1] = nil
		b.idle = b.idle[:len(b.idle)-1]
		b.used.Add(chunkSize)
		return c[:0], true
	}
	size := max(n, chunkSize)
	for int64(size)+b.used.Load()+b.idleBytesLocked() > b.limit && len(b.idle) > 0 {
		b.dropIdleLocked(1) // make room for a large frame
	}
	if !force && int64(size)+b.used.Load() > b.limit {
		return nil, false
	}
	b.used.Add(int64(size))
	if size == chunkSize {
		return new([chunkSize]byte)[:0], true
	}
	return make([]byte, 0, size), true
}

// give returns a block that take handed out; it is kept idle for reuse
// while that stays within the limit, else left to the garbage collector.
func (b *outBudget) give(c []byte) {
	if c == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	used := b.used.Add(-int64(cap(c)))
	if cap(c) == chunkSize && !b.stopped && used+b.idleBytesLocked()+chunkSize <= b.limit {
		b.idle = append(b.idle, (*[chunkSize]byte)(c[:chunkSize]))
		if b.idleBytesLocked() > int64(b.floor) && b.trim == nil {
			b.trim = time.AfterFunc(trimEvery, b.trimIdle)
		}
	}
	if used <= b.limit/2 {
		b.overSince = time.Time{}
		if b.drained != nil {
			close(b.drained)
			b.drained = nil
		}
	}
}

func (b *outBudget) idleBytesLocked() int64 { return int64(len(b.idle)) * chunkSize }

// dropIdleLocked lets the garbage collector have n idle blocks.
func (b *outBudget) dropIdleLocked(n int) {
	k := len(b.idle) - n
	clear(b.idle[k:])
	b.idle = b.idle[:k]
}

// trimIdle releases half of the idle blocks above the floor, and re-arms
// while some remain above it.
func (b *outBudget) trimIdle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trim = nil
	excess := len(b.idle) - b.floor/chunkSize
	if excess <= 0 || b.stopped {
		return
	}
	b.dropIdleLocked((excess + 1) / 2)
	if len(b.idle) > b.floor/chunkSize {
		b.trim = time.AfterFunc(trimEvery, b.trimIdle)
	}
	if len(b.idle) <= cap(b.idle)/4 {
		b.idle = append([]*[chunkSize]byte(nil), b.idle...)
	}
}

// stop drops the idle blocks and stops trimming (Server.Close).
func (b *outBudget) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
	if b.trim != nil {
		b.trim.Stop()
		b.trim = nil
	}
	b.idle = nil
}

// over reports whether more than half of the budget is in use (the
// publish path's check; no lock).
func (b *outBudget) over() bool { return b.used.Load() > b.limit/2 }

// hold is called by a client's reader after a read that queued while the
// budget was over half: it waits up to d for the budget to fall to half,
// and cuts the connection with the largest backlog when the budget has
// been over half for budgetStall.
func (b *outBudget) hold(d time.Duration) {
	b.mu.Lock()
	if !b.over() {
		b.mu.Unlock()
		return
	}
	now := time.Now()
	if b.overSince.IsZero() {
		b.overSince = now
	}
	if now.Sub(b.overSince) >= budgetStall {
		b.overSince = now // the next cut is one more budgetStall away
		b.mu.Unlock()
		b.shed()
		return
	}
	if b.drained == nil {
		b.drained = make(chan struct{})
	}
	ch := b.drained
	b.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}

// join and leave register an outbound while its writer runs; registered
// outbounds with an onShed are the candidates shed cuts.
func (b *outBudget) join(o *outbound) {
	b.mu.Lock()
	b.members[o] = struct{}{}
	b.mu.Unlock()
}

func (b *outBudget) leave(o *outbound) {
	b.mu.Lock()
	delete(b.members, o)
	b.mu.Unlock()
}

// shed cuts the client connection with the most bytes pending (queued and
// being written) through its onShed, and reports whether it found one.
// Its queued blocks come back to the budget before onShed returns.
func (b *outBudget) shed() bool {
	b.shedMu.Lock()
	defer b.shedMu.Unlock()
	b.mu.Lock()
	var victim *outbound
	var most int64
	for o := range b.members {
		if o.onShed == nil || o.cut.Load() {
			continue
		}
		if p := o.pend.Load(); p > most {
			victim, most = o, p
		}
	}
	if victim != nil {
		victim.cut.Store(true)
	}
	b.mu.Unlock()
	if victim == nil {
		return false
	}
	b.sheds.Add(1)
	victim.onShed()
	return true
}
