package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/replicator"
)

// Replicator cursors of regions that leave a replication list (issue 26
// item 6; tenancy/decom.go has the decommission's steps):
//
//   - A region removed by a pending decommission is "parked": its sender
//     stops, its persisted position stays and keeps holding back the
//     retained messages it has not sent (retention's replHold), so a
//     cancel resumes it where it was.
//   - A region removed otherwise (a policy change, or a confirmed
//     decommission) is dropped: its persisted position is deleted by
//     dropStaleCursors, in rounds of at most CursorDropConfig.Tries
//     tries backed off from Backoff to BackoffMax; a round that gives up
//     marks the topic's policy state failed (admin topic stats show the
//     error), and the next policy round — itself backed off by the
//     policy state, 2 s doubling to 1 min — tries again. One round runs
//     at a time per topic: no hot loop, nothing that grows.
//   - A position survives a failed deletion harmlessly: it carries the
//     replication epoch of the region in the namespace (replPosition);
//     a region added back gets a new epoch, so its cursor ignores the
//     old position and starts over from the retained messages.

// CursorDropConfig tunes dropStaleCursors.
type CursorDropConfig struct {
	// Tries bounds the deletion attempts of one round (default 6).
	Tries int
	// Backoff is the wait after a round's first failed try, doubling up
	// to BackoffMax (defaults 1 s and 16 s: a round of 6 tries lasts
	// about 31 s).
	Backoff, BackoffMax time.Duration
	// FailFirst is a test hook (STRATA_TEST_HOOKS=decom-fail=N on a
	// node): the first FailFirst deletions of positions fail with
	// errTestHookDrop. Zero in production.
	FailFirst int64
}

// withDefaults fills c's zero fields.
func (c CursorDropConfig) withDefaults() CursorDropConfig {
	if c.Tries <= 0 {
		c.Tries = 6
	}
	if c.Backoff <= 0 {
		c.Backoff = time.Second
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 16 * time.Second
	}
	return c
}

// retryWait is the wait after failed try (0-based) of a round, and
// whether another try follows: Backoff·2^try capped at BackoffMax, none
// after the last of Tries.
func (c CursorDropConfig) retryWait(try int) (time.Duration, bool) {
	c = c.withDefaults()
	if try+1 >= c.Tries {
		return 0, false
	}
	w := c.Backoff
	for i := 0; i < try && w < c.BackoffMax; i++ {
		w *= 2
	}
	return min(w, c.BackoffMax), true
}

// errTestHookDrop is the failure of the decom-fail test hook.
var errTestHookDrop = errors.New("jetstream: test hook decom-fail: cursor position deletion refused")

// replPosition is a replicator cursor's persisted value: the sender's
// state and the replication epoch of its remote when it was written.
type replPosition struct {
	replicator.SenderState
	Epoch string `json:"epoch,omitempty"`
}

// replEpoch is the replication epoch of remote in topic n's namespace
// ("" for a region listed since the namespace was seeded).
func (s *Service) replEpoch(tenant, namespace, remote string) string {
	ns, _ := s.namespace(tenant, namespace)
	return ns.ReplicationEpochs[remote]
}

// parkedOf is the regions whose cursors of the topic's namespace are
// parked by a pending decommission, with the epoch their positions
// carry.
func (t *topic) parkedOf() map[string]string {
	ns, _ := t.s.namespace(t.name.Tenant, t.name.Namespace)
	return ns.Parked
}

// dropState is the last round of dropStaleCursors, for the topic's
// stats: what it could not delete yet.
type dropState struct {
	mu      sync.Mutex
	pending []string // remotes whose positions are still stored
	rounds  int      // rounds that gave up, in a row
	tries   int      // tries of the current round
	err     string   // the last failure
	retryAt time.Time
}

// CursorDropStatus is a topic's replicator cursor positions of regions
// no longer in its replication list that could not be deleted yet.
type CursorDropStatus struct {
	Topic string `json:"topic"`
	// Remotes are the regions whose positions are still stored; their
	// epochs are void, so no cursor will use them.
	Remotes []string `json:"remotes"`
	// Rounds counts rounds that gave up in a row, Tries the tries of the
	// current round (each round at most CursorDropConfig.Tries).
	Rounds    int       `json:"rounds"`
	Tries     int       `json:"tries"`
	LastError string    `json:"last_error"`
	RetryAt   time.Time `json:"retry_at,omitzero"`
}

// ParkedCursor is a replicator cursor a pending decommission parked.
type ParkedCursor struct {
	Topic    string `json:"topic"`
	Remote   string `json:"remote"`
	Position uint64 `json:"position"`
	// LagMsgs is the local messages it has not sent (held back).
	LagMsgs uint64 `json:"lag_msgs"`
}

// CursorDrops lists the owned topics whose stale cursor positions are
// not deleted yet, and the parked cursors, by topic.
func (s *Service) CursorDrops() ([]CursorDropStatus, []ParkedCursor) {
	s.mu.Lock()
	topics := make([]*topic, 0, len(s.topics))
	for _, t := range s.topics {
		topics = append(topics, t)
	}
	s.mu.Unlock()
	drops, parked := []CursorDropStatus{}, []ParkedCursor{}
	for _, t := range topics {
		if !t.isReady() {
			continue
		}
		t.drop.mu.Lock()
		if len(t.drop.pending) > 0 {
			drops = append(drops, CursorDropStatus{Topic: t.name.String(), Remotes: slices.Clone(t.drop.pending),
				Rounds: t.drop.rounds, Tries: t.drop.tries, LastError: t.drop.err, RetryAt: t.drop.retryAt})
		}
		t.drop.mu.Unlock()
		last := t.ml.LastOriginSeq()
		t.mu.Lock()
		for remote, pos := range t.parked {
			parked = append(parked, ParkedCursor{Topic: t.name.String(), Remote: remote, Position: pos, LagMsgs: last - min(pos, last)})
		}
		t.mu.Unlock()
	}
	sort.Slice(drops, func(i, j int) bool { return drops[i].Topic < drops[j].Topic })
	sort.Slice(parked, func(i, j int) bool {
		return parked[i].Topic < parked[j].Topic || parked[i].Topic == parked[j].Topic && parked[i].Remote < parked[j].Remote
	})
	return drops, parked
}

// park keeps remote's cursor position pos for retention (a pending
// decommission stopped the cursor); keeps a position already parked.
func (t *topic) park(remote string, pos uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.parkLocked(remote, pos)
}

// unparkExcept releases the parked positions of remotes not in keep
// (confirmed or cancelled): retention no longer holds messages for them.
func (t *topic) unparkExcept(keep map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for r := range t.parked {
		if !hasKey(keep, r) {
			delete(t.parked, r)
		}
	}
}

// replPositions is every position retention must respect: the running
// senders' and the parked cursors'.
func (t *topic) replPositions() []uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]uint64, 0, len(t.repl)+len(t.parked))
	for _, r := range t.repl {
		out = append(out, r.pos.Load())
	}
	for _, p := range t.parked {
		out = append(out, p)
	}
	return out
}

// deletePosition deletes one persisted position under the topic's
// ownership (or fails by the test hook).
func (t *topic) deletePosition(ctx context.Context, key string) error {
	if h := t.s.dropHook(); h != nil && h.Add(-1) >= 0 {
		return errTestHookDrop
	}
	_, err := t.s.cfg.Store.Txn(ctx, []meta.Cond{t.own.Cond()}, meta.OpDelete(key))
	return err
}

// dropHook is the decom-fail test hook's counter (nil: off).
func (s *Service) dropHook() *atomic.Int64 {
	s.dropHookOnce.Do(func() {
		if n := s.cfg.CursorDrop.FailFirst; n > 0 {
			s.dropFail = &atomic.Int64{}
			s.dropFail.Store(n)
		}
	})
	return s.dropFail
}

// dropStaleCursors runs a round of deleting the persisted positions of
// replicator cursors towards regions no longer in the topic's
// replication list, and of parking (not deleting) those of regions a
// pending decommission removed. See the file comment for the bounds.
//
// One round runs at a time per topic; a round asked for while one runs
// is run after it (once, however many were asked), so a region removed
// meanwhile is not missed. A round first waits for the stopped cursors
// to exit: a stopping cursor writes its last position on its way out,
// and a round that listed or deleted before that write would leave the
// position behind, unseen.
func (t *topic) dropStaleCursors() {
	t.dropAgain.Store(true)
	for t.dropping.CompareAndSwap(false, true) {
		for t.dropAgain.Swap(false) {
			if !t.waitStopped() {
				break
			}
			t.dropRound()
		}
		t.dropping.Store(false)
		if !t.dropAgain.Load() {
			return
		}
	}
	// Another round runs: it sees dropAgain.
}

// waitStopped waits until the stopped cursors have exited and forgets
// them; false when the topic or the service stops first.
func (t *topic) waitStopped() bool {
	t.mu.Lock()
	stopping := slices.Clone(t.stopping)
	t.mu.Unlock()
	for _, r := range stopping {
		select {
		case <-r.exited:
		case <-t.done:
			return false
		case <-t.s.ctx.Done():
			return false
		}
	}
	t.mu.Lock()
	t.stopping = slices.DeleteFunc(t.stopping, func(r *replSender) bool { return slices.Contains(stopping, r) })
	t.mu.Unlock()
	return true
}

// dropRound is one round of dropStaleCursors: at most
// CursorDrop.Tries tries, backed off.
func (t *topic) dropRound() {
	cfg := t.s.cfg.CursorDrop.withDefaults()
	keep, parked := t.s.remotesOf(t.name), t.parkedOf()
	t.unparkExcept(parked)
	dir := replDir(t.name)
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(t.s.ctx, 5*time.Second)
		var pending []string
		kvs, err := t.s.cfg.Store.List(ctx, dir)
		for _, kv := range kvs {
			remote := kv.Key[len(dir):]
			switch {
			case slices.Contains(keep, remote):
				continue
			case hasKey(parked, remote):
				var p replPosition
				if json.Unmarshal(kv.Value, &p) == nil && p.Epoch == parked[remote] {
					t.park(remote, p.Position)
					continue
				} // a void position (another epoch): deleted
			}
			if derr := t.deletePosition(ctx, kv.Key); derr != nil {
				err = derr
				pending = append(pending, remote)
				continue
			}
			t.s.cfg.Logger.Info("replicator cursor removed: region no longer in the replication list",
				"topic", t.name.String(), "cursor", ReplCursorName(remote))
		}
		cancel()
		wait, again := cfg.retryWait(try)
		t.drop.mu.Lock()
		t.drop.pending, t.drop.tries = pending, try+1
		if err == nil {
			t.drop.rounds, t.drop.err, t.drop.retryAt = 0, "", time.Time{}
		} else {
			t.drop.err = err.Error()
			t.drop.retryAt = t.s.cfg.Now().Add(wait)
			if !again {
				t.drop.rounds++
			}
		}
		t.drop.mu.Unlock()
		if err == nil {
			t.staleCursors.Store(false)
			return
		}
		if !again {
			// Given up for this round: the topic's policy state shows it,
			// and the next policy round (backed off) tries again. The
			// positions left are void (another epoch): never reused.
			t.staleCursors.Store(true)
			t.policy.failed(t.s.cfg.Now(), fmt.Errorf("removing the replicator cursor positions of regions no longer in the replication list (%d tries): %w", try+1, err))
			return
		}
		t.s.cfg.Logger.Warn("removing stale replicator cursors failed", "topic", t.name.String(), "retry_in", wait, "err", err)
		select {
		case <-t.done:
			return
		case <-t.s.ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func hasKey[V any](m map[string]V, k string) bool { _, ok := m[k]; return ok }

// newSender makes the sender of remote with the remote's current
// replication epoch.
func (t *topic) newSender(ml *mledger.ML, remote string) *replSender {
	return &replSender{t: t, ml: ml, remote: remote, quit: make(chan struct{}), exited: make(chan struct{}),
		epoch: t.s.replEpoch(t.name.Tenant, t.name.Namespace, remote)}
}

// parkLocked is park with t.mu held.
func (t *topic) parkLocked(remote string, pos uint64) {
	if t.parked == nil {
		t.parked = map[string]uint64{}
	}
	if _, ok := t.parked[remote]; !ok {
		t.parked[remote] = pos
	}
}
