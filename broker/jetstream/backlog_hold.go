package jetstream

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/tenancy/quota"
)

// backlogState is a topic's backlog quota enforcement (backlog.go): the
// verdict its backlogLoop last reached, and the publishes held.
//
// Held publishes keep their order: a publish that arrives while any is
// held, or while one is being released, is held behind them. One
// goroutine at a time (drainHeld, started when the first is held, ended
// when none is left) releases, refuses or re-routes them, in order; the
// publish path only appends, under mu, and never waits.
type backlogState struct {
	// over is the verdict for producers (producer_exception or
	// producer_request_hold with a subscription over); nil: none.
	over atomic.Pointer[backlogExceeded]
	// busy counts the held publishes plus the one being released: the
	// publish path's fast check (0: nothing held).
	busy atomic.Int64
	// checks counts backlogLoop's measuring rounds (for stats and tests).
	checks atomic.Uint64

	mu        sync.Mutex
	q         []heldPub
	releasing *heldPub // popped and being published by drainHeld
	draining  bool     // drainHeld runs
	kick      chan struct{}
}

// heldPub is one held publish.
type heldPub struct {
	m            message // owned (its buffers copied)
	since, until time.Time
	// storage, when set, is why it is held besides the backlog: the
	// tenant's storage quota refused it; storage() says whether it still
	// does.
	storage func() error
	// notBefore: released, it was refused again (back at the head):
	// not released again before.
	notBefore time.Time
}

// wake makes drainHeld look again (a new verdict, a new held publish).
func (b *backlogState) wake() {
	b.mu.Lock()
	k := b.kick
	b.mu.Unlock()
	if k != nil {
		select {
		case k <- struct{}{}:
		default:
		}
	}
}

// backlogGate applies the topic's backlog verdict to a publish, on the
// publishing connection's goroutine, before it is stored: true when m
// was handled here (refused, or held for drainHeld), false when it goes
// on to be stored. A publish drainHeld releases (m.released) passes.
func (t *topic) backlogGate(m message) bool {
	b := &t.backlog
	if m.released {
		return false
	}
	ex := b.over.Load()
	if ex == nil && b.busy.Load() == 0 {
		return false
	}
	b.mu.Lock()
	if len(b.q) == 0 && b.releasing == nil {
		if ex == nil {
			b.mu.Unlock()
			return false
		}
		if ex.policy != tenancy.BacklogHold {
			b.mu.Unlock()
			t.refuseHeld(m, ex)
			return true
		}
	}
	if len(b.q) >= t.s.cfg.Backlog.HoldMax {
		b.mu.Unlock()
		t.refuseHeld(m, t.holdFull(ex))
		return true
	}
	t.holdLocked(m.owned(), nil, time.Time{}, false)
	b.mu.Unlock()
	b.wake()
	return true
}

// storageHold holds a publish that the tenant's storage quota refused
// (err wraps a *quota.Refusal of Kind quota.Storage, as the publish
// admission reports it) when the topic's namespace has a backlog quota
// with policy producer_request_hold: like a backlog hold, in order with
// the topic's other held publishes, it is stored once Quotas.Check
// admits its bytes (and no subscription is over the backlog quota), or
// refused with the storage refusal after BacklogConfig.Hold. It reports
// whether m was held; false (another refusal, another policy, no
// quotas): the caller refuses m with err. Called on the publish path
// only (never blocks).
func (t *topic) storageHold(m message, err error) bool {
	var ref *quota.Refusal
	if t.s.cfg.Quotas == nil || !errors.As(err, &ref) || ref.Kind != quota.Storage || !t.holdsStorage() {
		return false
	}
	tenant, size := t.name.Tenant, float64(len(m.subject)+len(m.hdr)+len(m.data))
	check := func() error { return t.s.cfg.Quotas.Check(tenant, quota.Storage, size) }
	b := &t.backlog
	b.mu.Lock()
	if !m.released && len(b.q) >= t.s.cfg.Backlog.HoldMax {
		b.mu.Unlock()
		return false
	}
	if m.released && b.releasing != nil {
		// drainHeld is releasing it and it was refused again: back to the
		// head of the line with its first deadline (refused once past it),
		// looked at again after a check interval.
		since := b.releasing.since
		if !t.s.cfg.Now().Before(since.Add(t.s.cfg.Backlog.Hold)) {
			b.mu.Unlock()
			return false
		}
		t.holdLocked(m, check, since, true)
		b.q[0].notBefore = t.s.cfg.Now().Add(t.s.cfg.Backlog.Check)
	} else {
		t.holdLocked(m.owned(), check, time.Time{}, false)
	}
	b.mu.Unlock()
	b.wake()
	return true
}

// holdsStorage reports whether the namespace's policy holds publishes
// the storage quota refuses.
func (t *topic) holdsStorage() bool {
	ns, _ := t.s.namespace(t.name.Tenant, t.name.Namespace)
	return ns.BacklogQuota != nil && ns.BacklogQuota.Policy == tenancy.BacklogHold
}

// holdRecorder is a quota gate that counts holds (the Agent of
// tenancy/quota/quotanet, for the strata.quota.holds metric).
type holdRecorder interface {
	RecordHold(tenant string, k quota.Kind)
}

// holdLocked queues m (b.mu held): at the tail, or at the head (front)
// keeping since; it starts drainHeld when it is not running.
func (t *topic) holdLocked(m message, storage func() error, since time.Time, front bool) {
	b := &t.backlog
	if since.IsZero() {
		since = t.s.cfg.Now()
	}
	m.released = false
	h := heldPub{m: m, since: since, until: since.Add(t.s.cfg.Backlog.Hold), storage: storage}
	if front {
		b.q = append([]heldPub{h}, b.q...)
	} else {
		b.q = append(b.q, h)
		if r, ok := t.s.cfg.Quotas.(holdRecorder); ok && storage != nil {
			r.RecordHold(t.name.Tenant, quota.Storage) // the tenant's holds metric
		}
	}
	b.busy.Add(1)
	if b.kick == nil {
		b.kick = make(chan struct{}, 1)
	}
	if !b.draining {
		b.draining = true
		t.s.goRun(t.drainHeld)
	}
}

// holdFull is the refusal of a publish beyond BacklogConfig.HoldMax.
func (t *topic) holdFull(ex *backlogExceeded) error {
	n := t.s.cfg.Backlog.HoldMax
	if ex == nil { // held for the storage quota only
		return fmt.Errorf("tenant %q namespace %q topic %q: %d publishes held already (backlog_quota policy %s)",
			t.name.Tenant, t.name.Namespace, t.name.Topic, n, tenancy.BacklogHold)
	}
	c := *ex
	c.full = n
	return &c
}

// refuseHeld answers a refused publish with 10429 (none without a
// reply: it is dropped).
func (t *topic) refuseHeld(m message, err error) {
	if m.reply == "" {
		return
	}
	t.s.respond(m.reply, pubAckError(t.stream().stream, jsapi.ErrQuotaExceeded(err)))
}

// holdVerdict says what to do with held publish h now: err nil:
// release it; keep: go on holding (until its deadline); otherwise
// refuse it with err.
func (t *topic) holdVerdict(h *heldPub) (keep bool, err error) {
	if ex := t.backlog.over.Load(); ex != nil {
		return ex.policy == tenancy.BacklogHold, ex
	}
	if h.storage != nil {
		if err := h.storage(); err != nil {
			return t.holdsStorage(), err
		}
	}
	return false, nil
}

// expired is h's refusal at the end of its hold.
func (t *topic) expired(h *heldPub, err error) error {
	d := t.s.cfg.Backlog.Hold
	var ex *backlogExceeded
	if errors.As(err, &ex) {
		c := *ex
		c.held = d
		return &c
	}
	return fmt.Errorf("%w (held %s under namespace %s/%s's backlog_quota policy %s, then refused)",
		err, d, t.name.Tenant, t.name.Namespace, tenancy.BacklogHold)
}

// drainHeld releases, refuses or re-routes the held publishes, oldest
// first, until none is left: released when holdVerdict allows (through
// publish again, so every check a publish gets applies), refused when it
// says so or at their deadline; when the topic stops serving here, the
// held publishes go to its next owner as if just published.
func (t *topic) drainHeld() {
	b := &t.backlog
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := t.s.cfg.Now()
		b.mu.Lock()
		kick := b.kick
		for len(b.q) > 0 {
			select {
			case <-t.done:
				b.mu.Unlock()
				t.rerouteHeld()
				return
			default:
			}
			h := b.q[0]
			if now.Before(h.notBefore) {
				break // refused again on its release a moment ago
			}
			keep, err := t.holdVerdict(&h)
			if err != nil && keep && now.Before(h.until) {
				break
			}
			b.q[0] = heldPub{}
			b.q = b.q[1:]
			if err != nil { // refused now or at its deadline
				b.busy.Add(-1)
				b.mu.Unlock()
				if keep {
					err = t.expired(&h, err)
				}
				t.refuseHeld(h.m, err)
				b.mu.Lock()
				continue
			}
			b.releasing = &h // busy still counts it
			b.mu.Unlock()
			m := h.m
			m.released = true
			t.publish(m)
			b.mu.Lock()
			b.releasing = nil
			b.busy.Add(-1)
		}
		if len(b.q) == 0 {
			b.q = nil
			b.draining = false
			b.mu.Unlock()
			return
		}
		wait := min(b.q[0].until.Sub(now), t.s.cfg.Backlog.Check)
		b.mu.Unlock()
		timer.Reset(max(wait, time.Millisecond))
		select {
		case <-t.done:
			t.rerouteHeld()
			return
		case <-kick:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// rerouteHeld hands every held publish to the topic's next owner (this
// topic stopped serving here), in order, as a forwarded publish is.
func (t *topic) rerouteHeld() {
	b := &t.backlog
	b.mu.Lock()
	q := b.q
	b.q, b.draining = nil, false
	b.busy.Add(-int64(len(q)))
	b.mu.Unlock()
	for _, h := range q {
		m := h.m
		t.s.toOwner(t.name, m, func(nt *topic) { nt.publish(m) })
	}
}
