package ledger

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/bookie/storage"
)

// Backoff between recovery attempts that could not decide.
const (
	recoveryMinBackoff = 100 * time.Millisecond
	recoveryMaxBackoff = 5 * time.Second
)

// OpenForTakeover recovers ledger id to take it over (BookKeeper's ledger
// recovery; ARCHITECTURE §2): it CASes the metadata OPEN → IN_RECOVERY
// (which also makes the old writer's next ensemble change fail), fences
// the last segment's bookies (recovery reads carry the fence flag too),
// reads forward from the highest LAC they report, rewrites every entry
// found on any bookie to its whole write set, stops at the first entry
// that Qw−Qa+1 bookies of its write set report absent, and CASes
// IN_RECOVERY → CLOSED. It returns the CLOSED metadata; every entry ever
// confirmed to the old writer is at or below its LastEntryID, and the old
// writer's later appends fail. A CLOSED ledger is returned as it is.
//
// When recovery cannot decide (bookies unreachable, answering for another
// instance or corrupt, rewrites failing) it never closes the ledger
// short: it retries with backoff (100 ms doubling to 5 s) until it can or
// ctx ends (then ctx's error; the ledger stays IN_RECOVERY and another
// OpenForTakeover resumes). Another client recovering concurrently is
// harmless: one close CAS wins and both return its result. Errors:
// ErrNoLedger, ErrUnauthorized (wrong password), ctx's.
//
// A recovered entry counts once Qa bookies of its write set stored its
// rewrite. When more than Qw−Qa of them fail it (with Qw = Qa, one bookie
// down), recovery changes the ensemble as BookKeeper's does: placement
// picks a writable bookie outside the ensemble, the core's new segment
// (from the first entry not yet confirmed) is CASed requiring
// IN_RECOVERY at the version known, with the fenced segment recorded
// beside it, and the rewrites go to the new bookie (naming its
// instance). Where the ledger ends is still decided on the fenced
// segment's bookies only. No replacement available: retry as above. The
// CAS finding the ledger CLOSED by another recoverer returns that record.
func (c *Client) OpenForTakeover(ctx context.Context, id int64, password []byte) (core.Metadata, error) {
	ctx, end, err := c.begin(ctx)
	if err != nil {
		return core.Metadata{}, err
	}
	defer end()
	key := masterKey(password)
	log := c.log.With("ledger", id)
	wait := recoveryMinBackoff
	for attempt := 1; ; attempt++ {
		md, err := c.recoverOnce(ctx, id, key)
		if err == nil {
			if attempt > 1 {
				log.Info("ledger recovered", "last_entry", md.LastEntryID, "length", md.Length, "attempts", attempt)
			}
			return md, nil
		}
		if errors.Is(err, ErrNoLedger) || errors.Is(err, core.ErrUnauthorized) || errors.Is(err, core.ErrInvalidMetadata) ||
			errors.Is(err, ErrClientClosed) {
			return core.Metadata{}, err
		}
		if ctx.Err() != nil {
			return core.Metadata{}, fmt.Errorf("ledger %d: recovery: %w (last attempt: %v)", id, ctx.Err(), err)
		}
		log.Warn("ledger recovery undecided; retrying", "attempt", attempt, "retry_in", wait, "err", err)
		if !sleepCtx(ctx, wait) {
			return core.Metadata{}, fmt.Errorf("ledger %d: recovery: %w (last attempt: %v)", id, ctx.Err(), err)
		}
		wait = min(2*wait, recoveryMaxBackoff)
	}
}

// recoverOnce is one attempt: read the metadata, begin recovery if
// needed, run a core.Recovery, close.
func (c *Client) recoverOnce(ctx context.Context, id int64, key []byte) (core.Metadata, error) {
	rec, _, err := c.getRecord(ctx, id)
	if err != nil {
		return core.Metadata{}, err
	}
	if subtle.ConstantTimeCompare(rec.MasterKey, key) != 1 {
		return core.Metadata{}, fmt.Errorf("%w: ledger %d: wrong password", core.ErrUnauthorized, id)
	}
	if rec.State == core.StateClosed {
		return rec.Metadata, nil
	}
	if rec.DigestType != DigestCRC32C {
		return core.Metadata{}, fmt.Errorf("%w: ledger %d: digest type %q is not supported", core.ErrInvalidMetadata, id, rec.DigestType)
	}
	md, err := core.BeginRecovery(rec.Metadata)
	if err != nil {
		return core.Metadata{}, err
	}
	if rec.State == core.StateOpen {
		rev, cur, err := c.casRecord(ctx, record{Metadata: md, Custom: rec.Custom})
		switch {
		case err != nil:
			return core.Metadata{}, err
		case cur != nil:
			return core.Metadata{}, fmt.Errorf("ledger %d: metadata changed while starting recovery (version %d)", id, cur.Version)
		}
		md.Version = rev
		c.log.Info("ledger recovery started", "ledger", id, "version", rev)
	}
	r, err := core.NewRecovery(md, core.DefaultRecoveryConfig())
	if err != nil {
		return core.Metadata{}, err
	}
	run := &recoveryRun{c: c, id: id, key: key, core: r, custom: rec.Custom, results: make(chan func(), 64)}
	closing, err := run.drive(ctx)
	if err != nil {
		if run.other != nil && run.other.State == core.StateClosed {
			return run.other.Metadata, nil // closed by another recoverer during our ensemble change
		}
		return core.Metadata{}, err
	}
	rev, cur, err := c.casRecord(ctx, record{Metadata: closing, Custom: rec.Custom})
	switch {
	case err != nil:
		return core.Metadata{}, err
	case cur != nil && cur.State == core.StateClosed:
		return cur.Metadata, nil // another recoverer closed it first
	case cur != nil:
		return core.Metadata{}, fmt.Errorf("ledger %d: metadata changed during recovery (now %s at version %d)", id, cur.State, cur.Version)
	}
	closing.Version = rev
	c.log.Info("ledger closed by recovery", "ledger", id, "last_entry", closing.LastEntryID, "length", closing.Length)
	return closing, nil
}

// recoveryRun drives one core.Recovery. The calling goroutine owns the
// core; requests run on goroutines of the run, whose answers come back
// as closures on results, applied by the owner.
type recoveryRun struct {
	c        *Client
	id       int64
	key      []byte
	custom   map[string]string
	core     *core.Recovery
	results  chan func()
	wg       sync.WaitGroup
	sessions map[core.BookieID]*addSession
	placing  bool                     // a placement request is out
	failed   map[core.BookieID]string // bookies whose rewrites failed, with why: never placed again
	other    *record                  // the record an ensemble change's CAS found instead
	fatal    error                    // ends the run (an ensemble change's CAS failed)
}

// drive runs the recovery to its decision: the CLOSED metadata to write,
// or an error (wrapping core.ErrRetry when undecided).
func (r *recoveryRun) drive(ctx context.Context) (core.Metadata, error) {
	ctx, cancel := context.WithCancel(ctx)
	r.sessions, r.failed = map[core.BookieID]*addSession{}, map[core.BookieID]string{}
	defer func() {
		cancel()
		for _, s := range r.sessions {
			s.kill()
		}
		// Requests end with ctx; drain their answers so none blocks.
		done := make(chan struct{})
		go func() { r.wg.Wait(); close(done) }()
		for {
			select {
			case <-r.results:
			case <-done:
				return
			}
		}
	}()
	for {
		for r.core.HasReady() {
			rd := r.core.Ready()
			r.core.Advance(rd)
			for _, f := range rd.Fences {
				r.fence(ctx, f)
			}
			for _, rq := range rd.Reads {
				r.read(ctx, rq)
			}
			for _, w := range rd.Rewrites {
				r.rewrite(ctx, w)
			}
			r.maybePlace(ctx)
			if rd.MetadataUpdate != nil {
				r.cas(ctx, *rd.MetadataUpdate)
			}
			if rd.Close != nil {
				return *rd.Close, nil
			}
			if rd.Err != nil {
				return core.Metadata{}, rd.Err
			}
		}
		select {
		case apply := <-r.results:
			apply()
			if r.fatal != nil {
				return core.Metadata{}, r.fatal
			}
		case <-ctx.Done():
			return core.Metadata{}, ctx.Err()
		}
	}
}

// do runs f on a goroutine of the run and hands its answer to the owner.
func (r *recoveryRun) do(ctx context.Context, f func(ctx context.Context) func()) {
	r.wg.Go(func() {
		apply := f(ctx)
		select {
		case r.results <- apply:
		case <-ctx.Done():
		}
	})
}

func (r *recoveryRun) fence(ctx context.Context, f core.FenceRequest) {
	r.do(ctx, func(ctx context.Context) func() {
		lac, err := r.withConn(ctx, f.Bookie, f.Instance, func(ctx context.Context, conn Conn) (int64, error) {
			return conn.Fence(ctx, r.id, r.key)
		})
		if err != nil {
			r.c.log.Info("recovery: fence failed", "ledger", r.id, "bookie", f.Bookie, "err", err)
			return func() { r.core.FenceFailed(f.Bookie) }
		}
		return func() { r.core.Fenced(f.Bookie, lac) }
	})
}

// read is a recovery read (fence flag set): the entry → Found, NO_ENTRY
// or NO_LEDGER → Absent, anything else (wrong instance, corrupt, a frame
// failing its CRC, timeouts) → Unknown: a lost or damaged copy is never
// taken for proof that an entry was not confirmed.
func (r *recoveryRun) read(ctx context.Context, rq core.ReadRequest) {
	r.do(ctx, func(ctx context.Context) func() {
		var es []storage.Entry
		_, err := r.withConn(ctx, rq.Bookie, rq.Instance, func(ctx context.Context, conn Conn) (int64, error) {
			var err error
			es, _, err = conn.RecoveryRead(ctx, r.id, rq.Entry, rq.Entry, r.key)
			return 0, err
		})
		out := core.Unknown()
		switch {
		case err == nil && len(es) > 0 && es[0].LedgerID == r.id && es[0].EntryID == rq.Entry:
			if _, length, ferr := openFrame(es[0].Payload, r.id, rq.Entry); ferr == nil {
				out = core.Found(es[0].Payload, length)
			} else {
				r.c.log.Warn("recovery: bad copy", "ledger", r.id, "entry", rq.Entry, "bookie", rq.Bookie, "err", ferr)
			}
		case errors.Is(err, storage.ErrNoEntry) || errors.Is(err, storage.ErrNoLedger):
			out = core.Absent()
		}
		return func() { r.core.ReadResult(rq.Bookie, rq.Entry, out) }
	})
}

// rewrite re-adds a recovered entry (its stored frame, unchanged) as a
// recovery add, which a fenced bookie accepts.
func (r *recoveryRun) rewrite(ctx context.Context, w core.RewriteRequest) {
	sess := r.sessions[w.Bookie]
	if sess == nil {
		sess = startSession(ctx, &r.wg, r.c, w.Bookie, w.Instance)
		r.sessions[w.Bookie] = sess
	}
	r.do(ctx, func(ctx context.Context) func() {
		answer := make(chan error, 1)
		sess.enqueue(storage.AddRequest{LedgerID: r.id, EntryID: w.Entry, LAC: w.LAC, MasterKey: r.key, Payload: w.Payload, Recovery: true},
			func(err error) { answer <- err })
		t := time.NewTimer(r.c.cfg.AddTimeout)
		defer t.Stop()
		var err error
		select {
		case err = <-answer:
		case <-t.C:
			err = fmt.Errorf("no answer within %v", r.c.cfg.AddTimeout)
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			r.c.log.Info("recovery: rewrite failed", "ledger", r.id, "entry", w.Entry, "bookie", w.Bookie, "err", err)
			return func() {
				if _, ok := r.failed[w.Bookie]; !ok {
					r.failed[w.Bookie] = err.Error()
				}
				r.core.RewriteFailed(w.Bookie, w.Entry)
			}
		}
		return func() { r.core.RewriteAcked(w.Bookie, w.Entry) }
	})
}

// maybePlace asks placement for the bookies the core wants replaced (a
// writable bookie outside the ensembles the core names, never one that
// failed a rewrite of this run nor one in the Client's quarantine), one
// request at a time. No replacement:
// the core ends this attempt with ErrRetry, and OpenForTakeover retries
// after its back-off (never closing short).
func (r *recoveryRun) maybePlace(ctx context.Context) {
	need := r.core.NeedReplacement()
	if r.placing || len(need) == 0 {
		return
	}
	var exclude []string
	for _, b := range r.core.Exclude() {
		exclude = append(exclude, string(b))
	}
	for b := range r.failed {
		if !slices.Contains(exclude, string(b)) {
			exclude = append(exclude, string(b))
		}
	}
	r.placing = true
	r.do(ctx, func(ctx context.Context) func() {
		regs, err := r.c.choose(ctx, len(need), exclude, nil)
		return func() {
			r.placing = false
			for i, old := range need {
				if !slices.Contains(r.core.NeedReplacement(), old) {
					continue
				}
				if err != nil {
					r.c.log.Warn("recovery: no replacement bookie", "ledger", r.id, "failed", old, "err", err)
					r.core.ReplacementUnavailable(old, err)
					continue
				}
				if rerr := r.core.Replace(old, core.BookieID(regs[i].ID), regs[i].Instance); rerr != nil {
					r.core.ReplacementUnavailable(old, rerr)
					continue
				}
				r.c.log.Info("recovery: replacing bookie", "ledger", r.id, "failed", old, "replacement", regs[i].ID,
					"reason", r.failed[old])
			}
		}
	})
}

// cas records the core's ensemble change (IN_RECOVERY at its version).
// A conflict ends this attempt: another recoverer moved the ledger on.
func (r *recoveryRun) cas(ctx context.Context, md core.Metadata) {
	r.do(ctx, func(ctx context.Context) func() {
		rev, cur, err := r.c.casRecord(ctx, record{Metadata: md, Custom: r.custom})
		return func() {
			switch {
			case err != nil:
				// Outcome unknown (ctx ended) or the ledger deleted: end
				// the attempt; the next one reads the record again.
				r.fatal = fmt.Errorf("ledger %d: recovery: record an ensemble change: %w", r.id, err)
			case cur != nil:
				r.other = cur
				_ = r.core.MetadataConflict(cur.Metadata)
				r.c.log.Info("recovery: ensemble change refused", "ledger", r.id, "state", cur.State, "version", cur.Version)
			default:
				_ = r.core.MetadataCommitted(rev)
				last := md.Segments[len(md.Segments)-1]
				r.c.log.Info("recovery changed the ensemble", "ledger", r.id, "first_entry", last.FirstEntry,
					"ensemble", last.Ensemble, "version", rev)
			}
		}
	})
}

// withConn calls f with a connection to (b, instance) under OpTimeout,
// marking the connection stale on transport failures.
func (r *recoveryRun) withConn(ctx context.Context, b core.BookieID, instance string, f func(context.Context, Conn) (int64, error)) (int64, error) {
	conn, err := r.c.conn(ctx, b, instance)
	if err != nil {
		return core.NoEntry, err
	}
	octx, cancel := context.WithTimeout(ctx, r.c.cfg.OpTimeout)
	defer cancel()
	v, err := f(octx, conn)
	if err != nil {
		r.c.noteFailure(b, instance, err)
		if !errors.As(err, new(*bookie.CodeError)) && octx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("no answer within %v: %w", r.c.cfg.OpTimeout, err)
		}
	}
	return v, err
}
