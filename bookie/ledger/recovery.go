package ledger

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
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
// Recovery does not change the ensemble (the core's rule): a recovered
// entry counts once Qa bookies of its write set stored its rewrite, so
// with Qw = Qa one unreachable bookie in the write set of an entry past
// the bookies' LAC makes recovery retry until that bookie is back
// (BookKeeper would replace it). Qw > Qa avoids the wait.
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
	run := &recoveryRun{c: c, id: id, key: key, core: r, results: make(chan func(), 64)}
	closing, err := run.drive(ctx)
	if err != nil {
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
	core     *core.Recovery
	results  chan func()
	wg       sync.WaitGroup
	sessions map[core.BookieID]*addSession
}

// drive runs the recovery to its decision: the CLOSED metadata to write,
// or an error (wrapping core.ErrRetry when undecided).
func (r *recoveryRun) drive(ctx context.Context) (core.Metadata, error) {
	ctx, cancel := context.WithCancel(ctx)
	r.sessions = map[core.BookieID]*addSession{}
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
			return func() { r.core.RewriteFailed(w.Bookie, w.Entry) }
		}
		return func() { r.core.RewriteAcked(w.Bookie, w.Entry) }
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
