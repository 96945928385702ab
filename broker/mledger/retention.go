package mledger

import "time"

// retainFrom is the first sequence the limits keep at now: MaxMsgs
// (exact), MaxBytes (per-ledger estimate: whole ledgers exact, the
// partial one by known sizes or its average) unless DiscardNew, and
// MaxAge (whole ledgers by their last time; within a ledger only known
// messages, so an unknown message may outlive MaxAge until its ledger's
// last message expires). It never goes past conf.seq+1.
func (c *core) retainFrom(now time.Time, info msgInfo) uint64 {
	f := c.first
	last := c.conf.seq
	if f > last {
		return f
	}
	if !c.lim.DiscardNew {
		if m := c.lim.MaxMsgs; m > 0 && last+1-f > uint64(m) {
			f = last + 1 - uint64(m)
		}
		if c.lim.MaxBytes > 0 {
			f = max(f, c.bytesFrom(f, c.lim.MaxBytes, info))
		}
	}
	if c.lim.MaxAge > 0 {
		f = max(f, c.ageFrom(f, now.Add(-c.lim.MaxAge), info))
	}
	return min(f, last+1)
}

// estimate is the estimated bytes of confirmed messages lo..hi.
func (c *core) estimate(lo, hi uint64, info msgInfo) int64 {
	var d int64
	for _, l := range c.ledgers {
		if l.Msgs == 0 {
			continue
		}
		a, b := max(lo, l.FirstSeq), min(hi, l.last())
		switch {
		case a > b:
		case a == l.FirstSeq && b == l.last():
			d += l.Bytes
		default:
			d += bytesOf(l, a, b, info)
		}
	}
	return d
}

// bytesFrom is the lowest sequence ≥ f from which the live bytes are at
// most limit.
func (c *core) bytesFrom(f uint64, limit int64, info msgInfo) uint64 {
	total := c.live
	if f > c.first {
		total -= c.estimate(c.first, f-1, info)
	}
	for _, l := range c.ledgers {
		if total <= limit {
			break
		}
		if l.Msgs == 0 || l.last() < f {
			continue
		}
		lo := max(f, l.FirstSeq)
		lb := bytesOf(l, lo, l.last(), info)
		if lo == l.FirstSeq {
			lb = l.Bytes
		}
		if total-lb > limit {
			total -= lb
			f = l.last() + 1
			continue
		}
		s := lo
		for s <= l.last() && total > limit {
			if s < info.From() {
				avg := max(l.avg(), 1)
				n := uint64((total - limit + avg - 1) / avg)
				n = min(n, min(info.From(), l.last()+1)-s)
				total -= int64(n) * avg
				s += n
				continue
			}
			size, _ := info.Info(s)
			total -= size
			s++
		}
		f = s
		break
	}
	return f
}

// ageFrom is the lowest sequence ≥ f whose message is known or assumed
// to be newer than cutoff.
func (c *core) ageFrom(f uint64, cutoff time.Time, info msgInfo) uint64 {
	for _, l := range c.ledgers {
		if l.Msgs == 0 || l.last() < f {
			continue
		}
		if !l.LastTime.After(cutoff) {
			f = l.last() + 1
			continue
		}
		s := max(f, l.FirstSeq)
		for s <= l.last() && s >= info.From() {
			if _, t := info.Info(s); t.After(cutoff) {
				break
			}
			s++
		}
		return s
	}
	return f
}
