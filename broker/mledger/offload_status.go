package mledger

import (
	"context"
	"fmt"
	"time"
)

// OffloadNow requests the offload of closed ledgers until at most keep
// bytes of the topic's data are not offloaded (Pulsar's `topics offload
// --size-threshold`; 0: every closed ledger), whatever the namespace's
// threshold. It returns at once; OffloadStatus reports the progress.
// Errors: no Tier (ErrNoTier), the stop error once stopped.
func (m *ML) OffloadNow(ctx context.Context, keep int64) error {
	if m.cfg.Tier == nil {
		return fmt.Errorf("%w: %s", ErrNoTier, m.name)
	}
	return m.request(ctx, func() error {
		m.mu.Lock()
		if err := m.refuseErr(); err != nil {
			m.mu.Unlock()
			return err
		}
		m.off.keep = max(keep, 0)
		m.off.retryAt = time.Time{} // a request retries at once
		m.mu.Unlock()
		m.maintainOffload(m.cfg.Now())
		return nil
	})
}

// OffloadStatus is a topic's offload state (admin offload-status).
type OffloadStatus struct {
	// Tier: a tier is configured.
	Tier bool `json:"tier"`
	// Policy is the namespace's (nil: offload only on request).
	Threshold   *int64        `json:"threshold_bytes,omitempty"`
	DeletionLag time.Duration `json:"deletion_lag_ns"`
	// Ledgers lists every ledger and where its data is.
	Ledgers []LedgerOffload `json:"ledgers"`
	// OffloadedLedgers, OffloadedBytes: ledgers with a tier copy and the
	// size of their data objects.
	OffloadedLedgers int   `json:"offloaded_ledgers"`
	OffloadedBytes   int64 `json:"offloaded_bytes"`
	// BookieBytes: data of the ledgers still on bookies.
	BookieBytes int64 `json:"bookie_bytes"`
	// Running is the copy in progress (nil: none).
	Running *OffloadRunning `json:"running,omitempty"`
	// Requested: an OffloadNow is not complete yet.
	Requested bool `json:"requested"`
	// LastError of the last failed copy ("" once one succeeds), its time
	// and when the next attempt may start.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	NextRetry   time.Time `json:"next_retry,omitzero"`
	// Completed counts copies recorded by this owner.
	Completed uint64 `json:"completed"`
}

// LedgerOffload is one ledger's place: Where is "open" (being written),
// "bookies", "bookies+tier" (offloaded, bookie copy kept until the
// deletion lag) or "tier".
type LedgerOffload struct {
	ID       int64     `json:"id"`
	FirstSeq uint64    `json:"first_seq"`
	Msgs     int64     `json:"msgs"`
	Bytes    int64     `json:"bytes"`
	Where    string    `json:"where"`
	Object   string    `json:"object,omitempty"`
	TierSize int64     `json:"tier_bytes,omitempty"`
	At       time.Time `json:"offloaded_at,omitzero"`
}

// OffloadRunning is a copy in progress: entries and bytes copied of the
// ledger's Total bytes.
type OffloadRunning struct {
	Ledger  int64 `json:"ledger"`
	Entries int64 `json:"entries"`
	Bytes   int64 `json:"bytes"`
	Total   int64 `json:"total_bytes"`
}

// OffloadStatus reports the topic's offload state.
func (m *ML) OffloadStatus() OffloadStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := OffloadStatus{Tier: m.cfg.Tier != nil, DeletionLag: DefaultOffloadDeletionLag,
		Requested: m.off.keep >= 0, NextRetry: m.off.retryAt, Completed: m.off.done}
	if p := m.offloadPolicy(); p != nil {
		th := p.Threshold
		st.Threshold, st.DeletionLag = &th, p.DeletionLag
	}
	if m.off.lastErr != nil {
		st.LastError, st.LastErrorAt = m.off.lastErr.Error(), m.off.lastErrAt
	}
	if m.off.running {
		st.Running = &OffloadRunning{Ledger: m.off.ledger, Entries: m.off.entries.Load(), Bytes: m.off.bytes.Load(), Total: m.off.total}
	}
	for _, l := range m.core.ledgers {
		lo := LedgerOffload{ID: l.ID, FirstSeq: l.FirstSeq, Msgs: l.Msgs, Bytes: l.Bytes, Where: "bookies"}
		switch {
		case l.State == LedgerOpen:
			lo.Where, lo.Msgs, lo.Bytes = "open", 0, 0
			if m.cur != nil && m.cur.id == l.ID {
				lo.Msgs, lo.Bytes = m.cur.appended, m.cur.bytes
			}
			st.BookieBytes += lo.Bytes
		case l.Offload != nil:
			lo.Object, lo.TierSize, lo.At = l.Offload.Base, l.Offload.Bytes, l.Offload.Time
			lo.Where = "bookies+tier"
			if l.Offload.BookieDeleted {
				lo.Where = "tier"
			} else {
				st.BookieBytes += l.Bytes
			}
			st.OffloadedLedgers++
			st.OffloadedBytes += l.Offload.Bytes
		default:
			st.BookieBytes += l.Bytes
		}
		st.Ledgers = append(st.Ledgers, lo)
	}
	return st
}
