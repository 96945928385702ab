package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stratamesh/strata/broker/consumer"
	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/broker/natsproto"
	"github.com/stratamesh/strata/internal/meta"
)

// runner drives one consumer's deterministic core on its own goroutine:
// pulls, acks and API calls arrive as closures in its mailbox; new
// messages in the managed ledger and the core's deadlines wake it; what
// the core returns is put on the wire; the cursor is persisted in batches
// (every CursorPersist, at once when an AckSync waits).
type runner struct {
	t       *topic
	dlv     dlvBatcher // deliveries to other brokers, batched per emit (runner goroutine)
	name    string
	durable bool
	c       *consumer.Consumer
	cfg     jsapi.ConsumerConfig // as created or last updated (runner goroutine and API calls through call)

	mu    sync.Mutex
	queue []func(now time.Time)
	kick  chan struct{}

	stopOnce sync.Once
	stopCh   chan stopRequest
	done     chan struct{}

	lastPersist time.Time
	syncWaiting bool
	lastActive  time.Time
	deleteSelf  bool
	expiring    bool // a durable past its namespace's subscription_expiry is being deleted
	// delivered is the highest stream sequence delivered (or, at start,
	// dispatched): an AckSync above it is not answered (runner.ack).
	delivered uint64
	// rsub is the replicated subscription state (repl_subs.go); nil for
	// other consumers.
	rsub *rsub
	// loadErrSince is when dispatch began to fail reading the stream
	// (zero while it reads), loadErrLogged when that was last logged,
	// loadErrFrom what was delivered then: the stall ends with a delivery
	// past it (a round with no pull waiting reads nothing, and so fails
	// nothing, without proving the reads work again).
	loadErrSince, loadErrLogged time.Time
	loadErrFrom                 uint64
}

// loadRetry is how soon a dispatch round that failed to read a message
// (a bookie was unreachable) is tried again.
const loadRetry = 50 * time.Millisecond

// loadRetryMax bounds the wait between read retries of a consumer whose
// reads keep failing.
const loadRetryMax = 2 * time.Second

// loadRetryIn is how soon to retry a failed read: loadRetry at first,
// then a tenth of how long the reads have failed, up to loadRetryMax (an
// entry no bookie can serve is not asked for 20 times a second forever).
func (r *runner) loadRetryIn(now time.Time) time.Duration {
	if r.loadErrSince.IsZero() {
		return loadRetry
	}
	return min(max(loadRetry, now.Sub(r.loadErrSince)/10), loadRetryMax)
}

// loadErrLogEvery is how often a consumer that cannot read its stream
// says so again while it lasts.
const loadErrLogEvery = 30 * time.Second

// noteLoadErr logs a consumer stalled on a read of the stream that fails
// (e.g. no bookie of an entry's write set answers): at once, then every
// loadErrLogEvery while it lasts, and when it reads again. Without it the
// consumer's clients only saw their pulls time out.
func (r *runner) noteLoadErr(now time.Time) {
	err := r.c.LoadErr()
	log := r.t.s.cfg.Logger
	switch {
	case err != nil && (r.loadErrSince.IsZero() || now.Sub(r.loadErrLogged) >= loadErrLogEvery):
		if r.loadErrSince.IsZero() {
			r.loadErrSince, r.loadErrFrom = now, r.delivered
		}
		r.loadErrLogged = now
		log.Warn("consumer stalled: reading the stream failed; retrying", "topic", r.t.name.String(), "consumer", r.name,
			"stalled_for", now.Sub(r.loadErrSince).Round(time.Millisecond), "err", err)
	case err == nil && !r.loadErrSince.IsZero() && r.delivered > r.loadErrFrom:
		log.Info("consumer reads its stream again", "topic", r.t.name.String(), "consumer", r.name,
			"stalled_for", now.Sub(r.loadErrSince).Round(time.Millisecond))
		r.loadErrSince, r.loadErrLogged = time.Time{}, time.Time{}
	}
}

type stopRequest struct {
	graceful bool
	desc     string
}

// replyKey packs the broker a requester is connected to with its inbox,
// so the core's opaque reply strings say where deliveries go.
func replyKey(origin, inbox string) string { return origin + "\x00" + inbox }

func splitReply(r string) (origin, inbox string) {
	if o, in, ok := strings.Cut(r, "\x00"); ok {
		return o, in
	}
	return "", r
}

func (t *topic) startRunner(name string, cfg jsapi.ConsumerConfig, c *consumer.Consumer, durable bool, rs *rsub) *runner {
	r := &runner{
		t: t, dlv: dlvBatcher{s: t.s}, name: name, durable: durable, c: c, cfg: cfg, rsub: rs,
		kick: make(chan struct{}, 1), stopCh: make(chan stopRequest, 1), done: make(chan struct{}),
		lastPersist: t.s.cfg.Now(), lastActive: t.s.cfg.Now(),
	}
	st, _, _ := c.Snapshot() // before the loop owns c
	r.delivered = st.Delivered
	t.s.goRun(r.loop)
	if rs != nil {
		t.s.goRun(r.shipLoop)
	}
	return r
}

// post queues f to run on the runner's goroutine; it never blocks.
func (r *runner) post(f func(now time.Time)) {
	r.mu.Lock()
	r.queue = append(r.queue, f)
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

var errRunnerStopped = errors.New("jetstream: consumer stopped")

// call runs f on the runner's goroutine and waits for it.
func (r *runner) call(ctx context.Context, f func(now time.Time)) error {
	done := make(chan struct{})
	r.post(func(now time.Time) { f(now); close(done) })
	select {
	case <-done:
		return nil
	case <-r.done:
		select {
		case <-done:
			return nil
		default:
			return errRunnerStopped
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stop ends the runner: waiting requests get 409 <desc>; graceful
// persists the cursor first. It waits for the goroutine to end.
func (r *runner) stop(graceful bool, desc string) {
	r.stopOnce.Do(func() { r.stopCh <- stopRequest{graceful: graceful, desc: desc} })
	<-r.done
}

func (r *runner) loop() {
	defer close(r.done)
	cfg := &r.t.s.cfg
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		notify := r.t.ml.Notify()
		wait := time.Hour
		now := cfg.Now()
		if d := r.c.NextDeadline(); !d.IsZero() {
			wait = d.Sub(now)
		}
		if r.c.Dirty() {
			wait = min(wait, r.lastPersist.Add(cfg.CursorPersist).Sub(now))
		}
		if r.c.LoadErr() != nil {
			wait = min(wait, r.loadRetryIn(now)) // a bookie read failed: try the round again soon
		}
		if exp := r.expiry(); exp > 0 {
			// Wake to delete an inactive consumer (else an idle one
			// waited for its next deadline, up to an hour).
			wait = min(wait, latest(r.lastActive, r.c.LastActivity()).Add(exp).Sub(now)+time.Millisecond)
		}
		timer.Reset(max(wait, 0))
		select {
		case <-r.kick:
		case <-notify:
		case <-timer.C:
		case req := <-r.stopCh:
			now := cfg.Now()
			r.runQueue(now)
			if req.graceful {
				r.persist(now, true)
				r.persistExact(now)
			}
			r.emit(r.c.Stop(now, req.desc))
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		now = cfg.Now()
		r.runQueue(now)
		r.emit(r.c.Tick(now))
		r.persist(now, false)
		r.noteLoadErr(now)
		if r.deleteSelf {
			return
		}
		exp := r.expiry()
		if exp > 0 && now.Sub(latest(r.lastActive, r.c.LastActivity())) > exp {
			if !r.durable {
				r.t.removeRunner(r.name, r)
				r.emit(r.c.Stop(now, jsapi.DescConsumerDeleted))
				return
			}
			if !r.expiring {
				// A durable is deleted with its cursor, off this goroutine
				// (the deletion stops the runner and waits for it).
				r.expiring = true
				r.t.s.cfg.Logger.Info("deleting a durable consumer past its namespace's subscription_expiry",
					"topic", r.t.name.String(), "consumer", r.name, "expiry", exp)
				r.t.s.goRun(func() {
					ctx, cancel := context.WithTimeout(r.t.s.ctx, apiTimeout)
					defer cancel()
					if err := r.t.deleteConsumer(ctx, r.name, r); err != nil {
						r.t.s.cfg.Logger.Warn("deleting an expired consumer failed", "topic", r.t.name.String(), "consumer", r.name, "err", err)
					}
				})
			}
		}
	}
}

// expiry is how long the consumer may be inactive before it is deleted
// (0: never): an ephemeral's inactive_threshold; for a durable that is
// not a replicated subscription, its namespace's subscription_expiry
// (Pulsar's subscription expiration; a replicated subscription lives in
// every region and is deleted only by its users).
func (r *runner) expiry() time.Duration {
	if !r.durable {
		return r.cfg.InactiveThreshold
	}
	if r.rsub != nil || isReplicated(&r.cfg) {
		return 0
	}
	ns, _ := r.t.s.namespace(r.t.name.Tenant, r.t.name.Namespace)
	return ns.SubscriptionExpiry
}

func (r *runner) runQueue(now time.Time) {
	for {
		r.mu.Lock()
		q := r.queue
		r.queue = nil
		r.mu.Unlock()
		if len(q) == 0 {
			return
		}
		for _, f := range q {
			f(now)
		}
	}
}

// persist writes the cursor when it changed and the batch interval passed
// (or an AckSync waits, or force), then releases the AckSync replies the
// write covered. A failed ownership condition drops the topic.
func (r *runner) persist(now time.Time, force bool) {
	if !r.c.Dirty() {
		return
	}
	// Batched, except: an AckSync waits, the delivery counter needs a new
	// reserved block (deliveries stall until it is persisted), or the
	// consumer is ephemeral (nothing to write).
	urgent := r.syncWaiting || r.c.NeedsReservation() || !r.durable
	if !force && !urgent && now.Sub(r.lastPersist) < r.t.s.cfg.CursorPersist {
		return
	}
	if !r.durable {
		_, gen, _ := r.c.Snapshot()
		r.syncWaiting = false
		r.emit(r.c.Persisted(gen))
		return
	}
	st, gen, _ := r.c.Snapshot()
	if r.durable {
		ctx, cancel := context.WithTimeout(r.t.s.ctx, 5*time.Second)
		err := r.t.writeCursor(ctx, r.name, &st)
		cancel()
		if err != nil {
			if errors.Is(err, meta.ErrConflict) {
				go r.t.lost(err)
			} else {
				r.t.s.cfg.Logger.Warn("persisting a cursor failed; will retry", "consumer", r.name, "err", err)
			}
			r.lastPersist = now
			return
		}
	}
	r.lastPersist = now
	r.syncWaiting = false
	r.emit(r.c.Persisted(gen))
}

// pull queues a pull request (CONSUMER.MSG.NEXT or +NXT) from a client of
// broker origin.
func (r *runner) pull(origin, inbox string, body []byte) {
	req, err := jsapi.ParsePullRequest(body)
	if err != nil {
		var bad *jsapi.BadPullRequestError
		desc := jsapi.DescBadRequest("")
		if errors.As(err, &bad) {
			desc = jsapi.DescBadRequest(bad.Detail)
		}
		r.t.s.deliver(origin, inbox, inbox, "", natsproto.AppendStatusHeader(nil, jsapi.StatusBadRequest, desc), nil)
		return
	}
	key := replyKey(origin, inbox)
	r.post(func(now time.Time) {
		r.lastActive = now
		r.emit(r.c.Pull(now, key, req))
	})
}

// ack applies an ack from a client of broker origin; reply is set for
// AckSync (answered after persistence) and +NXT. As on the reference, an
// AckSync +ACK or +TERM of a stream sequence above what was delivered
// gets no answer (a duplicate or stale one does).
func (r *runner) ack(origin string, am jsapi.AckMeta, body []byte, reply string) {
	a := jsapi.ParseAck(body)
	if a.Kind == jsapi.AckUnknown {
		return
	}
	r.post(func(now time.Time) {
		r.lastActive = now
		var key string
		if reply != "" && !((a.Kind == jsapi.AckAck || a.Kind == jsapi.AckTerm) && am.StreamSeq > r.delivered) {
			key = replyKey(origin, reply)
			r.syncWaiting = true
		}
		r.emit(r.c.Ack(now, am.StreamSeq, am.ConsumerSeq, a, key))
	})
}

// emit puts the core's outputs on the wire.
func (r *runner) emit(outs []consumer.Out) {
	s := r.t.s
	dlv := &r.dlv
	defer dlv.flush()
	for i := range outs {
		o := &outs[i]
		origin, inbox := splitReply(o.Reply)
		switch o.Kind {
		case consumer.Deliver:
			r.delivered = max(r.delivered, o.Ack.StreamSeq)
			ack := jsapi.FormatAckSubject(o.Ack)
			hdr := o.Msg.Header
			if o.PinID != "" {
				hdr = withHeader(hdr, jsapi.HdrPinID, o.PinID)
			}
			dlv.add(origin, &envelope{Origin: s.cfg.Name, Subject: inbox, Reply: ack, Show: o.Msg.Subject, Header: hdr, Data: o.Msg.Data})
		case consumer.Status:
			dlv.add(origin, &envelope{Origin: s.cfg.Name, Subject: inbox, Show: inbox, Header: natsproto.AppendStatusHeader(nil, o.Status, o.Description, statusKV(o)...)})
		case consumer.Pinned, consumer.Unpinned:
			dlv.flush()
			r.pinAdvisory(o)
		case consumer.AckReply:
			dlv.flush()
			s.respond(inbox, nil)
		case consumer.Advisory:
			dlv.flush()
			st := r.t.stream()
			body, _ := json.Marshal(map[string]any{
				"type": "io.nats.jetstream.advisory.v1.max_deliver", "stream": st.stream,
				"consumer": r.name, "stream_seq": o.Seq, "timestamp": s.cfg.Now().UTC(),
			})
			s.srv.PublishInternal(s.space(st.name.Tenant, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."+st.stream+"."+r.name), nil, nil, body)
		}
	}
}

func (t *topic) removeRunner(name string, r *runner) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.consumers[name] == r {
		delete(t.consumers, name)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// persistExact writes the cursor one last time on a graceful stop with
// its delivery counter exact rather than a reserved block ahead (nothing
// is delivered after it), so the next owner continues dseq without a
// jump, as a restarted reference server does.
func (r *runner) persistExact(now time.Time) {
	if !r.durable {
		return
	}
	st, _, _ := r.c.Snapshot()
	ci := r.c.Info(now)
	if ci.Delivered.Consumer >= st.DSeqReserved {
		return
	}
	st.DSeqReserved = ci.Delivered.Consumer
	ctx, cancel := context.WithTimeout(r.t.s.ctx, 5*time.Second)
	defer cancel()
	if err := r.t.writeCursor(ctx, r.name, &st); err != nil {
		r.t.s.cfg.Logger.Warn("persisting a cursor at close failed", "consumer", r.name, "err", err)
	}
}
