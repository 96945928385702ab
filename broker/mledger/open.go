package mledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/tenancy"
)

// Open takes the topic over as its owner and returns its ML:
//
//  1. Load the metadata (ErrNotFound if none).
//  2. Recover the open ledger, if any (ledger.Client.OpenForTakeover:
//     fences the old writer, whose later adds fail) and record it closed
//     with its real entry count, and the message count, times and bytes
//     its first and last entries give; an empty one is dropped and
//     deleted.
//  3. Rebuild the state from the snapshot plus the entries after it,
//     read back from the ledgers (ErrCorrupt if they do not match the
//     list): sequences, subject index, dedup window, the last local
//     origin sequence and the origin streams' high-water marks (the
//     replayed messages carry their origins). A topic without an
//     incarnation (created before incarnations) gets one here, and one
//     without a Region (TopicMeta.Region) gets cfg.Region.
//  4. Create a new ledger (custom property CustomTopic) and write the
//     list and a fresh snapshot, conditioned on cfg.Cond (and on the key's
//     revision as loaded): a failed condition is ErrNotOwner.
//
// ctx bounds Open only. Open does not wait for the old owner: fencing
// stops it.
func Open(ctx context.Context, cfg Config, name tenancy.Name) (*ML, error) {
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
	missing, err := recoverOpen(ctx, cfg.Ledgers, &tm)
	if err != nil {
		return nil, fmt.Errorf("mledger: open %s: %w", name, err)
	}
	if len(missing) > 0 {
		cfg.Logger.Warn("the topic's metadata names open ledgers that do not exist; dropped as empty (nothing in them was acknowledged)",
			"topic", name.String(), "ledgers", missing)
	}
	if tm.Incarnation == "" { // written with the list below
		tm.Incarnation = newIncarnation()
	}
	renamed := tm.Region != "" && cfg.Region != "" && cfg.Region != tm.Region
	if tm.Region == "" { // written with the list below, before any record
		tm.Region = cfg.Region
	}
	c, from, err := restoreCore(&tm, cfg.Limits, cfg.MaxEntrySize-batchHeaderSize, name, cfg.Region)
	if err != nil {
		return nil, fmt.Errorf("mledger: open %s: %w", name, err)
	}
	m := newML(cfg, name, &tm, rev, c)
	if renamed {
		m.log.Warn("Config.Region is not the region the topic's local messages were written under: they keep that name, and this region's are written with full origins",
			"region", cfg.Region, "topic_region", tm.Region)
	}
	ok := false
	defer func() {
		if !ok {
			m.cancel()
		}
	}()
	if err := m.replay(ctx, from); err != nil {
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
		// Only a failed condition says the list was not written. After
		// any other error (a cancelled or timed-out Txn) it may have been,
		// naming these ledgers: they are left for the next owner.
		unwritten := errors.Is(err, ErrNotOwner)
		for _, l := range created {
			if unwritten {
				m.discard(l)
			} else {
				abort(l)
			}
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
// ledgers go to the trash, and so do open ones and a spare whose ledger
// metadata does not exist (returned as missing: a ledger's metadata is
// written before its first add, so nothing in one that has none was
// acknowledged; Pulsar's managed ledger drops a missing last ledger
// likewise); a ledger that does not start right after the one before it
// (which recovered short: none of its entries, nor any later one, was
// acknowledged) goes to the trash with every later one;
// the spare is appended if its first message holds the sequence that
// follows the list (the old owner had switched to it), and trashed
// otherwise.
func recoverOpen(ctx context.Context, lc *ledger.Client, tm *TopicMeta) (missing []int64, err error) {
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
			r, err := recoverOrEmpty(ctx, lc, li.ID, true, tm.Local(), &missing)
			if err != nil {
				return missing, err
			}
			if r.Entries > 0 && r.FirstSeq != li.FirstSeq {
				return missing, fmt.Errorf("%w: ledger %d starts at seq %d, its list entry at %d", ErrCorrupt, li.ID, r.FirstSeq, li.FirstSeq)
			}
			r.FirstSeq = li.FirstSeq
			li = r
		}
		next = li.FirstSeq + uint64(li.Msgs)
		if li.Msgs == 0 {
			tm.Trash = append(tm.Trash, li.ID)
			continue
		}
		kept = append(kept, li)
	}
	if sp := tm.Spare; sp != 0 {
		tm.Spare = 0
		chainable := next != 0 && !cut
		r, err := recoverOrEmpty(ctx, lc, sp, chainable, tm.Local(), &missing)
		if err != nil {
			return missing, err
		}
		if chainable && r.Entries > 0 && r.FirstSeq == next {
			kept = append(kept, r)
		} else {
			tm.Trash = append(tm.Trash, sp)
		}
	}
	tm.Ledgers = kept
	return missing, nil
}

// recoverOrEmpty is recoverLedger, except that a ledger whose metadata
// does not exist is returned as an empty closed one and added to missing.
func recoverOrEmpty(ctx context.Context, lc *ledger.Client, id int64, read bool, local Local, missing *[]int64) (LedgerInfo, error) {
	r, err := recoverLedger(ctx, lc, id, read, local)
	if errors.Is(err, ledger.ErrNoLedger) {
		*missing = append(*missing, id)
		return LedgerInfo{ID: id, State: LedgerClosed}, nil
	}
	return r, err
}

// recoverLedger recovers ledger id (OpenForTakeover) and returns it as a
// closed LedgerInfo: entries from its metadata; with read, first
// sequence, message count and times from its first and last entries
// (decoded with local, the topic's Local), and message bytes from its
// length (exact for version 2 entries, which have a fixed header; a
// version 1 entry is its message).
func recoverLedger(ctx context.Context, lc *ledger.Client, id int64, read bool, local Local) (LedgerInfo, error) {
	md, err := lc.OpenForTakeover(ctx, id, ledgerPassword)
	if err != nil {
		return LedgerInfo{}, fmt.Errorf("recover ledger %d: %w", id, err)
	}
	li := LedgerInfo{ID: id, Entries: md.LastEntryID + 1, State: LedgerClosed}
	if li.Entries == 0 || !read {
		return li, nil
	}
	r, err := lc.OpenReader(ctx, id)
	if err != nil {
		return li, fmt.Errorf("read ledger %d: %w", id, err)
	}
	readEntry := func(e int64) ([]Message, int, error) {
		ents, err := r.Read(ctx, e, e)
		if err != nil {
			return nil, 0, fmt.Errorf("read ledger %d: %w", id, err)
		}
		msgs, err := DecodeBatch(ents[0].Payload, local)
		if err != nil {
			return nil, 0, fmt.Errorf("ledger %d entry %d: %w", id, e, err)
		}
		return msgs, int(ents[0].Payload[0]), nil
	}
	firsts, version, err := readEntry(0)
	if err != nil {
		return li, err
	}
	lasts := firsts
	if li.Entries > 1 {
		if lasts, _, err = readEntry(li.Entries - 1); err != nil {
			return li, err
		}
	}
	first, last := firsts[0], lasts[len(lasts)-1]
	li.FirstSeq, li.FirstTime, li.LastTime = first.Seq, first.Time, last.Time
	li.Msgs = int64(last.Seq-first.Seq) + 1
	if last.Seq < first.Seq || li.Msgs < li.Entries {
		return li, fmt.Errorf("%w: ledger %d: %d entries from seq %d to %d", ErrCorrupt, id, li.Entries, first.Seq, last.Seq)
	}
	li.Bytes = md.Length
	if version == entryV2 {
		li.Bytes = msgBytes(md.Length, li.Entries)
	}
	return li, nil
}

// replay feeds the messages from seq from on into the core (and the
// cache), reading the ledgers' entries in order (learning the entry
// index on the way) and checking that they are where the list says.
func (m *ML) replay(ctx context.Context, from uint64) error {
	for _, l := range m.core.ledgers {
		if l.Msgs == 0 || l.last() < from {
			continue
		}
		ref := refOf(l)
		for s := max(from, l.FirstSeq); s <= l.last(); {
			msgs, err := m.readLedger(ctx, ref, s)
			if err != nil {
				return err
			}
			for i := range msgs {
				msg := &msgs[i]
				if !m.core.replay(l.ID, msg, msgIDOf(msg.Header)) {
					m.log.Warn("replayed message's origin does not follow", "seq", msg.Seq,
						"origin_region", msg.Origin.Region, "incarnation", msg.Origin.Incarnation, "origin_seq", msg.Origin.Seq)
				}
				if msg.Seq == l.FirstSeq {
					l.FirstTime = msg.Time
				}
				if msg.Seq == l.last() {
					l.LastTime = msg.Time
				}
				m.cache.push(*msg, int64(EncodedSize(msg, m.local)))
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
