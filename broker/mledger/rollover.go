package mledger

import (
	"context"
	"fmt"
	"time"

	"github.com/stratamesh/strata/bookie/ledger"
)

// Rollover, without stopping publishes:
//
//  1. a spare ledger is created ahead and recorded as TopicMeta.Spare;
//  2. switch: when the open ledger reaches a rollover limit, Publish (or
//     the loop, if no recorded spare is ready) makes the spare the open
//     ledger from the next sequence S on;
//  3. the loop creates the next spare, waits until every message below S
//     is confirmed and answered (the batching policy sends the old
//     ledger's queued messages first: an entry never spans ledgers), and
//     closes the old ledger;
//  4. it writes the list (old closed, new open), a fresh snapshot and the
//     next spare in one conditioned Txn.
//
// Messages of a recorded spare are acknowledged at once: a next owner
// chains the spare after the list when its first message holds the
// sequence that follows the list's last ledger (recoverOpen). Since
// answers go out in sequence order, none of the spare's messages was
// acknowledged otherwise. Messages of a ledger switched to without being
// recorded (no spare was ready, or a purge) are acknowledged only after
// step 4.
//
// Only one rollover is in progress at a time (prev != nil between 2 and
// 4); the open ledger may overshoot its limit meanwhile.

// createLedger creates a ledger for the topic and returns it, unswitched.
func (m *ML) createLedger(ctx context.Context) (*openLedger, error) {
	w, err := m.cfg.Ledgers.Create(ctx, ledger.CreateOptions{
		Ensemble: m.cfg.Ensemble, WriteQuorum: m.cfg.WriteQuorum, AckQuorum: m.cfg.AckQuorum,
		Password: ledgerPassword, Custom: map[string]string{CustomTopic: m.name.String()},
	})
	if err != nil {
		return nil, fmt.Errorf("mledger: %s: create ledger: %w", m.name, err)
	}
	return &openLedger{w: w, id: w.ID()}, nil
}

// discard stops l's writer and deletes its ledger: one that never
// entered the list or the metadata.
func (m *ML) discard(l *openLedger) {
	abort(l)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.cfg.Ledgers.Delete(ctx, l.id); err != nil {
		m.log.Warn("delete unused ledger failed", "ledger", l.id, "err", err)
	}
}

// abort stops l's writer without closing its ledger.
func abort(l *openLedger) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l.w.Close(ctx)
}

// rolloverDue reports whether the open ledger reached a rollover limit
// (mu held).
func (m *ML) rolloverDue(now time.Time) bool {
	led := m.cur
	if led.appended == 0 {
		return false
	}
	l := m.core.lim
	maxBytes := int64(m.cfg.CacheBytes / 2)
	if l.RolloverBytes > 0 {
		maxBytes = min(maxBytes, l.RolloverBytes)
	}
	return (l.RolloverEntries > 0 && led.appended >= l.RolloverEntries) ||
		led.bytes >= maxBytes ||
		(l.RolloverAge > 0 && now.Sub(led.created) >= l.RolloverAge)
}

// switchLocked makes the spare the open ledger from the next sequence on
// (mu held; no rollover in progress, a spare ready); messages queued for
// the old ledger still go to it. The new ledger's messages are
// acknowledged at once if it is recorded as the spare, unless gate.
func (m *ML) switchLocked(now time.Time, gate bool) {
	nl := m.spare
	nl.recorded = m.spareSaved && !gate
	m.spare, m.spareSaved = nil, false
	nl.firstSeq, nl.created = m.core.head.seq+1, now
	m.core.addLedger(nl.id, nl.firstSeq)
	m.prev, m.cur = m.cur, nl
}

// ensureSpare creates a spare if there is none (on the loop). A failure
// is retried a second later; appends go on in the open ledger meanwhile.
func (m *ML) ensureSpare() error {
	m.mu.Lock()
	have := m.spare != nil
	m.mu.Unlock()
	if have {
		return nil
	}
	sp, err := m.createLedger(m.ctx)
	if err != nil {
		m.mu.Lock()
		m.rollErr = m.cfg.Now().Add(time.Second)
		m.mu.Unlock()
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refuseErr(); err != nil {
		m.mu.Unlock()
		m.discard(sp)
		m.mu.Lock()
		return err
	}
	m.spare = sp
	return nil
}

// rollover switches to a spare now (creating one if needed) and finishes
// (on the loop); without purge, only if the open ledger is still due
// (Publish may have switched meanwhile). With purge, FirstSeq becomes
// the switch point and it returns how many messages were purged.
func (m *ML) rollover(purge bool) (uint64, error) {
	for {
		if err := m.finishRollover(false); err != nil { // one in progress
			return 0, err
		}
		if err := m.ensureSpare(); err != nil {
			return 0, err
		}
		m.mu.Lock()
		now := m.cfg.Now()
		err := m.refuseErr()
		retry := err == nil && (m.prev != nil || m.spare == nil) // a Publish switched
		done := err == nil && !retry && !purge && !m.rolloverDue(now)
		if err == nil && !retry && !done {
			m.switchLocked(now, purge) // a purge is exact at the switch
		}
		m.mu.Unlock()
		switch {
		case err != nil:
			return 0, err
		case done:
			return 0, nil
		case !retry:
			return m.finishRolloverPurging(purge)
		}
	}
}

// finishRollover completes a switch made by Publish or rollover (steps
// 3 and 4); nothing if none is in progress. With purge (the new ledger's
// entries held back, so that every confirmed message is below the switch
// point), FirstSeq becomes the switch point.
func (m *ML) finishRollover(purge bool) error {
	_, err := m.finishRolloverPurging(purge)
	return err
}

func (m *ML) finishRolloverPurging(purge bool) (uint64, error) {
	m.mu.Lock()
	old, nl, closing := m.prev, m.cur, m.closing
	m.mu.Unlock()
	if old == nil {
		return 0, nil
	}
	if !closing { // (Close writes the last list, without a spare)
		if err := m.ensureSpare(); err != nil && m.ctx.Err() == nil {
			m.log.Warn("creating a spare ledger failed; the next rollover creates one", "err", err)
		}
	}
	s := nl.firstSeq
	if err := m.waitConfirmed(m.ctx, s-1); err != nil {
		return 0, err
	}
	md, err := old.w.Close(m.ctx)
	if err != nil {
		m.lose(fmt.Errorf("close ledger %d: %w", old.id, err))
		return 0, m.Err()
	}
	m.mu.Lock()
	entries := md.LastEntryID + 1
	if err := m.core.closeLedger(old.id, entries, msgBytes(md.Length, entries)); err != nil {
		m.mu.Unlock()
		m.lose(err)
		return 0, err
	}
	var purged uint64
	if purge {
		purged = m.core.msgs()
		m.trimLocked(s)
		m.core.forgetAllConfirmed()
		m.cache.dropBelow(m.core.counted)
	}
	if gone := m.core.removeDone(); len(gone) > 0 {
		m.trash = append(m.trash, gone...)
	}
	m.cache.evict(int64(m.cfg.CacheBytes), m.keepFrom())
	tm := m.buildMeta()
	m.dirty = false
	m.mu.Unlock()
	if err := m.writeUntilDone(m.ctx, tm); err != nil {
		m.lose(err) // the new ledger's entries cannot be acknowledged unrecorded
		return 0, m.Err()
	}
	m.mu.Lock()
	nl.recorded = true
	m.prev = nil
	m.mu.Unlock()
	m.wakeCompleter()
	m.log.Debug("ledger rolled over", "closed", old.id, "entries", entries, "next", nl.id, "first_seq", s)
	m.deleteTrash(m.ctx, tm.Trash)
	return purged, nil
}

// waitConfirmed waits until every message up to seq is confirmed and
// answered, the ML stops (its stop error) or ctx ends (ctx's error).
func (m *ML) waitConfirmed(ctx context.Context, seq uint64) error {
	for {
		m.mu.Lock()
		if m.stopErr != nil {
			err := m.stopErr
			m.mu.Unlock()
			return err
		}
		if m.core.conf.seq >= seq {
			m.mu.Unlock()
			return nil
		}
		ch := m.notify
		m.mu.Unlock()
		select {
		case <-ch:
		case <-m.ctx.Done():
		case <-ctx.Done():
			return fmt.Errorf("mledger: %s: waiting for seq %d to be confirmed: %w", m.name, seq, ctx.Err())
		}
	}
}
