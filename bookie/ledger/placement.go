package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/ledger/core"
)

// DefaultPlacement chooses n bookies at random among the writable (not
// read-only) candidates whose ids are not excluded. Ensembles name the
// chosen bookies by id, in the order returned (random, so that striping
// spreads ledgers differently over the same bookies). It ignores free
// space and racks (a rack- or zone-aware policy can replace it through
// Config.Placement). Fewer than n eligible: ErrNotEnoughBookies, saying
// how many are needed, writable, read-only and excluded.
func DefaultPlacement(candidates []bookie.Registration, n int, exclude []string) ([]bookie.Registration, error) {
	var ok []bookie.Registration
	readOnly, excluded := 0, 0
	for _, r := range candidates {
		switch {
		case slices.Contains(exclude, r.ID):
			excluded++
		case r.ReadOnly:
			readOnly++
		default:
			ok = append(ok, r)
		}
	}
	if len(ok) < n {
		return nil, fmt.Errorf("%w: need %d writable bookies, have %d (%d registered, %d read-only, %d excluded)",
			ErrNotEnoughBookies, n, len(ok), len(candidates), readOnly, excluded)
	}
	rand.Shuffle(len(ok), func(i, j int) { ok[i], ok[j] = ok[j], ok[i] })
	return ok[:n], nil
}

// quarantine remembers the bookie instances that failed an add of one
// of the Client's writers, and when (BookKeeper's bookie quarantine,
// Config.BookieQuarantine): placement leaves each out until period has
// passed since its last failure, even while its registration lives on in
// etcd. Times are passed in, so that it is deterministic. Safe for
// concurrent use.
type quarantine struct {
	period time.Duration
	mu     sync.Mutex
	failed map[connKey]time.Time // (id, instance) → last failure; instance "" stands for any
}

func newQuarantine(period time.Duration) *quarantine {
	return &quarantine{period: period, failed: map[connKey]time.Time{}}
}

// add quarantines bookie id's instance (any instance if "") from at on;
// a later failure restarts its quarantine.
func (q *quarantine) add(id core.BookieID, instance string, at time.Time) {
	k := connKey{string(id), instance}
	q.mu.Lock()
	if prev, ok := q.failed[k]; !ok || at.After(prev) {
		q.failed[k] = at
	}
	q.mu.Unlock()
}

// filter returns the registrations of regs not in quarantine at now, and
// the ids of those that are; it forgets quarantines that have ended.
func (q *quarantine) filter(regs []bookie.Registration, now time.Time) (free []bookie.Registration, held []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, at := range q.failed {
		if !now.Before(at.Add(q.period)) {
			delete(q.failed, k)
		}
	}
	if len(q.failed) == 0 {
		return regs, nil
	}
	free = make([]bookie.Registration, 0, len(regs))
	for _, r := range regs {
		_, anyInstance := q.failed[connKey{r.ID, ""}]
		_, thisInstance := q.failed[connKey{r.ID, r.Instance}]
		if anyInstance || thisInstance {
			held = append(held, r.ID)
		} else {
			free = append(free, r)
		}
	}
	return free, held
}

// choose lists the registered bookies and asks Placement for n of them,
// none in exclude (bookie ids) nor banned (bookie instances; instance ""
// bans every instance of the id), preferring bookies out of the Client's
// quarantine: as many as it can of those, the rest among the quarantined
// (BookKeeper also places quarantined bookies rather than fail). Callers
// put the bookies that must not be placed at all in exclude (those of the
// ensemble) or banned (an instance that just failed the same writer). It
// checks Placement's answer. Errors: ErrNotEnoughBookies (naming the
// quarantined and banned bookies), the registry's and Placement's.
func (c *Client) choose(ctx context.Context, n int, exclude []string, banned []connKey) ([]bookie.Registration, error) {
	lctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	regs, err := bookie.ListRegistrations(lctx, c.cfg.Store)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("ledger: list bookies: %w", err)
	}
	regs, out := withoutBanned(regs, banned)
	free, held := c.quarantine.filter(regs, time.Now())
	chosen, err := c.cfg.Placement(free, n, exclude)
	if err != nil && len(held) > 0 && errors.Is(err, ErrNotEnoughBookies) {
		if mixed, merr := c.placeMixed(regs, free, n, exclude); merr == nil {
			c.log.Info("placing bookies in quarantine: too few others", "quarantined", held, "chosen", regIDs(mixed))
			chosen, err = mixed, nil
		} else {
			err = fmt.Errorf("%w; in quarantine after failing: %v", err, held)
		}
	}
	if err != nil && len(out) > 0 {
		err = fmt.Errorf("%w; not placed back after failing this writer: %v", err, out)
	}
	if err != nil {
		return nil, err
	}
	if len(chosen) != n {
		return nil, fmt.Errorf("ledger: placement returned %d bookies, want %d", len(chosen), n)
	}
	for i, r := range chosen {
		switch {
		case r.ID == "" || r.Instance == "" || r.Address == "":
			return nil, fmt.Errorf("ledger: placement returned an incomplete registration %+v", r)
		case slices.Contains(exclude, r.ID):
			return nil, fmt.Errorf("ledger: placement returned excluded bookie %s", r.ID)
		case slices.ContainsFunc(chosen[:i], func(o bookie.Registration) bool { return o.ID == r.ID }):
			return nil, fmt.Errorf("ledger: placement returned bookie %s twice", r.ID)
		}
	}
	return chosen, nil
}

// placeMixed places n bookies taking as many as it can (m < n) among
// free, then the other n-m among all of regs, the m excluded.
func (c *Client) placeMixed(regs, free []bookie.Registration, n int, exclude []string) ([]bookie.Registration, error) {
	err := fmt.Errorf("%w: need %d", ErrNotEnoughBookies, n)
	for m := min(n-1, len(free)); m >= 0; m-- {
		var part []bookie.Registration
		if m > 0 {
			if part, err = c.cfg.Placement(free, m, exclude); err != nil || len(part) != m {
				continue
			}
		}
		rest, rerr := c.cfg.Placement(regs, n-m, append(slices.Clone(exclude), regIDs(part)...))
		if rerr != nil {
			err = rerr
			continue
		}
		return append(part, rest...), nil
	}
	return nil, err
}

// withoutBanned returns regs less the registrations of banned instances
// (instance "": any instance of the id), and the ids left out.
func withoutBanned(regs []bookie.Registration, banned []connKey) (kept []bookie.Registration, out []string) {
	if len(banned) == 0 {
		return regs, nil
	}
	kept = make([]bookie.Registration, 0, len(regs))
	for _, r := range regs {
		if slices.ContainsFunc(banned, func(k connKey) bool { return k.id == r.ID && (k.instance == "" || k.instance == r.Instance) }) {
			out = append(out, r.ID)
			continue
		}
		kept = append(kept, r)
	}
	return kept, out
}

func regIDs(rs []bookie.Registration) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}
