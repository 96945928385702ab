package mledger

import (
	"context"
	"fmt"
	"time"

	"github.com/stratamesh/strata/bookie/ledger"
)

// replayBatch is how many entries a takeover reads at once.
const replayBatch = 256

// Open takes the topic over as its owner and returns its ML:
//
//  1. Load the metadata (ErrNotFound if none).
//  2. Recover the open ledger, if any (ledger.Client.OpenForTakeover:
//     fences the old writer, whose later adds fail) and record it closed
//     with its real entry count; an empty one is dropped and deleted.
//  3. Rebuild the state from the snapshot plus the entries after it,
//     read back from the ledgers (ErrCorrupt if they do not match the
//     list).
//  4. Create a new ledger (custom property CustomTopic) and write the
//     list and a fresh snapshot, conditioned on cfg.Cond (and on the key's
//     revision as loaded): a failed condition is ErrNotOwner.
//
// ctx bounds Open only. Open does not wait for the old owner: fencing
// stops it.
func Open(ctx context.Context, cfg Config, name Name) (*ML, error) {
	if err := name.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	tm, rev, err := Load(ctx, cfg.Store, name)
	if err != nil {
		return nil, err
	}
	recovered, err := recoverOpen(ctx, cfg.Ledgers, &tm)
	if err != nil {
		return nil, fmt.Errorf("mledger: open %s: %w", name, err)
	}
	c, from, err := restoreCore(&tm, cfg.Limits, cfg.MaxEntrySize)
	if err != nil {
		return nil, fmt.Errorf("mledger: open %s: %w", name, err)
	}
	m := newML(cfg, name, &tm, rev, c)
	ok := false
	defer func() {
		if !ok {
			m.cancel()
		}
	}()
	if err := m.replay(ctx, from); err != nil {
		return nil, fmt.Errorf("mledger: open %s: %w", name, err)
	}
	if err := m.ledgerTimes(ctx, recovered); err != nil {
		return nil, fmt.Errorf("mledger: open %s: %w", name, err)
	}
	m.resolveFirstTime(ctx)
	cur, err := m.createLedger(ctx)
	if err != nil {
		return nil, err
	}
	created := []*openLedger{cur}
	if m.spare, err = m.createLedger(ctx); err == nil { // best effort
		created = append(created, m.spare)
	} else {
		m.log.Warn("creating a spare ledger failed; the first rollover creates one", "err", err)
	}
	cur.firstSeq, cur.created, cur.recorded = c.head.seq+1, cfg.Now(), true
	c.addLedger(cur.id, cur.firstSeq)
	m.cur = cur
	m.mu.Lock()
	next := m.buildMeta()
	m.mu.Unlock()
	if err := m.write(ctx, next); err != nil {
		for _, l := range created {
			m.discard(l)
		}
		return nil, fmt.Errorf("mledger: open %s: %w", name, err)
	}
	ok = true
	m.deleteTrash(ctx, next.Trash)
	m.log.Info("managed ledger opened", "first_seq", c.first, "last_seq", c.conf.seq,
		"ledgers", len(c.ledgers), "ledger", cur.id)
	go m.completer()
	go m.loop()
	return m, nil
}

// recoverOpen closes (by recovery) every ledger tm lists as open and the
// spare, and leaves tm's list as the new owner continues it: empty
// ledgers go to the trash; a ledger that does not start right after the
// one before it (which recovered short: none of its entries, nor any
// later one, was acknowledged) goes to the trash with every later one;
// the spare is appended if its entry 0 holds the sequence that follows
// the list (the old owner had switched to it), and trashed otherwise. It
// returns the ids of the recovered ledgers.
func recoverOpen(ctx context.Context, lc *ledger.Client, tm *TopicMeta) (map[int64]bool, error) {
	recovered := map[int64]bool{}
	takeOver := func(li *LedgerInfo) error {
		md, err := lc.OpenForTakeover(ctx, li.ID, ledgerPassword)
		if err != nil {
			return fmt.Errorf("recover ledger %d: %w", li.ID, err)
		}
		li.State, li.Entries, li.Bytes = LedgerClosed, md.LastEntryID+1, md.Length
		recovered[li.ID] = true
		return nil
	}
	var kept []LedgerInfo
	var next uint64 // the sequence the next ledger must start at (0: any)
	cut := false
	for _, li := range tm.Ledgers {
		if !cut && next != 0 && li.FirstSeq != next {
			cut = true
		}
		if cut {
			tm.Trash = append(tm.Trash, li.ID)
			continue
		}
		if li.State != LedgerClosed {
			if err := takeOver(&li); err != nil {
				return nil, err
			}
		}
		next = li.FirstSeq + uint64(li.Entries)
		if li.Entries == 0 {
			tm.Trash = append(tm.Trash, li.ID)
			continue
		}
		kept = append(kept, li)
	}
	if sp := tm.Spare; sp != 0 {
		tm.Spare = 0
		li := LedgerInfo{ID: sp, FirstSeq: next, State: LedgerOpen}
		if err := takeOver(&li); err != nil {
			return nil, err
		}
		chained := false
		if li.Entries > 0 && next != 0 && !cut {
			first, err := firstSeqOf(ctx, lc, sp)
			if err != nil {
				return nil, err
			}
			chained = first == next
		}
		if chained {
			kept = append(kept, li)
		} else {
			tm.Trash = append(tm.Trash, sp)
			delete(recovered, sp)
		}
	}
	tm.Ledgers = kept
	return recovered, nil
}

// firstSeqOf is the sequence in entry 0 of the closed ledger id.
func firstSeqOf(ctx context.Context, lc *ledger.Client, id int64) (uint64, error) {
	r, err := lc.OpenReader(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("read ledger %d: %w", id, err)
	}
	ents, err := r.Read(ctx, 0, 0)
	if err != nil {
		return 0, fmt.Errorf("read ledger %d: %w", id, err)
	}
	m, err := DecodeEntry(ents[0].Payload)
	if err != nil {
		return 0, fmt.Errorf("ledger %d entry 0: %w", id, err)
	}
	return m.Seq, nil
}

// replay feeds the entries from seq from on into the core (and the
// cache), checking that they are where the list says.
func (m *ML) replay(ctx context.Context, from uint64) error {
	for _, l := range m.core.ledgers {
		if l.Entries == 0 || l.last() < from {
			continue
		}
		for s := max(from, l.FirstSeq); s <= l.last(); {
			to := min(l.last(), s+replayBatch-1)
			msgs, err := m.readLedger(ctx, l.ID, l.FirstSeq, s, to)
			if err != nil {
				return err
			}
			for i := range msgs {
				msg := &msgs[i]
				m.core.replay(l.ID, msg, msgIDOf(msg.Header))
				if msg.Seq == l.FirstSeq {
					l.FirstTime = msg.Time
				}
				if msg.Seq == l.last() {
					l.LastTime = msg.Time
				}
				m.cache.push(*msg, int64(EncodedSize(msg)))
				m.cache.evict(int64(m.cfg.CacheBytes), ^uint64(0))
			}
			s += uint64(len(msgs))
		}
	}
	if n := len(m.core.ledgers); n > 0 && m.core.conf.seq != m.core.ledgers[n-1].last() {
		return fmt.Errorf("%w: replay ended at %d, the ledgers at %d", ErrCorrupt, m.core.conf.seq, m.core.ledgers[n-1].last())
	}
	return nil
}

// ledgerTimes reads the first and last publish times of recovered
// ledgers that replay did not see.
func (m *ML) ledgerTimes(ctx context.Context, recovered map[int64]bool) error {
	read := func(l *ledgerState, seq uint64, t *time.Time) error {
		if !t.IsZero() {
			return nil
		}
		msgs, err := m.readLedger(ctx, l.ID, l.FirstSeq, seq, seq)
		if err != nil {
			return err
		}
		*t = msgs[0].Time
		return nil
	}
	for _, l := range m.core.ledgers {
		if !recovered[l.ID] {
			continue
		}
		if err := read(l, l.FirstSeq, &l.FirstTime); err != nil {
			return err
		}
		if err := read(l, l.last(), &l.LastTime); err != nil {
			return err
		}
	}
	return nil
}
