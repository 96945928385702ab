package core

import (
	"fmt"
	"slices"
)

// Ensemble changes (BookKeeper's LedgerHandle.handleBookieFailure and the
// metadata update that follows; ARCHITECTURE §2 "Ensemble change"):
//
//  1. A bookie failure (Failed) begins a change. Its new segment starts at
//     first = LAC+1, fixed now: the first unconfirmed entry. From now until
//     the change commits, no ack counts (acks of every pending entry are
//     dropped: each is re-sent and must be acked again, even by bookies
//     that stay) and nothing is sent (entries added meanwhile wait), so the
//     LAC stays at first-1.
//  2. The driver chooses a replacement for each failed bookie (Replace).
//     Further failures meanwhile are folded in: the change waits for their
//     replacements too.
//  3. With every replacement chosen, Ready carries the MetadataUpdate: the
//     committed metadata with the new segment (first, ensemble with the
//     failed bookies replaced) appended — or, when the last segment itself
//     starts at first (nothing of it was ever confirmed), with that
//     segment's ensemble replaced, as BookKeeper's first-entry-keyed
//     ensembles map does. The driver CASes it requiring OPEN at Version.
//  4. MetadataCommitted: the epoch moves on and every entry from first is
//     sent to its write set in the new ensemble. Failures that arrived
//     while the CAS was in flight start the next change at once, with the
//     same first (so it rewrites the segment just added).
//     MetadataConflict: IN_RECOVERY or CLOSED ends the writer
//     (ErrRecovering, ErrLedgerClosed); OPEN with the same record at a
//     newer version is retried at that version; anything else ends it
//     with ErrMetadataConflict.

// bookieFailed begins an ensemble change for b or folds b into the one
// under way.
func (w *Writer) bookieFailed(b BookieID) {
	c := w.change
	if c == nil {
		c = &change{first: w.lac + 1, chosen: map[BookieID]member{}, laterC: map[BookieID]member{}}
		w.change = c
		for i := range w.pending {
			w.pending[i].acks = nil
		}
		w.queued = nil
	}
	if slices.Contains(c.failed, b) || slices.Contains(c.later, b) {
		return
	}
	if c.sent {
		c.later = append(c.later, b)
	} else {
		c.failed = append(c.failed, b)
		c.prop = nil // it must now replace b too
	}
	w.replace = append(w.replace, b)
}

// NeedReplacement lists the failed bookies still without a replacement
// (for a driver whose placement failed and that tries again).
func (w *Writer) NeedReplacement() []BookieID {
	var out []BookieID
	if c := w.change; c != nil {
		for _, b := range c.failed {
			if _, ok := c.chosen[b]; !ok {
				out = append(out, b)
			}
		}
		for _, b := range c.later {
			if _, ok := c.laterC[b]; !ok {
				out = append(out, b)
			}
		}
	}
	return out
}

// Replace sets repl (of instance) as the replacement of the failed bookie
// old. repl must not be in the ensemble the change applies to, nor be the
// replacement of another failed bookie: ErrBadReplacement.
func (w *Writer) Replace(old, repl BookieID, instance string) error {
	if w.err != nil {
		return w.err
	}
	c := w.change
	if c == nil {
		return fmt.Errorf("%w: no ensemble change under way", ErrBadReplacement)
	}
	chosen, ensemble := c.chosen, w.lastSegment().Ensemble
	switch {
	case slices.Contains(c.failed, old) && !c.sent:
	case slices.Contains(c.later, old):
		chosen = c.laterC
		ensemble = c.prop.Segments[len(c.prop.Segments)-1].Ensemble
	default:
		return fmt.Errorf("%w: bookie %s is not awaiting a replacement", ErrBadReplacement, old)
	}
	if _, ok := chosen[old]; ok {
		return fmt.Errorf("%w: bookie %s already has a replacement", ErrBadReplacement, old)
	}
	if repl == "" || slices.Contains(ensemble, repl) || slices.Contains(c.failed, repl) {
		return fmt.Errorf("%w: %q is in the ensemble %v", ErrBadReplacement, repl, ensemble)
	}
	for _, m := range chosen {
		if m.id == repl {
			return fmt.Errorf("%w: %s already replaces another bookie", ErrBadReplacement, repl)
		}
	}
	chosen[old] = member{id: repl, instance: instance}
	w.maybePropose()
	return nil
}

// maybePropose builds the metadata update once every failed bookie of the
// change (not yet in flight) has a replacement.
func (w *Writer) maybePropose() {
	c := w.change
	if c == nil || c.sent || c.prop != nil || len(c.chosen) < len(c.failed) {
		return
	}
	md := w.md.Clone()
	chosen := map[BookieID]member{}
	for _, b := range c.failed {
		chosen[b] = c.chosen[b]
	}
	md.setLastSegment(withReplacements(md.Segments[len(md.Segments)-1], c.first, chosen))
	w.seq++
	c.prop, c.seq = &md, w.seq
}

// MetadataCommitted reports that the update handed out in a Ready was
// stored; version is the record's new etcd revision.
func (w *Writer) MetadataCommitted(version int64) error {
	c := w.change
	if w.err != nil {
		return w.err
	}
	if c == nil || !c.sent {
		return ErrNoProposal
	}
	w.md = c.prop.Clone()
	w.md.Version = version
	w.epoch++
	if len(c.later) > 0 {
		// Nothing was sent under the new ensemble: the next change starts
		// at the same entry and replaces the segment just stored.
		w.change = &change{first: c.first, failed: c.later, chosen: c.laterC, laterC: map[BookieID]member{}}
		w.maybePropose()
		return nil
	}
	w.change = nil
	for id := c.first; id < w.next; id++ {
		w.queueSends(id)
	}
	return nil
}

// MetadataConflict reports that the CAS of the update handed out in a
// Ready failed; current is the record as now stored (with its Version).
func (w *Writer) MetadataConflict(current Metadata) error {
	c := w.change
	if w.err != nil {
		return w.err
	}
	if c == nil || !c.sent {
		return ErrNoProposal
	}
	switch {
	case current.State == StateInRecovery:
		w.end(fmt.Errorf("%w: ensemble change refused at version %d", ErrRecovering, current.Version))
	case current.State == StateClosed:
		w.end(fmt.Errorf("%w: ensemble change refused at version %d", ErrLedgerClosed, current.Version))
	case current.State == StateOpen && w.md.sameRecord(&current):
		// Rewritten without change (by a tool): retry at its version,
		// folding in the failures that arrived meanwhile.
		w.md.Version = current.Version
		c.failed = append(c.failed, c.later...)
		for b, m := range c.laterC {
			c.chosen[b] = m
		}
		c.later, c.laterC, c.prop, c.sent = nil, map[BookieID]member{}, nil, false
		w.maybePropose()
	default:
		w.end(fmt.Errorf("%w: found version %d", ErrMetadataConflict, current.Version))
	}
	return nil
}
