package storage

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/stratamesh/strata/internal/vfs"
)

// reserve keeps the current journal file zero-filled ahead of the writer,
// the zeros durable, so that each batch overwrites blocks that are already
// allocated and inside the file's size. The batch's fdatasync(2) then
// flushes data only: no block allocation, no size change, hence no
// file-system journal commit per batch. (PostgreSQL zero-fills its WAL
// segments for the same reason.) On this project's ext4 test machine it
// halves a small write+fsync; docs/perf.md has the figures.
//
// One goroutine (the filler) zero-fills chunk bytes at a time, with a
// write and an fdatasync, whenever the filled region ends less than one
// chunk past the writer's last write (so it stays one to two chunks
// ahead); it never fills past limit (the journal's rotation size). The
// invariant that keeps the writer's data safe from the zeros: [0, ready)
// of the file is the writer's (header and batches) or durable zeros, the
// filler only writes at ready or beyond, and the writer moves ready past
// anything it writes beyond it (claim) while no fill is in progress. Zeros left at the newest file's end by a
// crash are the reserve, not data: scanJournal ends the file there. A
// recycled file (journal_recycle.go) starts with all of its old size
// ready; the filler only extends it.
type reserve struct {
	chunk, limit int64
	log          *slog.Logger
	zeroed       *atomic.Int64 // if set, counts the bytes filled

	fs vfs.FS

	mu   sync.Mutex
	cond sync.Cond // broadcast when ready, busy, want or closed change
	// path is the file being filled; own is the filler's handle of it, a
	// handle of its own and not the writer's, so that an fsync error
	// (Linux reports a writeback error once per open file) reaches the
	// writer's fdatasync too, never only the filler's, which would then
	// leave the writer to ack a batch that is not durable.
	path   string
	own    vfs.File
	ready  int64 // [0, ready) of f: the writer's, durable zeros, or a recycled file's old data
	want   int64 // end of the writer's last write (claim)
	busy   bool  // a fill of f is in progress, outside mu
	failed bool  // a fill failed: no more fills; the writer appends
	closed bool
	done   chan struct{} // closed when the filler exits
}

// zeros is the source of the filler's writes.
var zeros = make([]byte, 256<<10)

// startReserve starts filling file path of fsys from off (the end of its
// header, or of a recycled file's old data) in chunks of chunk bytes,
// never past limit bytes, adding the bytes filled to zeroed (if not nil).
func startReserve(fsys vfs.FS, path string, off, chunk, limit int64, log *slog.Logger, zeroed *atomic.Int64) *reserve {
	r := &reserve{fs: fsys, chunk: chunk, limit: limit, log: log, zeroed: zeroed, ready: off, want: off, done: make(chan struct{})}
	r.cond.L = &r.mu
	r.reopen(path)
	go r.fill()
	return r
}

// reopen gives the filler its own handle of path (mu held, no fill in
// progress); without one the reserve stops and the writer appends.
func (r *reserve) reopen(path string) {
	if r.own != nil {
		r.own.Close()
		r.own = nil
	}
	r.path = path
	if r.failed {
		return
	}
	own, err := r.fs.OpenReadWrite(path)
	if err != nil {
		r.failed = true
		r.log.Warn("journal: cannot open the file to zero-fill ahead; batches are appended", "file", path, "err", err)
		return
	}
	r.own = own
}

// fill is the filler goroutine.
func (r *reserve) fill() {
	defer close(r.done)
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		for !r.closed && !r.failed && !r.low() {
			r.cond.Wait()
		}
		if r.closed || r.failed {
			return
		}
		f, from := r.own, r.ready
		n := min(r.chunk, r.limit-from)
		r.busy = true
		r.mu.Unlock()
		err := zeroFill(f, from, n)
		r.mu.Lock()
		r.busy = false
		if err != nil {
			// Only an optimisation is lost: the writer appends.
			r.failed = true
			r.log.Warn("journal: zero-filling ahead failed; batches are appended", "offset", from, "err", err)
		} else {
			r.ready = from + n // claim and exclusive wait while busy
			if r.zeroed != nil {
				r.zeroed.Add(n)
			}
		}
		r.cond.Broadcast()
	}
}

// low reports that the filled region ends less than a chunk past the
// writer's last write (and before limit): time for another fill.
func (r *reserve) low() bool { return r.ready < min(r.want+r.chunk, r.limit) }

// zeroFill writes n zero bytes at off and makes them durable.
func zeroFill(f vfs.File, off, n int64) error {
	for done := int64(0); done < n; {
		k := min(int64(len(zeros)), n-done)
		if _, err := f.WriteAt(zeros[:k], off+done); err != nil {
			return fmt.Errorf("write zeros: %w", err)
		}
		done += k
	}
	if err := vfs.SyncData(f); err != nil {
		return fmt.Errorf("sync zeros: %w", err)
	}
	return nil
}

// claim is called by the writer before it writes [.., end) of the current
// file. It reports whether that range lies in the filled reserve; if not,
// the range is the writer's to append (a fill in progress is waited for
// first, so none can overlap it) and the filler carries on after it.
func (r *reserve) claim(end int64) (inReserve bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.want = max(r.want, end)
	for end > r.ready && r.busy {
		r.cond.Wait()
	}
	inReserve = end <= r.ready
	r.ready = max(r.ready, end)
	// Wake the filler only when it has work: on every batch it would be
	// made runnable just as the writer enters its write+fsync, and be a
	// thread wake-up (and a P taken from the syscall) for nothing.
	if r.low() {
		r.cond.Broadcast()
	}
	return inReserve
}

// exclusive runs fn, which may truncate or replace the file, while no fill
// is in progress; fn returns the path of the file to fill from then on and
// the end of the writer's data in it.
func (r *reserve) exclusive(fn func() (string, int64)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.busy {
		r.cond.Wait()
	}
	var path string
	path, r.ready = fn()
	if path != r.path {
		r.reopen(path)
	}
	r.want = r.ready
	r.cond.Broadcast()
}

// stop ends the filler, waits for it and closes its handle.
func (r *reserve) stop() {
	r.mu.Lock()
	r.closed = true
	r.cond.Broadcast()
	r.mu.Unlock()
	<-r.done
	if r.own != nil {
		r.own.Close()
		r.own = nil
	}
}
