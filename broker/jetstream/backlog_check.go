package jetstream

import (
	"context"
	"errors"
	"time"

	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/tenancy"
)

// backlogLoop measures the topic's subscriptions against its
// namespace's backlog quota every BacklogConfig.Check while the topic is
// served here (backlog.go): it sets the verdict publishes read, evicts
// under consumer_backlog_eviction, and wakes the held publishes when
// the verdict changes. While the namespace has no backlog quota it only
// looks for one, every backlogIdle.
func (t *topic) backlogLoop() {
	check := t.s.cfg.Backlog.Check
	timer := time.NewTimer(check)
	defer timer.Stop()
	subs := map[*runner]*subCursor{}
	for {
		select {
		case <-t.done:
			return
		case <-timer.C:
		}
		ns, _ := t.s.namespace(t.name.Tenant, t.name.Namespace)
		q := ns.BacklogQuota
		if q == nil || (q.Size <= 0 && q.Age <= 0) {
			clear(subs)
			t.setBacklogVerdict(nil)
			timer.Reset(max(check, backlogIdle))
			continue
		}
		t.setBacklogVerdict(t.checkBacklog(q, subs))
		t.backlog.checks.Add(1)
		timer.Reset(check)
	}
}

// backlogIdle is how soon a topic whose namespace has no backlog quota
// notices one set at run time.
const backlogIdle = time.Second

// subCursor is what backlogLoop keeps of one subscription between
// rounds.
type subCursor struct {
	// replay is the rewind rule's replay point (backlog.go): the last
	// sequence published before the consumer was created; known once
	// read.
	replay      uint64
	replayKnown bool
	// oldestSeq, oldestTime: the publish time of the last first counted
	// message read (read again only when it moves).
	oldestSeq  uint64
	oldestTime time.Time
	// last is the last verdict on it, kept when a round cannot measure
	// it.
	last *backlogExceeded
}

// checkBacklog is one round: each subscription measured and judged
// alone; under eviction the ones over are trimmed back, otherwise the
// first over (by name) is the topic's verdict (nil: none over).
func (t *topic) checkBacklog(q *BacklogQuota, subs map[*runner]*subCursor) *backlogExceeded {
	ctx, cancel := context.WithTimeout(t.s.ctx, max(t.s.cfg.Backlog.Check, time.Second))
	defer cancel()
	runners := t.runners()
	live := make(map[*runner]bool, len(runners))
	var verdict *backlogExceeded
	for _, r := range runners {
		live[r] = true
		sc := subs[r]
		if sc == nil {
			sc = &subCursor{}
			subs[r] = sc
		}
		now := t.s.cfg.Now()
		sb, err := t.measure(ctx, r, q, sc)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, errRunnerStopped) {
				t.s.cfg.Logger.Debug("backlog quota: measuring a subscription failed", "topic", t.name.String(), "consumer", r.name, "err", err)
			}
			if verdict == nil && sc.last != nil && blocksProducers(q.Policy) {
				verdict = sc.last // not measured: as last seen
			}
			continue
		}
		ex := overQuota(q, t.name, sb, now)
		sc.last = ex
		if ex == nil {
			continue
		}
		if q.Policy == tenancy.BacklogEvictOld {
			t.evict(ctx, r, q, sb, now)
			sc.last = nil
			continue
		}
		if verdict == nil && blocksProducers(q.Policy) {
			verdict = ex
		}
	}
	for r := range subs {
		if !live[r] {
			delete(subs, r)
		}
	}
	return verdict
}

// measure reads subscription r's backlog (backlog.go: from its first
// counted sequence).
func (t *topic) measure(ctx context.Context, r *runner, q *BacklogQuota, sc *subCursor) (subBacklog, error) {
	sb := subBacklog{name: r.name}
	if !sc.replayKnown {
		var created time.Time
		if err := r.call(ctx, func(time.Time) { created = r.c.Created() }); err != nil {
			return sb, err
		}
		first, err := t.ml.SeqAtTime(ctx, created)
		if err != nil {
			return sb, err
		}
		sc.replay, sc.replayKnown = first-1, true
	}
	var from uint64
	if err := r.call(ctx, func(time.Time) { from = r.c.NextUnacked(max(r.c.MarkDelete(), sc.replay)) }); err != nil {
		return sb, err
	}
	st := t.ml.State()
	sb.from, sb.last = max(from, st.FirstSeq), st.LastSeq
	if from == 0 || sb.from > sb.last {
		sb.from = sb.last + 1
		return sb, nil
	}
	sb.bytes = t.ml.BytesFrom(sb.from)
	if q.Age > 0 {
		if sc.oldestSeq != sb.from {
			msg, err := t.ml.Read(ctx, sb.from)
			if errors.Is(err, mledger.ErrGone) { // trimmed meanwhile: the next round sees the new first
				sb.from = sb.last + 1
				return sb, nil
			}
			if err != nil {
				return sb, err
			}
			sc.oldestSeq, sc.oldestTime = sb.from, msg.Time
		}
		sb.oldest = sc.oldestTime
	}
	return sb, nil
}

// evict acknowledges subscription r's oldest counted messages for it
// until it is within q (consumer_backlog_eviction); its runner persists
// the cursor as after any ack.
func (t *topic) evict(ctx context.Context, r *runner, q *BacklogQuota, sb subBacklog, now time.Time) {
	var newer uint64
	if q.Age > 0 && !sb.oldest.IsZero() && now.Sub(sb.oldest) > q.Age {
		seq, err := t.ml.SeqAtTime(ctx, now.Add(-q.Age))
		if err != nil {
			t.s.cfg.Logger.Warn("backlog quota: finding the messages to evict failed", "topic", t.name.String(), "consumer", r.name, "err", err)
			return
		}
		newer = seq
	}
	through := evictThrough(q, sb, t.ml.BytesFrom, newer)
	if through < sb.from {
		return
	}
	var n int
	if err := r.call(ctx, func(time.Time) { n = r.c.AckRange(sb.from, through) }); err != nil {
		return
	}
	if n > 0 {
		t.s.cfg.Logger.Info("backlog quota: acknowledged a subscription's oldest messages for it (consumer_backlog_eviction)",
			"topic", t.name.String(), "consumer", r.name, "first", sb.from, "last", through, "acked", n,
			"size_limit", q.Size, "age_limit", q.Age)
	}
}

// setBacklogVerdict publishes a round's verdict to the publish path,
// logs a change of state and wakes the held publishes.
func (t *topic) setBacklogVerdict(v *backlogExceeded) {
	old := t.backlog.over.Swap(v)
	switch {
	case old == nil && v != nil:
		t.s.cfg.Logger.Info("backlog quota exceeded: producers "+map[bool]string{true: "held", false: "refused"}[v.policy == tenancy.BacklogHold],
			"topic", t.name.String(), "consumer", v.subscription, "err", v.Error())
	case old != nil && v == nil:
		t.s.cfg.Logger.Info("backlog quota: every subscription within it again", "topic", t.name.String())
	}
	if old != v {
		t.backlog.wake()
	}
}
