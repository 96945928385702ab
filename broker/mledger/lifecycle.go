package mledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/internal/meta"
)

// Close stops the ML gracefully: publishes are refused (ErrClosed),
// pending ones are confirmed and answered, the open ledger is closed and
// the metadata written (list, FirstSeq, snapshot), so that the next Open
// needs no recovery. If ctx ends first, or a step fails, the ML stops as
// with Drop and the next owner recovers. Idempotent: nil once closed, the
// stop error if it had stopped otherwise.
func (m *ML) Close(ctx context.Context) error {
	err := m.request(ctx, func() error { return m.closeOnLoop(ctx) })
	if err != nil && m.Err() == nil {
		m.stop(fmt.Errorf("%w: %s: close failed: %w", ErrNotOwner, m.name, err))
	}
	<-m.done
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

func (m *ML) closeOnLoop(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(m.ctx, cancel)()
	m.mu.Lock()
	if err := m.refuseErr(); err != nil {
		m.mu.Unlock()
		return err
	}
	m.closing = true
	m.wakeRoomLocked() // blocked Publishes are refused now
	spare := m.spare
	if spare != nil { // deleted after the final write
		m.spare, m.spareSaved = nil, false
		m.trash = append(m.trash, spare.id)
	}
	m.mu.Unlock()
	if spare != nil {
		abort(spare)
	}
	if err := m.finishRollover(false); err != nil { // its entries wait for it
		return err
	}
	m.mu.Lock()
	cur, last := m.cur, m.core.head.seq
	m.mu.Unlock()

	if err := m.waitConfirmed(ctx, last); err != nil { // queued messages sent first
		return err
	}
	md, err := cur.w.Close(ctx)
	if err != nil {
		m.lose(fmt.Errorf("close ledger %d: %w", cur.id, err))
		return m.Err()
	}
	m.mu.Lock()
	entries := md.LastEntryID + 1
	if err := m.core.closeLedger(cur.id, entries, msgBytes(md.Length, entries)); err != nil {
		m.mu.Unlock()
		m.lose(err)
		return err
	}
	if gone := m.core.removeDone(); len(gone) > 0 {
		m.trash = append(m.trash, gone...)
	}
	tm := m.buildMeta()
	m.mu.Unlock()
	if err := m.write(ctx, tm); err != nil {
		return err
	}
	m.deleteTrash(ctx, tm.Trash)
	m.stop(fmt.Errorf("%w: %s", ErrClosed, m.name))
	m.log.Info("managed ledger closed", "last_seq", last)
	return nil
}

// Drop stops the ML now without closing its ledger or writing anything:
// ownership was handed away or lost. Pending publishes fail with
// ErrNotOwner (they may or may not be stored: the next owner recovers
// what reached the bookies). It returns once the ML has stopped.
func (m *ML) Drop() {
	m.stop(fmt.Errorf("%w: %s dropped", ErrNotOwner, m.name))
	<-m.done
}

// DeleteTopic deletes the topic (JetStream stream delete): it stops the
// ML (pending publishes fail with ErrClosed), deletes the metadata key
// (conditioned on ownership) and then every ledger. A crash between the
// two leaves unlisted ledgers (custom property CustomTopic).
func (m *ML) DeleteTopic(ctx context.Context) error {
	err := m.request(ctx, func() error { return m.deleteOnLoop(ctx) })
	if err != nil && m.Err() == nil {
		m.stop(fmt.Errorf("%w: %s: delete failed: %w", ErrNotOwner, m.name, err))
	}
	<-m.done
	return err
}

func (m *ML) deleteOnLoop(ctx context.Context) error {
	m.mu.Lock()
	if err := m.refuseErr(); err != nil {
		m.mu.Unlock()
		return err
	}
	m.closing = true
	m.stopLocked(fmt.Errorf("%w: %s deleted", ErrClosed, m.name))
	ids := slices.Clone(m.trash)
	bases := slices.Clone(m.core.tierTrash)
	for _, l := range m.core.ledgers {
		ids = append(ids, l.ID)
		if l.Offload != nil {
			bases = append(bases, l.Offload.Base)
		}
	}
	var ws []*openLedger
	for _, l := range []*openLedger{m.cur, m.prev, m.spare} {
		if l != nil {
			ws = append(ws, l)
		}
	}
	m.mu.Unlock()
	for _, l := range ws {
		abort(l)
		if !slices.Contains(ids, l.id) {
			ids = append(ids, l.id)
		}
	}
	defer m.cancel()
	if err := m.txn(ctx, meta.OpDelete(m.key)); err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if err := m.cfg.Ledgers.Delete(ctx, id); err != nil && !errors.Is(err, ledger.ErrNoLedger) {
			errs = append(errs, err)
		}
	}
	for _, b := range bases {
		if m.cfg.Tier == nil {
			errs = append(errs, fmt.Errorf("mledger: %s: tier copy %s left in the tier: no tier configured", m.name, b))
			continue
		}
		if err := m.cfg.Tier.Delete(ctx, b); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Purge removes every message (JetStream stream purge): FirstSeq becomes
// LastSeq+1 and the sequence goes on. It rolls the open ledger over and
// deletes the purged ledgers. Messages published meanwhile are either
// purged or kept, each wholly. It returns how many messages it purged.
func (m *ML) Purge(ctx context.Context) (purged uint64, err error) {
	err = m.request(ctx, func() error {
		var err error
		purged, err = m.rollover(true)
		return err
	})
	return purged, err
}

// TrimTo raises FirstSeq to seq (at most LastSeq+1): interest and
// work-queue retention, once every consumer acknowledged below seq. It
// is immediate in memory and persisted lazily (within
// Config.MaintenanceInterval); ledgers wholly below are deleted after
// that. ctx is unused for now.
func (m *ML) TrimTo(ctx context.Context, seq uint64) error {
	m.mu.Lock()
	if err := m.refuseErr(); err != nil {
		m.mu.Unlock()
		return err
	}
	m.trimLocked(seq)
	m.mu.Unlock()
	m.kick()
	return nil
}

// SetLimits applies a stream update: new limits and spec (opaque JSON),
// written at once (conditioned). Retention under the new limits follows
// on the ML's goroutine.
func (m *ML) SetLimits(ctx context.Context, l Limits, spec []byte) error {
	if spec != nil && !json.Valid(spec) {
		return fmt.Errorf("mledger: %s: spec is not valid JSON", m.name)
	}
	return m.request(ctx, func() error {
		if err := m.finishRollover(false); err != nil { // the list first
			return err
		}
		m.mu.Lock()
		if err := m.refuseErr(); err != nil {
			m.mu.Unlock()
			return err
		}
		oldLim, oldSpec := m.core.lim, m.spec
		m.core.setLimits(l)
		m.spec = slices.Clone(spec)
		tm := m.buildMeta()
		m.mu.Unlock()
		if err := m.write(ctx, tm); err != nil {
			m.mu.Lock()
			m.core.setLimits(oldLim)
			m.spec = oldSpec
			m.mu.Unlock()
			return err
		}
		m.kick()
		return nil
	})
}
