package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/internal/meta"
)

// Entry is one entry as read: its id and the payload the writer appended.
type Entry struct {
	ID      int64
	Payload []byte
}

// Reading: entries are fetched in chunks of readChunk ids, readParallel
// chunks at a time; within a chunk, each request is a range read from a
// bookie of the first entry's write set, accepting the leading run of
// entries that bookie holds.
const (
	readChunk    = 64
	readParallel = 8
)

// Reader reads a ledger up to its LastAddConfirmed, without fencing: it
// never disturbs the writer (BookKeeper's non-recovery open). Safe for
// concurrent use.
type Reader struct {
	c  *Client
	id int64

	mu     sync.Mutex
	md     core.Metadata
	custom map[string]string
	lac    int64
}

// OpenReader opens ledger id for reading. It never fences. A CLOSED
// ledger reads up to its LastEntryID; an OPEN (or IN_RECOVERY) one up to
// the LAC learnt from the bookies of its last segment (the highest LAC
// any of them holds; at least the entry before that segment, which was
// confirmed before the segment began). A reader of an OPEN ledger lags
// its writer by one entry: a bookie learns that entry n is confirmed
// from the LAC carried by the add of a later entry, or from the metadata
// once the ledger is closed. Errors: ErrNoLedger, etcd's, an unknown
// DigestType.
func (c *Client) OpenReader(ctx context.Context, id int64) (*Reader, error) {
	ctx, end, err := c.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	rec, _, err := c.getRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.DigestType != DigestCRC32C {
		return nil, fmt.Errorf("ledger %d: digest type %q is not supported (want %q)", id, rec.DigestType, DigestCRC32C)
	}
	r := &Reader{c: c, id: id, md: rec.Metadata, custom: rec.Custom, lac: floorLAC(rec.Metadata)}
	if rec.State != core.StateClosed {
		r.raise(r.pollLAC(ctx, r.md, core.NoEntry, 0))
	}
	return r, nil
}

// floorLAC is what the metadata alone proves confirmed
// (core.Metadata.ConfirmedFloor).
func floorLAC(md core.Metadata) int64 { return md.ConfirmedFloor() }

// raise moves the known LAC up to lac (never down) and returns it.
func (r *Reader) raise(lac int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.md.State != core.StateClosed {
		r.lac = max(r.lac, lac)
	}
	return r.lac
}

// ID is the ledger id.
func (r *Reader) ID() int64 { return r.id }

// LAC is the last entry the reader knows to be confirmed (NoEntry if none).
func (r *Reader) LAC() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lac
}

// Metadata is the ledger's metadata as the reader last read it.
func (r *Reader) Metadata() core.Metadata {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.md.Clone()
}

func (r *Reader) snapshot() (core.Metadata, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.md, r.lac
}

// Read returns entries first..last, in order. Ids past the known LAC get
// ErrBeyondLAC (nothing is read). Each entry is read from a bookie of its
// write set; on an error, an absent entry, a copy the bookie reports
// corrupt, or one failing the frame's CRC32C, the next bookie of the
// write set is tried; ErrEntryUnavailable when none returns it.
func (r *Reader) Read(ctx context.Context, first, last int64) ([]Entry, error) {
	ctx, end, err := r.c.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	md, lac := r.snapshot()
	switch {
	case first < 0 || last < first:
		return nil, fmt.Errorf("%w: ledger %d: read %d..%d", ErrInvalidOptions, r.id, first, last)
	case last > lac:
		return nil, fmt.Errorf("%w: ledger %d: read up to %d, LAC %d", ErrBeyondLAC, r.id, last, lac)
	}
	out, err := r.read(ctx, md, first, last)
	if errors.Is(err, ErrEntryUnavailable) && md.State != core.StateClosed {
		// The LAC may have been learnt from bookies that stayed through
		// an ensemble change this reader has not seen: read the
		// metadata again and retry once with the new segments.
		if changed, rerr := r.refresh(ctx, md.Version); rerr == nil && changed {
			md, _ = r.snapshot()
			out, err = r.read(ctx, md, first, last)
		}
	}
	return out, err
}

// read reads first..last with md's segments.
func (r *Reader) read(ctx context.Context, md core.Metadata, first, last int64) ([]Entry, error) {
	out := make([]Entry, last-first+1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		readErr error
		chunks  = make(chan int64)
	)
	for range min(readParallel, int((last-first)/readChunk)+1) {
		wg.Go(func() {
			for lo := range chunks {
				hi := min(lo+readChunk-1, last)
				if err := r.readChunk(ctx, md, lo, hi, out[lo-first:hi-first+1]); err != nil {
					errOnce.Do(func() { readErr = err; cancel() })
				}
			}
		})
	}
feed:
	for lo := first; lo <= last; lo += readChunk {
		select {
		case chunks <- lo:
		case <-ctx.Done():
			break feed
		}
	}
	close(chunks)
	wg.Wait()
	if readErr == nil && ctx.Err() != nil {
		readErr = ctx.Err()
	}
	if readErr != nil {
		return nil, readErr
	}
	return out, nil
}

// readChunk fills out with entries lo..hi.
func (r *Reader) readChunk(ctx context.Context, md core.Metadata, lo, hi int64, out []Entry) error {
	for e := lo; e <= hi; {
		got, err := r.readRun(ctx, md, e, hi)
		if err != nil {
			return err
		}
		copy(out[e-lo:], got)
		e += int64(len(got))
	}
	return nil
}

// readRun reads at least entry e, and as many following entries up to hi
// (within e's segment) as the bookie asked holds, trying each bookie of
// e's write set in turn.
func (r *Reader) readRun(ctx context.Context, md core.Metadata, e, hi int64) ([]Entry, error) {
	seg := md.SegmentFor(e)
	if i := slices.IndexFunc(md.Segments, func(s core.Segment) bool { return s.FirstEntry > e }); i >= 0 {
		hi = min(hi, md.Segments[i].FirstEntry-1)
	}
	var errs []error
	for _, idx := range core.WriteSet(e, md.EnsembleSize, md.WriteQuorum) {
		b, inst := seg.Ensemble[idx], seg.Instance(idx)
		got, err := r.readFrom(ctx, md, seg, idx, e, hi)
		if err == nil {
			return got, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.c.noteFailure(b, inst, err)
		errs = append(errs, fmt.Errorf("bookie %s: %w", b, err))
	}
	return nil, fmt.Errorf("%w: ledger %d entry %d: %w", ErrEntryUnavailable, r.id, e, errors.Join(errs...))
}

// readFrom reads e..hi from the bookie at ensemble index idx of seg and
// returns the leading run of entries that are well formed and belong to
// that bookie's write sets (at least e, or an error).
func (r *Reader) readFrom(ctx context.Context, md core.Metadata, seg core.Segment, idx int, e, hi int64) ([]Entry, error) {
	conn, err := r.c.conn(ctx, seg.Ensemble[idx], seg.Instance(idx))
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithTimeout(ctx, r.c.cfg.OpTimeout)
	es, err := conn.ReadRange(octx, r.id, e, hi, 0)
	cancel()
	if err != nil {
		return nil, err
	}
	var out []Entry
	for i, se := range es {
		id := e + int64(i)
		if id > hi || se.LedgerID != r.id || se.EntryID != id ||
			!slices.Contains(core.WriteSet(id, md.EnsembleSize, md.WriteQuorum), idx) {
			break
		}
		payload, _, err := openFrame(se.Payload, r.id, id)
		if err != nil {
			if i == 0 {
				return nil, err
			}
			break
		}
		out = append(out, Entry{ID: id, Payload: payload})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ledger: bookie %s answered entry %d with something else", seg.Ensemble[idx], e)
	}
	return out, nil
}

// lacGrace is how long a one-shot LAC read (wait 0) waits, after the first
// bookie answered, for the rest of the last segment, so that it reports the
// highest LAC they hold rather than the first to answer.
const lacGrace = 200 * time.Millisecond

// pollLAC asks every bookie of md's last segment for its LAC. A long poll
// (wait > 0, for one greater than after) returns the highest answer as
// soon as one exceeds after; a one-shot read (wait 0) returns the highest
// of the answers that came within lacGrace of the first. Either returns
// when all have answered. Failures count as NoEntry.

func (r *Reader) pollLAC(ctx context.Context, md core.Metadata, after int64, wait time.Duration) int64 {
	seg := md.Segments[len(md.Segments)-1]
	ctx, cancel := context.WithTimeout(ctx, wait+r.c.cfg.OpTimeout)
	defer cancel()
	answers := make(chan int64, len(seg.Ensemble))
	var wg sync.WaitGroup
	for i, b := range seg.Ensemble {
		inst := seg.Instance(i)
		wg.Go(func() {
			lac := core.NoEntry
			if conn, err := r.c.conn(ctx, b, inst); err == nil {
				if lac, err = conn.ReadLAC(ctx, r.id, after, wait); err != nil {
					r.c.noteFailure(b, inst, err)
					lac = core.NoEntry
				}
			}
			answers <- lac
		})
	}
	best := core.NoEntry
	var grace <-chan time.Time // a one-shot read waits this long for the others after the first answer
collect:
	for got := 0; got < len(seg.Ensemble); got++ {
		select {
		case lac := <-answers:
			best = max(best, lac)
		case <-grace:
			break collect
		}
		if wait > 0 && best > after {
			break // a long poll returns on the first news
		}
		if wait == 0 && grace == nil {
			grace = time.After(lacGrace)
		}
	}
	cancel()
	wg.Wait()
	return best
}

// WaitLAC waits until the ledger's LAC exceeds after (tailing), for at
// most timeout, and returns the LAC then known (≤ after on timeout; the
// error is nil then). It long-polls the bookies of the last segment
// (ReadLAC; each bookie answers within its MaxLongPoll, 10 s by default)
// and watches the ledger's metadata meanwhile, so that a close (which
// fixes the LastEntryID, the one entry bookies never learn through an
// add's LAC) or an ensemble change is seen at once. On a CLOSED ledger it
// returns LastEntryID without waiting. ctx's error if ctx ends first.
func (r *Reader) WaitLAC(ctx context.Context, after int64, timeout time.Duration) (int64, error) {
	ctx, end, err := r.c.begin(ctx)
	if err != nil {
		return core.NoEntry, err
	}
	defer end()
	deadline := time.Now().Add(timeout)
	pause := 20 * time.Millisecond
	for {
		md, lac := r.snapshot()
		if lac > after || md.State == core.StateClosed {
			return lac, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return lac, nil
		}
		start := time.Now()
		changed, err := r.waitRound(ctx, md, after, left)
		if err != nil {
			return r.LAC(), err
		}
		if !changed && r.LAC() <= after && time.Since(start) < left/2 {
			// Every bookie answered at once without news (none has the
			// ledger yet, or they fail): do not spin.
			if !sleepCtx(ctx, min(pause, max(time.Until(deadline), 0))) {
				return r.LAC(), ctx.Err()
			}
			pause = min(2*pause, time.Second)
		}
	}
}

// waitRound long-polls the bookies of md's last segment for up to wait
// while watching the metadata; changed reports new metadata.
func (r *Reader) waitRound(ctx context.Context, md core.Metadata, after int64, wait time.Duration) (changed bool, err error) {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := r.c.cfg.Store.Watch(rctx, LedgerKey(r.id), md.Version+1)
	polled := make(chan int64, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { polled <- r.pollLAC(rctx, md, after, wait) })
	for {
		select {
		case lac := <-polled:
			r.raise(lac)
			return false, nil
		case ev, ok := <-events:
			if !ok {
				// The watch ended (compacted history, store closing):
				// read the metadata instead, then rely on the polls.
				events = nil
				if changed, err := r.refresh(ctx, md.Version); changed || err != nil {
					return changed, err
				}
				continue
			}
			if ev.Type == meta.EventPut && ev.KV.Key == LedgerKey(r.id) {
				rec, err := decodeRecord(ev.KV)
				if err != nil {
					return false, err
				}
				r.adopt(rec.Metadata)
				return true, nil
			}
			if ev.Type == meta.EventDelete {
				return false, fmt.Errorf("%w: ledger %d was deleted", ErrNoLedger, r.id)
			}
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// adopt takes newer metadata (an ensemble change, the close).
func (r *Reader) adopt(md core.Metadata) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if md.Version <= r.md.Version {
		return
	}
	r.md = md
	r.lac = max(r.lac, floorLAC(md))
	if md.State == core.StateClosed {
		r.lac = md.LastEntryID
	}
}

// refresh reads the metadata again; changed if its version is not known.
func (r *Reader) refresh(ctx context.Context, known int64) (changed bool, err error) {
	rec, _, err := r.c.getRecord(ctx, r.id)
	if err != nil {
		return false, err
	}
	r.adopt(rec.Metadata)
	return rec.Version != known, nil
}
