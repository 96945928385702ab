package mledger

import "fmt"

// restoreCore rebuilds the core from a topic's metadata as a new owner
// finds it, once every ledger in it is closed (Open recovers the open
// one first): the ledger list and totals, FirstSeq, and the snapshot's
// tips, subject index and dedup window. The entries after the snapshot
// (replayFrom on) must then be fed through replay. Errors wrap
// ErrCorrupt.
func restoreCore(tm *TopicMeta, lim Limits, maxEntry int) (c *core, replayFrom uint64, err error) {
	c = newCore(lim, maxEntry, tm.FirstSeq)
	var end uint64 // last sequence the ledgers hold
	for i, li := range tm.Ledgers {
		if li.State != LedgerClosed || li.Entries < 0 {
			return nil, 0, fmt.Errorf("%w: ledger %d is %s", ErrCorrupt, li.ID, li.State)
		}
		if li.Msgs < li.Entries || (li.Entries == 0) != (li.Msgs == 0) {
			return nil, 0, fmt.Errorf("%w: ledger %d has %d entries and %d messages", ErrCorrupt, li.ID, li.Entries, li.Msgs)
		}
		if i > 0 && li.FirstSeq != end+1 {
			return nil, 0, fmt.Errorf("%w: ledger %d starts at %d, the ledger before it ends at %d", ErrCorrupt, li.ID, li.FirstSeq, end)
		}
		c.ledgers = append(c.ledgers, &ledgerState{LedgerInfo: li})
		c.live += li.Bytes
		end = li.end()
	}
	if len(tm.Ledgers) == 0 {
		end = c.first - 1
	}
	snap := tm.Snapshot
	if snap == nil {
		snap = &Snapshot{LastSeq: c.first - 1}
		if len(tm.Ledgers) > 0 {
			snap.LastSeq = min(c.first, tm.Ledgers[0].FirstSeq) - 1
		}
		snap.SubjectsFrom = snap.LastSeq + 1
	}
	if end < snap.LastSeq && len(tm.Ledgers) > 0 {
		return nil, 0, fmt.Errorf("%w: the ledgers end at %d, the snapshot at %d", ErrCorrupt, end, snap.LastSeq)
	}
	t := tip{seq: max(snap.LastSeq, c.first-1), time: snap.LastTime.UTC(), msgID: snap.LastMsgID}
	c.head, c.conf = t, t
	for k, s := range snap.Subjects {
		c.subjects.m[k] = &subjectState{last: s.Last, count: s.Count, cLast: s.Last, cCount: s.Count}
		c.subjects.numConf++
	}
	c.counted = min(max(snap.SubjectsFrom, 1), c.first)
	if snap.LastSeq+1 < c.first { // never written so; the counts cannot be trusted below first
		c.counted = c.first
	}
	for _, d := range snap.Dedup {
		c.dedup.add(d.ID, d.Seq, d.Time.UTC())
	}
	// Bytes below first: exact for whole ledgers, the average otherwise.
	for _, l := range c.ledgers {
		if l.Msgs == 0 || l.FirstSeq >= c.first {
			continue
		}
		if l.last() < c.first {
			l.trimmed = l.Bytes
		} else {
			l.trimmed = bytesOf(l, l.FirstSeq, c.first-1, noInfo{})
		}
		c.live -= l.trimmed
	}
	// A ledger replayed from its first entry gets a subject breakdown.
	replayFrom = c.conf.seq + 1
	for _, l := range c.ledgers {
		if l.FirstSeq >= replayFrom {
			l.subjects = map[string]uint64{}
		}
	}
	return c, replayFrom, nil
}
