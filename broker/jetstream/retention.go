package jetstream

import (
	"context"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
)

// retainInterval is how often an interest or workqueue topic trims what
// every consumer has acknowledged.
const retainInterval = time.Second

// retainLoop applies interest and workqueue retention (JetStream's model,
// ARCHITECTURE §3): messages every consumer acknowledged are dropped
// (the managed ledger's first sequence rises; whole ledgers below it are
// deleted). With interest retention and no consumer, nothing is kept.
// Limits retention is the managed ledger's own business.
func (t *topic) retainLoop() {
	tick := time.NewTicker(retainInterval)
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return
		case <-tick.C:
		}
		mode := t.stream().config.Retention
		if mode != jsapi.RetentionInterest && mode != jsapi.RetentionWorkQueue {
			continue
		}
		ctx, cancel := context.WithTimeout(t.s.ctx, apiTimeout)
		floor, ok := t.ackFloor(ctx)
		if !ok && mode == jsapi.RetentionInterest {
			floor = t.ml.State().LastSeq
			ok = true
		}
		// Replicator cursors are interest too: nothing is dropped before
		// every other region has it.
		if hold, held := t.replHold(ctx); ok && held {
			floor = min(floor, hold)
		}
		if ok && floor+1 > t.ml.State().FirstSeq {
			if err := t.ml.TrimTo(ctx, floor+1); err != nil {
				t.s.cfg.Logger.Warn("retention trim failed", "topic", t.name.String(), "err", err)
			}
		}
		cancel()
	}
}

// ackFloor is the lowest mark-delete position over the topic's consumers;
// ok is false when it has none.
func (t *topic) ackFloor(ctx context.Context) (floor uint64, ok bool) {
	for _, r := range t.runners() {
		var md uint64
		if err := r.call(ctx, func(time.Time) { md = r.c.MarkDelete() }); err != nil {
			return 0, false
		}
		if !ok || md < floor {
			floor, ok = md, true
		}
	}
	return floor, ok
}

// replHold is the highest topic sequence every replicator cursor of the
// topic has had acknowledged by its remote (the sequence before the
// first local message one of them still has to send); held is false
// when no cursor holds anything back (none, or all caught up).
func (t *topic) replHold(ctx context.Context) (hold uint64, held bool) {
	for _, pos := range t.replPositions() { // running and parked cursors (repl_decom.go)
		if pos >= t.ml.LastOriginSeq() {
			continue
		}
		msg, err := t.ml.ReadLocal(ctx, pos+1)
		if err != nil {
			continue // trimmed already (a gap record will cover it) or unreadable now
		}
		if h := msg.Seq - 1; !held || h < hold {
			hold, held = h, true
		}
	}
	return hold, held
}
