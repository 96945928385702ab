package mledger

import (
	"fmt"
	"slices"

	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/tenancy"
)

// restoreCore rebuilds the core from a topic's metadata as a new owner
// finds it, once every ledger in it is closed (Open recovers the open
// one first): the ledger list and totals, FirstSeq, and the snapshot's
// tips, subject index, dedup window, last local origin sequence and
// origin high-water marks; topic and region name the local origin (with
// tm.Incarnation). The entries after the snapshot (replayFrom on) must
// then be fed through replay. Errors wrap ErrCorrupt.
func restoreCore(tm *TopicMeta, lim Limits, maxEntry int, topic tenancy.Name, region string) (c *core, replayFrom uint64, err error) {
	c = newCore(lim, maxEntry, tm.FirstSeq)
	c.setOrigin(topic, region, tm.Incarnation)
	c.tierTrash = slices.Clone(tm.TierTrash)
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
	t := tip{seq: max(snap.LastSeq, c.first-1), time: snap.LastTime.UTC(), msgID: snap.LastMsgID, origin: snap.LastOriginSeq}
	c.head, c.conf = t, t
	if err := c.restoreOrigins(snap.Origins); err != nil {
		return nil, 0, err
	}
	// Each ledger's last local origin sequence: closed ones have it, a
	// recovered one ending at the snapshot gets the snapshot's, the ones
	// replayed get theirs from replay; none goes below the one before.
	var lastOrigin uint64
	for _, l := range c.ledgers {
		if l.Msgs > 0 && l.last() == snap.LastSeq {
			l.LastOrigin = snap.LastOriginSeq
		}
		l.LastOrigin = max(l.LastOrigin, lastOrigin)
		lastOrigin = l.LastOrigin
	}
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

// restoreOrigins restores the high-water marks of a snapshot (both views).
func (c *core) restoreOrigins(streams []replicator.StreamState) error {
	st := replicator.ReceiverState{Streams: streams}
	for _, ss := range streams {
		if ss.Topic != c.topic {
			return fmt.Errorf("%w: snapshot has a high-water mark of stream %s, not of topic %s", ErrCorrupt, ss.Stream, c.topic)
		}
		c.lost += ss.Lost
	}
	var err error
	if c.recv, err = replicator.NewReceiver(st); err != nil {
		return fmt.Errorf("%w: snapshot origins: %w", ErrCorrupt, err)
	}
	c.recvConf, _ = replicator.NewReceiver(st)
	return nil
}
