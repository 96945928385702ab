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
// one to return), a gap, or a jump to another log or offset; it returns
// no entries, without error, when first itself is not in a log (the
// caller reads it alone). errLogGone: compaction retired the log; the
// caller reads the entries one by one.
func (e *Engine) readRun(ledger, first, last int64, maxBytes int) ([]Entry, error) {
	type span struct {
		entry int64
		loc   location
	}
	var run []span
	var bytes, payload int64
	err := e.ix.locations(ledger, first, last, func(entry int64, loc location) bool {
		if n := len(run); n > 0 {
			prev := run[n-1]
			if entry != prev.entry+1 || loc.log != prev.loc.log || loc.off != prev.loc.off+int64(prev.loc.size) ||
				bytes+int64(loc.size) > readRunMaxBytes ||
				(maxBytes > 0 && payload+entryPayloadLen(int(loc.size)) > int64(maxBytes)) {
				return false
			}
		} else if entry != first {
			return false
		}
		if _, cached := e.cache.get(ledger, entry); cached {
			return false
		}
		run = append(run, span{entry, loc})
		bytes += int64(loc.size)
		payload += entryPayloadLen(int(loc.size))
		return true
	})
	if err != nil || len(run) == 0 {
		return nil, err
	}
	for _, s := range run {
		if s.loc.size < entryHeaderSize {
			return nil, fmt.Errorf("%w: location of %d bytes", ErrCorrupt, s.loc.size)
		}
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
	if len(run) >= readAheadMinRun {
		// A reader going through a ledger: have the log's next bytes
		// read into the page cache while it handles these (entry logs
		// are written with direct I/O, so a flushed entry is not there).
		vfs.Prefetch(lf.f, start+bytes, readAheadBytes)
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
