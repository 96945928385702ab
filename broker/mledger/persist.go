package mledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/internal/meta"
)

// buildMeta is the topic's record as it stands (mu held).
func (m *ML) buildMeta() TopicMeta {
	return TopicMeta{
		Spec: slices.Clone(m.spec), Created: m.created, Incarnation: m.core.incarnation,
		Region:    m.local.Region,
		FirstSeq:  m.core.first,
		Ledgers:   m.core.ledgerInfos(),
		Snapshot:  m.core.snapshot(m.cfg.Now(), m.cfg.MaxSnapshotDedup),
		Trash:     slices.Clone(m.trash),
		TierTrash: slices.Clone(m.core.tierTrash),
		Spare:     m.spareID(),
	}
}

// spareID is the spare's id, 0 if none (mu held).
func (m *ML) spareID() int64 {
	if m.spare == nil {
		return 0
	}
	return m.spare.id
}

// write puts tm at the topic's key in one Txn conditioned on the
// ownership condition and on the key's revision as this owner last wrote
// it. A failed condition stops the ML (lose) and returns an error
// wrapping ErrNotOwner; other errors (etcd unreachable, ctx) leave it
// running.
func (m *ML) write(ctx context.Context, tm TopicMeta) error {
	b, err := json.Marshal(tm)
	if err != nil {
		return fmt.Errorf("mledger: %s: encode metadata: %w", m.name, err)
	}
	if err := m.txn(ctx, meta.OpPut(m.key, b)); err != nil {
		return err
	}
	m.mu.Lock()
	if tm.Spare != 0 && tm.Spare == m.spareID() {
		m.spareSaved = true
	}
	m.mu.Unlock()
	return nil
}

func (m *ML) txn(ctx context.Context, op meta.Op) error {
	conds := []meta.Cond{m.cfg.Cond, {Key: m.key, ModRevision: m.rev}}
	rev, err := m.cfg.Store.Txn(ctx, conds, op)
	switch {
	case err == nil:
		m.rev = rev
		return nil
	case errors.Is(err, meta.ErrConflict):
		err = fmt.Errorf("%w: %s: %w", ErrNotOwner, m.name, err)
		m.lose(err)
		return err
	case errors.Is(err, meta.ErrClosed):
		err = fmt.Errorf("mledger: %s: %w", m.name, err)
		m.lose(err)
		return err
	default:
		return fmt.Errorf("mledger: %s: write metadata: %w", m.name, err)
	}
}

// writeUntilDone retries write on errors that leave the ML running
// (etcd unreachable), with backoff, until it succeeds, the ML stops or
// ctx ends: for writes that must happen (a rollover's record).
func (m *ML) writeUntilDone(ctx context.Context, tm TopicMeta) error {
	wait := 50 * time.Millisecond
	for {
		err := m.write(ctx, tm)
		if err == nil || ownershipLost(err) || ctx.Err() != nil || m.ctx.Err() != nil {
			if err == nil {
				return nil
			}
			return err
		}
		m.log.Warn("metadata write failed; retrying", "err", err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-m.ctx.Done():
			t.Stop()
			return err
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// persist writes the state if it changed since the last write, then
// deletes the trashed ledgers (on the loop).
func (m *ML) persist() {
	m.mu.Lock()
	if !m.dirty || m.stopErr != nil || m.prev != nil { // a rollover writes first
		m.mu.Unlock()
		return
	}
	tm := m.buildMeta()
	m.dirty = false
	m.mu.Unlock()
	if err := m.write(m.ctx, tm); err != nil {
		m.mu.Lock()
		m.dirty = true
		m.mu.Unlock()
		if m.ctx.Err() == nil {
			m.log.Warn("lazy metadata write failed", "err", err)
		}
		return
	}
	m.deleteTrash(m.ctx, tm.Trash)
	m.deleteTierTrash(m.ctx, tm.TierTrash)
}

// deleteTrash deletes the given trashed ledgers (recorded as such in
// etcd) and forgets those deleted.
func (m *ML) deleteTrash(ctx context.Context, ids []int64) {
	var deleted []int64
	for _, id := range ids {
		err := m.cfg.Ledgers.Delete(ctx, id)
		if err != nil && !errors.Is(err, ledger.ErrNoLedger) {
			m.log.Warn("delete ledger failed; will retry", "ledger", id, "err", err)
			continue
		}
		deleted = append(deleted, id)
		m.rmu.Lock()
		delete(m.readers, id)
		m.rmu.Unlock()
		m.closeTierReaders(id)
		m.index.drop(id)
	}
	if len(deleted) == 0 {
		return
	}
	m.mu.Lock()
	m.trash = slices.DeleteFunc(m.trash, func(id int64) bool { return slices.Contains(deleted, id) })
	m.dirty = true // the smaller trash, with the next lazy write
	m.mu.Unlock()
}
