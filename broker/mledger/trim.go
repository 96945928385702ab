package mledger

import (
	"fmt"
	"time"
)

// Trimming raises first (purge, retention, TrimTo). It is immediate for
// sequences and counts; bytes below first are accounted per ledger
// (exact when the whole ledger is below first, otherwise exact for known
// messages and the ledger's average size for the others); subject counts
// follow lazily (forget*), since a trimmed message's subject may have to
// be read back; ledgers whose messages are all trimmed and forgotten are
// then removed (removeDone).

// trim raises first to to (at most conf.seq+1) and reports whether it
// moved.
func (c *core) trim(to uint64, info msgInfo) bool {
	to = min(to, c.conf.seq+1)
	if to <= c.first {
		return false
	}
	for _, l := range c.ledgers {
		if l.Msgs == 0 {
			continue
		}
		lo, hi := max(c.first, l.FirstSeq), min(to-1, l.last())
		if lo > hi {
			continue
		}
		var d int64
		if hi == l.last() {
			d = l.Bytes - l.trimmed
		} else {
			d = min(bytesOf(l, lo, hi, info), l.Bytes-l.trimmed)
		}
		l.trimmed += d
		c.live -= d
	}
	c.first = to
	c.firstTime = time.Time{}
	if to <= c.conf.seq && to >= info.From() {
		_, c.firstTime = info.Info(to)
	}
	return true
}

// bytesOf estimates the bytes of l's messages lo..hi: exact for known
// ones, l's average size for the others.
func bytesOf(l *ledgerState, lo, hi uint64, info msgInfo) int64 {
	if lo > hi {
		return 0
	}
	var d int64
	from := max(lo, info.From())
	if from > lo {
		d += int64(min(from, hi+1)-lo) * l.avg()
	}
	for s := from; s <= hi; s++ {
		n, _ := info.Info(s)
		d += n
	}
	return d
}

// forgetKind says how counted moves toward first next.
type forgetKind int

const (
	forgetNone   forgetKind = iota // counted == first
	forgetAll                      // every confirmed message is trimmed
	forgetLedger                   // a whole ledger with a known breakdown
	forgetMsg                      // one message, whose subject the driver supplies
)

// nextForget says what forget step comes next: for forgetLedger the
// ledger, for forgetMsg the sequence (counted) and its ledger.
func (c *core) nextForget() (forgetKind, uint64, *ledgerState) {
	if c.counted >= c.first {
		return forgetNone, 0, nil
	}
	if c.first > c.conf.seq {
		return forgetAll, 0, nil
	}
	l := c.ledgerFor(c.counted)
	if l == nil {
		// Not held by any ledger (can only be a sequence no ledger
		// has: nothing to subtract). Skip to the next ledger.
		next := c.first
		for _, x := range c.ledgers {
			if x.Msgs > 0 && x.FirstSeq > c.counted {
				next = min(next, x.FirstSeq)
				break
			}
		}
		c.counted = next
		return c.nextForget()
	}
	if l.subjects != nil && l.last() < c.first {
		return forgetLedger, 0, l
	}
	return forgetMsg, c.counted, l
}

// forgetAllConfirmed subtracts every confirmed message from the subject
// counts (they are all trimmed).
func (c *core) forgetAllConfirmed() {
	c.subjects.forgetConfirmed()
	for _, l := range c.ledgers {
		if l.subjects != nil {
			l.subjects = map[string]uint64{}
		}
	}
	c.counted = c.first
}

// forgetWholeLedger subtracts the rest of l (wholly below first) by its
// breakdown.
func (c *core) forgetWholeLedger(l *ledgerState) {
	for subj, n := range l.subjects {
		c.subjects.forget(subj, n)
	}
	l.subjects = map[string]uint64{}
	c.counted = l.last() + 1
}

// forgetMsg subtracts message seq (which must be counted) of subject.
func (c *core) forgetMsg(seq uint64, subject string) error {
	if seq != c.counted || seq >= c.first {
		return fmt.Errorf("mledger: forget %d: counted is %d, first %d", seq, c.counted, c.first)
	}
	c.subjects.forget(subject, 1)
	if l := c.ledgerFor(seq); l != nil && l.subjects != nil {
		if l.subjects[subject] <= 1 {
			delete(l.subjects, subject)
		} else {
			l.subjects[subject]--
		}
	}
	c.counted++
	return nil
}

// removeDone takes out of the list the closed ledgers that are empty or
// wholly trimmed and forgotten, and returns their ids (to delete).
func (c *core) removeDone() []int64 {
	var gone []int64
	keep := c.ledgers[:0]
	for _, l := range c.ledgers {
		if l.State == LedgerClosed && (l.Msgs == 0 || l.last() < c.counted) {
			gone = append(gone, l.ID)
			if l.Offload != nil {
				c.tierTrash = append(c.tierTrash, l.Offload.Base)
			}
			c.live -= l.Bytes - l.trimmed
			continue
		}
		keep = append(keep, l)
	}
	for i := len(keep); i < len(c.ledgers); i++ {
		c.ledgers[i] = nil
	}
	c.ledgers = keep
	return gone
}
