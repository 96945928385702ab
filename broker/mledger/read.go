package mledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratamesh/strata/bookie/ledger"
)

const (
	// readAheadBytes, readAheadEntries bound what a read that misses the
	// caches reads from the bookies at once: the entry holding the
	// sequence asked for and the following ones of the same ledger, all
	// decoded into the read-ahead cache, so that reading seq, seq+1, …
	// costs one bookie read per readAheadBytes.
	readAheadBytes   = 1 << 20
	readAheadEntries = 64
)

// Read returns the confirmed message seq: from the cache of recent
// messages, the read-ahead cache, or the bookies (readers of closed
// ledgers are kept). The Message's slices must not be modified. Errors:
// ErrGone below FirstSeq, ErrNotFound above the last confirmed sequence,
// the stop error once stopped, the ledger client's (wrapped), ctx's.
func (m *ML) Read(ctx context.Context, seq uint64) (Message, error) {
	m.mu.Lock()
	if err := m.stopErr; err != nil {
		m.mu.Unlock()
		return Message{}, err
	}
	c := m.core
	switch {
	case seq < c.first:
		m.mu.Unlock()
		return Message{}, fmt.Errorf("%w: seq %d, first %d", ErrGone, seq, c.first)
	case seq > c.conf.seq:
		m.mu.Unlock()
		return Message{}, fmt.Errorf("%w: seq %d, last %d", ErrNotFound, seq, c.conf.seq)
	case m.hidden[seq]:
		m.mu.Unlock()
		return Message{}, fmt.Errorf("%w: seq %d removed by a test hook", ErrGone, seq)
	}
	if cm, ok := m.cache.get(seq); ok {
		m.mu.Unlock()
		return cm.m, nil
	}
	if msg, ok := m.backlog.get(seq); ok {
		m.mu.Unlock()
		return msg, nil
	}
	l := c.ledgerFor(seq)
	if l == nil || l.State != LedgerClosed {
		m.mu.Unlock()
		return Message{}, fmt.Errorf("%w: seq %d is in no closed ledger and not cached", ErrCorrupt, seq)
	}
	ref := refOf(l)
	m.mu.Unlock()

	msgs, err := m.readLedger(ctx, ref, seq)
	if err != nil {
		m.mu.Lock()
		gone := seq < m.core.first
		m.mu.Unlock()
		if gone {
			return Message{}, fmt.Errorf("%w: seq %d", ErrGone, seq)
		}
		return Message{}, err
	}
	m.mu.Lock()
	for i := range msgs {
		m.backlog.put(msgs[i], int64(EncodedSize(&msgs[i], m.local)))
	}
	m.mu.Unlock()
	return msgs[0], nil
}

// readLedger reads messages of the closed ledger l from seq on: seq
// itself, then the following ones of the entries read with it (see
// readFrom; about readAheadBytes at once).
func (m *ML) readLedger(ctx context.Context, l ledgerRef, seq uint64) ([]Message, error) {
	fetch := func(ctx context.Context, lo, hi int64) ([][]byte, error) {
		ents, err := m.readEntries(ctx, l.id, lo, hi)
		if err != nil {
			return nil, fmt.Errorf("mledger: %s: read ledger %d: %w", m.name, l.id, err)
		}
		out := make([][]byte, len(ents))
		for i, e := range ents {
			out[i] = e.Payload
		}
		return out, nil
	}
	return readFrom(ctx, m.index, l, m.local, seq, l.chunk(readAheadBytes, readAheadEntries), fetch)
}

// readEntries reads entries lo..hi of closed ledger id: from the bookies
// while its bookie copy exists, else from its tier copy; a bookie read
// that fails for a ledger with a tier copy (its bookie copy deleted
// meanwhile, or unreadable) is read from the tier instead.
func (m *ML) readEntries(ctx context.Context, id, lo, hi int64) ([]ledger.Entry, error) {
	off := m.offloadOf(id)
	if off != nil && off.BookieDeleted {
		return m.readTier(ctx, id, off.Base, lo, hi)
	}
	r, err := m.reader(ctx, id)
	var ents []ledger.Entry
	if err == nil {
		ents, err = r.Read(ctx, lo, hi)
	}
	if err == nil || ctx.Err() != nil {
		return ents, err
	}
	if off = m.offloadOf(id); off == nil {
		return nil, err
	}
	m.log.Debug("bookie read failed; reading the tier copy", "ledger", id, "err", err)
	return m.readTier(ctx, id, off.Base, lo, hi)
}

func (m *ML) readTier(ctx context.Context, id int64, base string, lo, hi int64) ([]ledger.Entry, error) {
	r, err := m.tierReader(ctx, id, base)
	if err != nil {
		return nil, err
	}
	return r.Read(ctx, lo, hi)
}

// reader returns a (cached) reader of the closed ledger id.
func (m *ML) reader(ctx context.Context, id int64) (*ledger.Reader, error) {
	m.rmu.Lock()
	r := m.readers[id]
	m.rmu.Unlock()
	if r != nil {
		return r, nil
	}
	r, err := m.cfg.Ledgers.OpenReader(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("mledger: %s: open ledger %d: %w", m.name, id, err)
	}
	m.rmu.Lock()
	if old := m.readers[id]; old != nil {
		r = old
	} else {
		m.readers[id] = r
	}
	m.rmu.Unlock()
	return r, nil
}

// SeqAtTime is the first live sequence whose publish time is at or
// after t (JetStream opt_start_time); the last sequence + 1 if none. It
// narrows by the ledgers' times, then binary-searches by reading
// messages (publish times never go back).
func (m *ML) SeqAtTime(ctx context.Context, t time.Time) (uint64, error) {
	m.mu.Lock()
	if err := m.stopErr; err != nil {
		m.mu.Unlock()
		return 0, err
	}
	c := m.core
	lo, hi, found := c.first, c.conf.seq, false
	for _, l := range c.ledgers {
		if l.Msgs == 0 || l.last() < c.first {
			continue
		}
		if !l.LastTime.Before(t) {
			lo, hi, found = max(c.first, l.FirstSeq), l.last(), true
			break
		}
	}
	last := c.conf.seq
	m.mu.Unlock()
	if !found {
		return last + 1, nil
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		msg, err := m.Read(ctx, mid)
		switch {
		case errors.Is(err, ErrGone):
			lo = mid + 1
		case err != nil:
			return 0, err
		case msg.Time.Before(t):
			lo = mid + 1
		default:
			hi = mid
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(lo, m.core.first), nil
}

// HideForTest makes confirmed message seq read as gone (ErrGone) from
// now on, in this ML only: nothing is written, replicated or persisted,
// and a reopened topic has it again. It is the audit's test hook
// (STRATA_TEST_HOOKS=1; see broker/jetstream testhooks.go): a copy that
// lost one message. Errors: ErrNotFound outside FirstSeq..LastSeq.
func (m *ML) HideForTest(seq uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if seq < m.core.first || seq > m.core.conf.seq {
		return fmt.Errorf("%w: seq %d not in %d..%d", ErrNotFound, seq, m.core.first, m.core.conf.seq)
	}
	if m.hidden == nil {
		m.hidden = map[uint64]bool{}
	}
	m.hidden[seq] = true
	return nil
}
