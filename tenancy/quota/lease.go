package quota

import (
	"math"
	"time"
)

// held is an amount valid until a time (the holder's clock): a lease
// received (usable before until) or a commitment made (reserved before
// until).
type held struct {
	amount float64
	until  time.Time
	made   time.Time // when made (the lender's leases: its clock), for clip
}

// leases is a set of leases to or from one peer for one quota; its
// value at t is the largest amount still valid at t.
//
// As a lender's commitments this is conservative: a borrower uses the
// newest lease it received, which may still be an older, larger one when
// a newer message is late, so the lender reserves the largest valid one.
// As a borrower's holdings it is safe for the same reason: every lease
// it holds is reserved by its lender until it expires.
type leases []held

// add records amount valid until until; amounts ≤ 0 are not recorded.
func (l *leases) add(amount float64, until time.Time) { l.addMade(amount, until, time.Time{}) }

// addMade is add for a lease made at made.
func (l *leases) addMade(amount float64, until, made time.Time) {
	if amount <= 0 {
		return
	}
	*l = append(*l, held{amount, until, made})
}

// clip lowers every lease made at or before by (every lease, by zero)
// to at most amount: a release (see Entry.Want).
func (l leases) clip(amount float64, by time.Time) {
	for i := range l {
		if by.IsZero() || !l[i].made.After(by) {
			l[i].amount = math.Min(l[i].amount, amount)
		}
	}
}

// at is the largest amount valid at t (until after t), pruning the
// expired ones.
func (l *leases) at(t time.Time) float64 {
	var best float64
	keep := (*l)[:0]
	for _, h := range *l {
		if !h.until.After(t) {
			continue
		}
		keep = append(keep, h)
		best = max(best, h.amount)
	}
	*l = keep
	return best
}

// validAt is the largest amount valid at t (until after t), without
// pruning.
func (l leases) validAt(t time.Time) float64 {
	var best float64
	for _, h := range l {
		if h.until.After(t) {
			best = max(best, h.amount)
		}
	}
	return best
}

// untils lists the expiry times in (from, to).
func (l leases) untils(from, to time.Time, out []time.Time) []time.Time {
	for _, h := range l {
		if h.until.After(from) && h.until.Before(to) {
			out = append(out, h.until)
		}
	}
	return out
}
