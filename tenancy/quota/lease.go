package quota

import "time"

// held is an amount valid until a time (the holder's clock): a lease
// received (usable before until) or a commitment made (reserved before
// until).
type held struct {
	amount float64
	until  time.Time
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
func (l *leases) add(amount float64, until time.Time) {
	if amount <= 0 {
		return
	}
	*l = append(*l, held{amount, until})
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

// through is the largest amount valid through e (until at or after e),
// without pruning.
func (l leases) through(e time.Time) float64 {
	var best float64
	for _, h := range l {
		if !h.until.Before(e) {
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
