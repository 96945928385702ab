package ledger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/stratamesh/strata/bookie"
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

// choose lists the registered bookies and asks Placement for n of them,
// checking its answer.
func (c *Client) choose(ctx context.Context, n int, exclude []string) ([]bookie.Registration, error) {
	lctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	regs, err := bookie.ListRegistrations(lctx, c.cfg.Store)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("ledger: list bookies: %w", err)
	}
	chosen, err := c.cfg.Placement(regs, n, exclude)
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
