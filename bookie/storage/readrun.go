package storage

import (
	"fmt"

	"github.com/stratamesh/strata/internal/vfs"
)

const (
	// readRunMaxBytes bounds one coalesced read of an entry log, in bytes.
	readRunMaxBytes = 4 << 20
	// A run of at least readAheadMinRun entries has the next
	// readAheadBytes of its log prefetched.
	readAheadMinRun = 8
	readAheadBytes  = 4 << 20
)

// readRun reads entries of ledger from first on, as many as lie back to
// back in one entry log (a flush writes each ledger's entries sorted and
// adjacent) up to last, maxBytes of payload (the first entry always) and
// readRunMaxBytes, with one positional read, and checks each (CRC and
// ids). It stops before an entry in the write cache (whose copy is the
// one to return), a gap, a jump to another log or offset, or a location
// that does not decode. It returns no entries, without error, when first
// itself is not in a log or a flush dropped its cache generation while
// the run was being found (the index it scanned may predate entries the
// cache no longer holds). With an error it returns the entries before the
// failing one, if any; ReadRange then reads the rest one by one, which
// reports the error exactly (the contract of ReadRange), as it does after
// errLogGone (compaction retired the log).
func (e *Engine) readRun(ledger, first, last int64, maxBytes int) ([]Entry, error) {
	type span struct {
		entry int64
		loc   location
	}
	var run []span
	var bytes, payload int64
	jumped := false // the run ended where the ledger's entries stop lying back to back
	drops := e.cache.drops.Load()
	err := e.ix.locations(ledger, first, last, func(entry int64, v []byte) bool {
		if h := e.hooks.readRunScanning; h != nil && len(run) == 0 {
			h()
		}
		if (len(run) == 0 && entry != first) || (len(run) > 0 && entry != run[len(run)-1].entry+1) {
			jumped = true
			return false
		}
		loc, err := decodeLocation(v)
		if err != nil || loc.size < entryHeaderSize {
			jumped = true
			return false
		}
		if n := len(run); n > 0 {
			prev := run[n-1].loc
			if loc.log != prev.log || loc.off != prev.off+int64(prev.size) {
				jumped = true
				return false
			}
			if bytes+int64(loc.size) > readRunMaxBytes ||
				(maxBytes > 0 && payload+entryPayloadLen(int(loc.size)) > int64(maxBytes)) {
				return false // the reader's next range goes on from here
			}
		}
		if _, cached := e.cache.get(ledger, entry); cached {
			jumped = true
			return false
		}
		run = append(run, span{entry, loc})
		bytes += int64(loc.size)
		payload += entryPayloadLen(int(loc.size))
		return true
	})
	if err != nil || len(run) == 0 || e.cache.drops.Load() != drops {
		return nil, err
	}
	lf, err := e.logs.acquire(run[0].loc.log)
	if err != nil {
		return nil, err
	}
	defer e.logs.release(lf)
	buf := make([]byte, bytes)
	start := run[0].loc.off
	if _, err := readFull(lf.f, buf, start); err != nil {
		return nil, fmt.Errorf("%w: entry log %016x offset %d: %v", ErrCorrupt, run[0].loc.log, start, err)
	}
	if len(run) >= readAheadMinRun && !jumped {
		// A reader going through a ledger, whose next entries follow in
		// this log: have them read into the page cache while it handles
		// these (they are not there after direct-I/O flushes, nor once
		// evicted). Not after a jump: what follows is other ledgers'
		// data.
		e.prefetch(lf, start+bytes)
	}
	out := make([]Entry, 0, len(run))
	for _, s := range run {
		rel := s.loc.off - start
		ent, err := decodeEntry(buf[rel:rel+int64(s.loc.size)], ledger, s.entry)
		if err != nil {
			return out, err
		}
		out = append(out, ent)
	}
	return out, nil
}

// prefetchQueue bounds the read-ahead requests waiting; more are dropped.
const prefetchQueue = 8

// prefetchReq asks runPrefetcher to read readAheadBytes of lf from off
// into the page cache; it holds a reference on lf (logSet.acquire).
type prefetchReq struct {
	lf  *logFile
	off int64
}

// prefetch hands a read-ahead to runPrefetcher without waiting, so the
// reader does not pay for queueing the reads (posix_fadvise submits them
// before it returns). Dropped when the queue is full.
func (e *Engine) prefetch(lf *logFile, off int64) {
	if !e.logs.addRef(lf) {
		return
	}
	select {
	case e.prefetches <- prefetchReq{lf, off}:
	default:
		e.logs.release(lf)
	}
}

// runPrefetcher is the read-ahead goroutine. It returns when the engine
// closes; shutdown lets go of what is left queued.
func (e *Engine) runPrefetcher() {
	defer e.bg.Done()
	for {
		select {
		case <-e.closing:
			return
		case r := <-e.prefetches:
			vfs.Prefetch(r.lf.f, r.off, readAheadBytes)
			e.logs.release(r.lf)
		}
	}
}
