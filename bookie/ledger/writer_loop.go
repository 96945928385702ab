package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/bookie/storage"
)

// idleStreamClose: a writer closes an add stream that has had nothing in
// flight for this long, so that an idle connection carries no open
// stream (gRPC keepalive pings only connections with streams, and the
// bookie's server ends a stream whose pings come too often; see
// DefaultKeepaliveTime). The next add opens a new stream (one round trip).
const idleStreamClose = 15 * time.Second

// Events the owner receives besides appends and closes.
type (
	addResult struct {
		seq uint64
		err error
	}
	placed struct {
		need []core.BookieID
		regs []bookie.Registration
		err  error
	}
	casDone struct {
		close   bool
		md      core.Metadata // what was written
		rev     int64
		current *record // the record found instead (conflict)
		err     error
	}
)

// pendingEntry is an entry added to the core and not yet completed.
type pendingEntry struct {
	frame  []byte
	size   int64
	done   func(int64, error)
	sealed bool
}

// outSend is a send handed to a session and not yet answered.
type outSend struct {
	send     core.Send
	sess     *addSession
	deadline time.Time
}

// writerLoop is the state of a Writer's owner goroutine: the only
// goroutine that touches the core.Writer (CONVENTIONS item 7). It never
// blocks on I/O: sessions send, helper goroutines do placement and etcd,
// and everything comes back through the Writer's mailbox.
type writerLoop struct {
	w    *Writer
	core *core.Writer
	ctx  context.Context // ends when the owner finishes: helpers stop (sessions are closed one by one)
	stop context.CancelFunc

	entries []pendingEntry // entries firstID, firstID+1, ... added, not completed
	firstID int64

	sessions map[core.BookieID]*addSession
	out      map[uint64]*outSend
	seq      uint64

	// Ensemble change. needSince, placeWait and lastPlaceErr last from
	// the first bookie failure until the writer makes progress again (an
	// entry confirmed, or none pending), across the changes in between,
	// so that replacements failing in turn neither reset the backoff nor
	// keep ReplaceTimeout from ending the writer. Which bookies failed is
	// the Client's quarantine.
	needSince    time.Time // when a replacement was first needed since the last progress (zero: none needed)
	placing      bool
	placeRetryAt time.Time
	placeWait    time.Duration
	lastPlaceErr error
	chosen       []string       // replacements chosen in the change under way
	proposal     *core.Metadata // the update whose CAS is in flight
	failures     map[core.BookieID]string
	failedAt     map[connKey]time.Time // bookie instances that failed this writer (not the ledger's failures: fenced, ...), last time

	closing  *closeEv
	closeCAS bool
	ended    error // the writer ended (core error, or no replacements)
	finished bool
}

// Placement retries after a failed attempt wait from minPlaceWait,
// doubling up to maxPlaceWait.
const (
	minPlaceWait = 100 * time.Millisecond
	maxPlaceWait = 2 * time.Second
)

func newWriterLoop(w *Writer, cw *core.Writer) *writerLoop {
	ctx, cancel := context.WithCancel(w.c.ctx)
	return &writerLoop{
		w: w, core: cw, ctx: ctx, stop: cancel,
		sessions: map[core.BookieID]*addSession{}, out: map[uint64]*outSend{},
		failures: map[core.BookieID]string{}, failedAt: map[connKey]time.Time{}, placeWait: minPlaceWait,
	}
}

func (l *writerLoop) run() {
	tick := time.NewTicker(min(max(l.w.c.cfg.AddTimeout/4, 10*time.Millisecond), 250*time.Millisecond))
	defer tick.Stop()
	for !l.finished {
		var closeCtxDone <-chan struct{}
		if l.closing != nil {
			closeCtxDone = l.closing.ctx.Done()
		}
		select {
		case <-l.w.in.notify:
			for _, ev := range l.w.in.take() {
				l.handle(ev)
			}
		case now := <-tick.C:
			l.tick(now)
		case <-l.w.stop:
			l.finish(l.core.Metadata(), fmt.Errorf("%w: ledger %d: client closed", ErrWriterClosed, l.w.id))
		case <-closeCtxDone:
			l.finish(l.core.Metadata(), fmt.Errorf("ledger %d: close gave up, the ledger stays OPEN: %w", l.w.id, l.closing.ctx.Err()))
		}
		if !l.finished {
			l.pump()
		}
	}
}

func (l *writerLoop) handle(ev any) {
	switch ev := ev.(type) {
	case *appendEv:
		l.onAppend(ev)
	case addResult:
		l.onAddResult(ev)
	case placed:
		l.onPlaced(ev)
	case casDone:
		l.onCAS(ev)
	case *closeEv:
		if l.closing == nil {
			l.closing = ev
		}
	}
}

func (l *writerLoop) onAppend(ev *appendEv) {
	err := ev.err
	switch {
	case err != nil:
	case l.ended != nil:
		err = l.ended
	case l.closing != nil:
		err = fmt.Errorf("%w: ledger %d is closing", ErrWriterClosed, l.w.id)
	}
	if err == nil {
		if _, err = l.core.Add(len(ev.frame) - FrameHeaderSize); err == nil {
			l.entries = append(l.entries, pendingEntry{frame: ev.frame, size: ev.size, done: ev.done})
			return
		}
	}
	l.w.flow.release(ev.size)
	done := ev.done
	l.w.cbq.push(func() { done(core.NoEntry, err) })
}

// pump carries out what the core asks for until it has nothing more.
func (l *writerLoop) pump() {
	for l.ended == nil && l.core.HasReady() {
		rd := l.core.Ready()
		l.core.Advance(rd)
		for _, s := range rd.Sends {
			l.send(s)
		}
		for _, id := range rd.Completed {
			l.complete(id)
		}
		if rd.MetadataUpdate != nil {
			l.startCAS(*rd.MetadataUpdate, false)
		}
		if rd.Err != nil {
			l.end(rd.Err)
		}
	}
	l.maybePlace()
	l.maybeClose()
}

func (l *writerLoop) send(s core.Send) {
	e := &l.entries[s.Entry-l.firstID]
	if !e.sealed {
		sealFrame(e.frame, l.w.id, s.Entry, s.Length)
		e.sealed = true
	}
	sess := l.sessions[s.Bookie]
	if sess == nil || sess.instance != s.Instance {
		if sess != nil {
			l.failSession(sess, core.FailUnavailable)
		}
		sess = startSession(l.w.c.ctx, &l.w.wg, l.w.c, s.Bookie, s.Instance)
		l.sessions[s.Bookie] = sess
	}
	now := time.Now()
	l.seq++
	seq := l.seq
	l.out[seq] = &outSend{send: s, sess: sess, deadline: now.Add(l.w.c.cfg.AddTimeout)}
	sess.fifo = append(sess.fifo, seq)
	sess.lastUsed = now
	in := l.w.in
	sess.enqueue(storage.AddRequest{LedgerID: l.w.id, EntryID: s.Entry, LAC: s.LAC, MasterKey: l.w.key, Payload: e.frame},
		func(err error) { in.push(addResult{seq: seq, err: err}) })
}

func (l *writerLoop) complete(id int64) {
	if id != l.firstID || len(l.entries) == 0 {
		panic(fmt.Sprintf("ledger %d: completed entry %d, expected %d", l.w.id, id, l.firstID))
	}
	e := l.entries[0]
	l.entries[0] = pendingEntry{}
	l.entries = l.entries[1:]
	l.firstID++
	l.w.flow.release(e.size)
	l.w.lac.Store(id) // before the callback: it may ask for the LAC
	l.w.cbq.push(func() { e.done(id, nil) })
	l.progressed()
}

// progressed: the writer confirmed an entry (or has none pending), so
// the replacements it placed work: the next failure starts afresh.
func (l *writerLoop) progressed() {
	l.needSince, l.placeRetryAt, l.placeWait, l.lastPlaceErr = time.Time{}, time.Time{}, minPlaceWait, nil
}

func (l *writerLoop) onAddResult(r addResult) {
	o := l.out[r.seq]
	if o == nil {
		return // answered already (timed out, or its session was failed)
	}
	delete(l.out, r.seq)
	if l.ended != nil {
		return
	}
	if r.err == nil {
		l.core.Acked(o.send)
		return
	}
	reason := failReason(r.err)
	l.noteFailed(o.send.Bookie, o.send.Instance, reason, r.err)
	l.core.Failed(o.send, reason)
	if reason == core.FailUnavailable {
		// The stream is broken: its other adds fail too; start afresh.
		l.failSession(o.sess, reason)
	}
}

// failReason maps a failed add to the core's reasons (core doc).
func failReason(err error) core.FailReason {
	switch {
	case errors.Is(err, storage.ErrFenced):
		return core.FailFenced
	case errors.Is(err, storage.ErrMasterKey):
		return core.FailUnauthorized
	case errors.Is(err, bookie.ErrInvalid):
		return core.FailInvalid
	case errors.Is(err, bookie.ErrWrongInstance):
		return core.FailWrongInstance
	case errors.Is(err, storage.ErrReadOnly):
		return core.FailReadOnly
	}
	return core.FailUnavailable
}

// noteFailed records that bookie b (instance) failed an add. A bookie
// failure (not the ledger's: fenced, unauthorized, invalid) also keeps
// this writer from placing b back for Config.BookieQuarantine, and puts
// b in the Client's quarantine, which the other writers' placements
// avoid while they have other bookies.
func (l *writerLoop) noteFailed(b core.BookieID, instance string, reason core.FailReason, err error) {
	if _, seen := l.failures[b]; !seen && reason != core.FailFenced {
		l.w.log.Warn("bookie failed an add", "bookie", b, "reason", reason, "err", err)
	}
	l.failures[b] = reason.String()
	switch reason {
	case core.FailTimeout, core.FailUnavailable, core.FailWrongInstance, core.FailReadOnly:
		now := time.Now()
		l.failedAt[connKey{string(b), instance}] = now
		l.w.c.quarantine.add(b, instance, now)
	}
}

// failSession fails every unanswered send of sess with reason and kills it.
func (l *writerLoop) failSession(sess *addSession, reason core.FailReason) {
	for _, seq := range sess.fifo {
		if o := l.out[seq]; o != nil {
			delete(l.out, seq)
			if l.ended == nil {
				l.core.Failed(o.send, reason)
			}
		}
	}
	sess.fifo = nil
	sess.kill()
	if l.sessions[sess.bookie] == sess {
		delete(l.sessions, sess.bookie)
	}
}

// tick fails sessions whose oldest unanswered add is older than
// AddTimeout, closes idle sessions, and retries placement.
func (l *writerLoop) tick(now time.Time) {
	for _, sess := range l.sessions {
		for len(sess.fifo) > 0 && l.out[sess.fifo[0]] == nil {
			sess.fifo = sess.fifo[1:]
		}
		switch {
		case len(sess.fifo) > 0 && now.After(l.out[sess.fifo[0]].deadline):
			if l.ended == nil {
				l.noteFailed(sess.bookie, sess.instance, core.FailTimeout, fmt.Errorf("no answer within %v", l.w.c.cfg.AddTimeout))
			}
			l.failSession(sess, core.FailTimeout)
		case len(sess.fifo) == 0 && now.Sub(sess.lastUsed) > idleStreamClose:
			sess.closeGracefully()
			delete(l.sessions, sess.bookie)
		}
	}
}

// end ends the writer: every entry not completed fails with err.
func (l *writerLoop) end(err error) {
	if l.ended != nil {
		return
	}
	l.ended = err
	l.failEntries(err)
	for _, sess := range l.sessions {
		l.failSession(sess, core.FailUnavailable)
	}
	l.w.log.Warn("ledger writer ended", "err", err, "lac", l.core.LAC())
}

func (l *writerLoop) failEntries(err error) {
	for i := range l.entries {
		e, id := l.entries[i], l.firstID+int64(i)
		l.w.flow.release(e.size)
		l.w.cbq.push(func() { e.done(id, err) })
	}
	l.firstID += int64(len(l.entries))
	l.entries = nil
}

// goHelper runs f on a goroutine owned by the writer; it ends with l.ctx.
func (l *writerLoop) goHelper(f func(ctx context.Context)) {
	l.w.wg.Add(1)
	go func() {
		defer l.w.wg.Done()
		f(l.ctx)
	}()
}

// maybePlace asks placement for the bookies the core still needs, one
// request at a time, with backoff; placement leaves out the bookies in
// the Client's quarantine (which holds those that failed here). After
// ReplaceTimeout without progress the writer ends with
// ErrNotEnoughBookies.
func (l *writerLoop) maybePlace() {
	if l.ended != nil {
		return
	}
	need := l.core.NeedReplacement()
	now := time.Now()
	if len(need) == 0 {
		if len(l.entries) == 0 {
			l.progressed()
		}
		return
	}
	if l.needSince.IsZero() {
		l.needSince = now
	}
	if now.Sub(l.needSince) > l.w.c.cfg.ReplaceTimeout {
		l.end(fmt.Errorf("%w: ledger %d: no replacement for bookies %v (failed: %v) within %v: %v",
			ErrNotEnoughBookies, l.w.id, need, l.failures, l.w.c.cfg.ReplaceTimeout, l.lastPlaceErr))
		return
	}
	if l.placing || now.Before(l.placeRetryAt) {
		return
	}
	exclude := slices.Clone(l.chosen)
	// A bookie instance that failed this writer is not placed back into it
	// while its quarantine lasts, even when nothing else is left: two
	// bookies that died together would otherwise replace each other, one
	// metadata write after another, until their registrations expired. A
	// new instance of it (the bookie came back on an empty disk) is a
	// candidate at once.
	var banned []connKey
	for k, at := range l.failedAt {
		if now.Sub(at) < l.w.c.cfg.BookieQuarantine {
			banned = append(banned, k)
		}
	}
	for _, md := range []*core.Metadata{new(l.core.Metadata()), l.proposal} {
		if md != nil {
			for _, b := range md.Segments[len(md.Segments)-1].Ensemble {
				exclude = append(exclude, string(b))
			}
		}
	}
	l.placing = true
	c := l.w.c
	l.goHelper(func(ctx context.Context) {
		regs, err := c.choose(ctx, len(need), exclude, banned)
		l.w.in.push(placed{need: need, regs: regs, err: err})
	})
}

func (l *writerLoop) onPlaced(p placed) {
	l.placing = false
	if l.ended != nil {
		return
	}
	retry := func(err error) {
		l.lastPlaceErr = err
		l.placeRetryAt = time.Now().Add(l.placeWait)
		l.placeWait = min(2*l.placeWait, maxPlaceWait)
	}
	if p.err != nil {
		l.w.log.Warn("no replacement bookie yet", "need", p.need, "err", p.err)
		retry(p.err)
		return
	}
	for i, old := range p.need {
		if !slices.Contains(l.core.NeedReplacement(), old) {
			continue
		}
		r := p.regs[i]
		if err := l.core.Replace(old, core.BookieID(r.ID), r.Instance); err != nil {
			retry(err)
			continue
		}
		l.chosen = append(l.chosen, r.ID)
		l.w.log.Info("replacing bookie", "failed", old, "replacement", r.ID, "reason", l.failures[old])
	}
}

// startCAS writes md (an ensemble change, or the closing record) in etcd
// from a helper goroutine. The close's write also ends with Close's ctx.
func (l *writerLoop) startCAS(md core.Metadata, closing bool) {
	if !closing {
		l.proposal = &md
	} else {
		l.closeCAS = true
	}
	closeCtx := l.closing
	l.goHelper(func(ctx context.Context) {
		if closing {
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(closeCtx.ctx, cancel)()
			ctx = cctx
		}
		rev, cur, err := l.w.c.casRecord(ctx, record{Metadata: md, Custom: l.w.custom})
		l.w.in.push(casDone{close: closing, md: md, rev: rev, current: cur, err: err})
	})
}

func (l *writerLoop) onCAS(r casDone) {
	if r.close {
		l.onCloseCAS(r)
		return
	}
	l.proposal = nil
	if l.ended != nil {
		return
	}
	switch {
	case r.err != nil && errors.Is(r.err, ErrNoLedger):
		l.end(fmt.Errorf("%w: ledger %d was deleted during an ensemble change", core.ErrMetadataConflict, l.w.id))
	case r.err != nil:
		// The owner is finishing (ctx ended): nothing more to do.
	case r.current != nil:
		_ = l.core.MetadataConflict(r.current.Metadata)
	default:
		_ = l.core.MetadataCommitted(r.rev)
		l.chosen = nil
		md := l.core.Metadata()
		l.publish(md)
		last := md.Segments[len(md.Segments)-1]
		l.w.log.Info("ensemble changed", "first_entry", last.FirstEntry, "ensemble", last.Ensemble, "version", r.rev)
	}
}

func (l *writerLoop) publish(md core.Metadata) {
	l.w.mdMu.Lock()
	l.w.md = md
	l.w.mdMu.Unlock()
}

// maybeClose closes the ledger once Close was asked for and nothing is
// pending.
func (l *writerLoop) maybeClose() {
	if l.closing == nil || l.closeCAS || l.finished {
		return
	}
	if l.ended != nil {
		l.finish(l.core.Metadata(), l.ended)
		return
	}
	md, err := l.core.Close()
	switch {
	case errors.Is(err, core.ErrPending):
		return
	case err != nil:
		l.finish(l.core.Metadata(), err)
	default:
		l.startCAS(md, true)
	}
}

func (l *writerLoop) onCloseCAS(r casDone) {
	switch {
	case r.err != nil:
		l.finish(l.core.Metadata(), fmt.Errorf("ledger %d: close: %w", l.w.id, r.err))
	case r.current != nil:
		cur := r.current.Metadata
		var err error
		switch cur.State {
		case core.StateClosed:
			err = fmt.Errorf("%w: ledger %d was closed by another client at entry %d (this writer's LAC %d)",
				core.ErrLedgerClosed, l.w.id, cur.LastEntryID, r.md.LastEntryID)
		case core.StateInRecovery:
			err = fmt.Errorf("%w: ledger %d is being recovered by another client", core.ErrRecovering, l.w.id)
		default:
			err = fmt.Errorf("%w: ledger %d changed at version %d", core.ErrMetadataConflict, l.w.id, cur.Version)
		}
		l.finish(cur, err)
	default:
		r.md.Version = r.rev
		l.finish(r.md, nil)
		l.w.log.Info("ledger closed", "last_entry", r.md.LastEntryID, "length", r.md.Length)
	}
}

// finish ends the owner: result recorded, unconfirmed entries failed,
// sessions closed (gracefully after a clean close), later appends
// refused, callbacks drained.
func (l *writerLoop) finish(md core.Metadata, err error) {
	l.finished = true
	l.w.result = closeResult{md: md.Clone(), err: err}
	l.publish(md.Clone())
	l.w.lac.Store(l.core.LAC())
	if l.ended == nil {
		l.failEntries(fmt.Errorf("%w: ledger %d: %w", ErrWriterClosed, l.w.id, err))
	}
	for _, sess := range l.sessions {
		if err == nil {
			sess.closeGracefully()
		} else {
			sess.kill()
		}
	}
	l.w.stateMu.Lock()
	l.w.stopped = true
	left := l.w.in.take()
	l.w.stateMu.Unlock()
	l.w.flow.close()
	for _, ev := range left {
		if a, ok := ev.(*appendEv); ok {
			l.w.flow.release(a.size)
			e := a.err
			if e == nil {
				e = l.w.stoppedErr()
			}
			l.w.cbq.push(func() { a.done(core.NoEntry, e) })
		}
	}
	l.w.cbq.close()
	l.stop()
}
