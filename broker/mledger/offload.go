package mledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/internal/meta"
)

// Offload (ARCHITECTURE §6, Pulsar's tiered storage): the ML copies
// closed ledgers to the region's tier once the topic's data not yet
// offloaded passes the namespace's threshold, records the verified copy
// in the ledger list (LedgerInfo.Offload, with the ownership-conditioned
// write), and deletes the bookie copy DeletionLag later. Reads of a
// ledger whose bookie copy is gone, or fails, go to the tier. When
// retention removes an offloaded ledger, its objects go to the tier
// trash (TopicMeta.TierTrash) and are deleted after the next write.
//
// The decisions (which ledger next, which bookie copies are due) are
// core methods; the copy itself runs on one goroutine per ML at a time,
// its record and the deletions on the loop.

// EntryReader reads entries first..last of one ledger, in order, all of
// them (ledger.Reader.Read's contract): a bookie reader or a tier copy.
type EntryReader interface {
	Read(ctx context.Context, first, last int64) ([]ledger.Entry, error)
}

// TierReader is an EntryReader of an offloaded ledger; Close releases it
// (read-ahead).
type TierReader interface {
	EntryReader
	io.Closer
}

// OffloadProgress reports a copy in progress: entries and bytes copied
// so far.
type OffloadProgress func(entries, bytes int64)

// Tier is the region's blob store as the ML uses it (package tiered
// implements it). Object names are derived from base.
type Tier interface {
	// Offload copies closed ledger id, entries 0..lastEntry (length bytes
	// of payload, an estimate), from src to the objects of base and
	// verifies them; it returns the data object's size in bytes. On an
	// error nothing of base is left in the tier.
	Offload(ctx context.Context, src EntryReader, id, lastEntry, length int64, base string, progress OffloadProgress) (int64, error)
	// Open reads the copy under base.
	Open(ctx context.Context, base string) (TierReader, error)
	// Delete removes the objects of base (missing ones are no error).
	Delete(ctx context.Context, base string) error
}

// OffloadPolicy is a namespace's offload rule (topology namespaces[].offload).
type OffloadPolicy struct {
	// Threshold: closed ledgers are offloaded, oldest first, while the
	// topic's data not yet offloaded (closed ledgers and the open one)
	// exceeds Threshold bytes; 0 offloads every ledger once closed.
	Threshold int64
	// DeletionLag is how long after its offload a ledger's bookie copy is
	// deleted (0: at once). Reads go to the tier afterwards.
	DeletionLag time.Duration
}

// OffloadInfo records a ledger's verified copy in the tier.
type OffloadInfo struct {
	// Base names the copy's objects in the tier (Tier.Open).
	Base string `json:"base"`
	// Bytes is the data object's size.
	Bytes int64 `json:"bytes"`
	// Time is when the copy was verified.
	Time time.Time `json:"time"`
	// BookieDeleted: the bookie copy is deleted; reads use the tier.
	BookieDeleted bool `json:"bookie_deleted,omitempty"`
}

// Offload backoff after a failed copy: doubling from offloadRetryMin to
// offloadRetryMax.
const (
	offloadRetryMin = time.Second
	offloadRetryMax = 5 * time.Minute
)

// DefaultOffloadDeletionLag is the deletion lag of ledgers offloaded on
// request (OffloadNow) in a namespace without an offload policy (Pulsar's
// default, 4 h).
const DefaultOffloadDeletionLag = 4 * time.Hour

// offloadState is the driver's state (guarded by ML.mu unless noted).
type offloadState struct {
	running   bool  // a copy is in flight
	ledger    int64 // its ledger
	total     int64 // its ledger's bytes
	entries   atomic.Int64
	bytes     atomic.Int64
	retryAt   time.Time // after a failure: no new copy before
	backoff   time.Duration
	lastErr   error
	lastErrAt time.Time
	// keep, when ≥ 0, is a requested offload (OffloadNow): offload until
	// at most keep bytes are not offloaded, whatever the policy.
	keep int64
	done uint64 // copies recorded
}

// offloadNext is the oldest closed ledger to copy next under threshold
// (offload until the not-offloaded bytes, open counted as openBytes, are
// at most threshold), or nil.
func (c *core) offloadNext(threshold, openBytes int64) *ledgerState {
	pending := openBytes
	for _, l := range c.ledgers {
		if l.Offload == nil {
			pending += l.Bytes
		}
	}
	if pending <= threshold {
		return nil
	}
	for _, l := range c.ledgers {
		if l.State == LedgerClosed && l.Offload == nil && l.Msgs > 0 && l.last() >= c.first {
			return l
		}
	}
	return nil
}

// bookieDeletesDue are the offloaded ledgers whose bookie copy may go at
// now (offloaded at least lag ago).
func (c *core) bookieDeletesDue(now time.Time, lag time.Duration) []*ledgerState {
	var out []*ledgerState
	for _, l := range c.ledgers {
		if o := l.Offload; o != nil && !o.BookieDeleted && !now.Before(o.Time.Add(lag)) {
			out = append(out, l)
		}
	}
	return out
}

// tierBase is the object base for a copy of ledger id:
// <region>/<tenant>/<namespace>/<topic>/<ledger>-<uuid> (the store adds
// its prefix). A new uuid per attempt, so a retry never meets a half
// deleted earlier attempt.
func (m *ML) tierBase(id int64) string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	region := m.cfg.Region
	if region == "" {
		region = "local"
	}
	return region + "/" + m.name.Tenant + "/" + m.name.Namespace + "/" + m.name.Topic + "/" +
		strconv.FormatInt(id, 10) + "-" + hex.EncodeToString(u[:])
}

type offloadPolicyBox struct{ p *OffloadPolicy }

// offloadPolicy is the namespace's offload policy now (nil: offload
// only on request).
func (m *ML) offloadPolicy() *OffloadPolicy {
	if b := m.offPolicy.Load(); b != nil {
		return b.p
	}
	return m.cfg.Offload
}

// SetOffloadPolicy replaces the namespace's offload policy (a policy
// change at run time); it applies from the ML's next offload check. nil:
// offload only on request.
func (m *ML) SetOffloadPolicy(p *OffloadPolicy) {
	cur := m.offloadPolicy()
	if cur == p || cur != nil && p != nil && *cur == *p {
		return
	}
	var cp *OffloadPolicy
	if p != nil {
		v := *p
		cp = &v
	}
	m.offPolicy.Store(&offloadPolicyBox{p: cp})
	m.kick()
}

// maintainOffload (loop) deletes the bookie copies that are due and
// starts the next copy when one is due and none runs.
func (m *ML) maintainOffload(now time.Time) {
	if m.cfg.Tier == nil {
		return
	}
	lag := DefaultOffloadDeletionLag
	pol := m.offloadPolicy()
	if pol != nil {
		lag = pol.DeletionLag
	}
	m.mu.Lock()
	due := m.core.bookieDeletesDue(now, lag)
	m.mu.Unlock()
	for _, l := range due {
		m.deleteBookieCopy(l)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.off.running || now.Before(m.off.retryAt) || m.stopErr != nil || m.closing {
		return
	}
	threshold := int64(-1)
	if pol != nil {
		threshold = pol.Threshold
	}
	if m.off.keep >= 0 && (threshold < 0 || m.off.keep < threshold) {
		threshold = m.off.keep
	}
	if threshold < 0 {
		return
	}
	var open int64
	if m.cur != nil {
		open = m.cur.bytes
	}
	l := m.core.offloadNext(threshold, open)
	if l == nil {
		m.off.keep = -1 // a requested offload is complete
		return
	}
	m.off.running, m.off.ledger, m.off.total = true, l.ID, l.Bytes
	m.off.entries.Store(0)
	m.off.bytes.Store(0)
	id, last, length := l.ID, l.Entries-1, l.Bytes
	m.offWG.Add(1)
	go m.offloadLedger(id, last, length)
}

// offloadLedger copies ledger id to the tier and records the copy (its
// own goroutine; the record on the loop).
func (m *ML) offloadLedger(id, last, length int64) {
	defer m.offWG.Done()
	base := m.tierBase(id)
	n, err := m.copyLedger(id, last, length, base)
	if err == nil {
		info := &OffloadInfo{Base: base, Bytes: n}
		err = m.request(m.ctx, func() error { return m.recordOffload(id, info) })
		// Delete the copy only when it is certainly not recorded. A write
		// whose answer was lost (a timeout, the ML stopping meanwhile:
		// request then returns without knowing) may be in etcd, and a later
		// owner would delete the bookie copy, trusting the tier's: an
		// orphaned copy costs space, a deleted recorded one the messages.
		var nr *notRecorded
		if err != nil && errors.As(err, &nr) {
			dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if derr := m.cfg.Tier.Delete(dctx, base); derr != nil {
				m.log.Warn("deleting an unrecorded tier copy failed", "ledger", id, "base", base, "err", derr)
			}
			cancel()
		}
	}
	m.mu.Lock()
	m.off.running = false
	if err != nil {
		m.off.backoff = min(max(2*m.off.backoff, offloadRetryMin), offloadRetryMax)
		m.off.retryAt = m.cfg.Now().Add(m.off.backoff)
		m.off.lastErr, m.off.lastErrAt = err, m.cfg.Now()
	} else {
		m.off.backoff = 0
		m.off.lastErr = nil
		m.off.done++
	}
	m.mu.Unlock()
	if err != nil && m.ctx.Err() == nil {
		m.log.Warn("offload failed; will retry", "ledger", id, "err", err, "retry_in", m.off.backoff)
	}
	m.kick()
}

// copyLedger runs the tier's copy of ledger id from its bookie reader.
func (m *ML) copyLedger(id, last, length int64, base string) (int64, error) {
	r, err := m.reader(m.ctx, id)
	if err != nil {
		return 0, err
	}
	var src EntryReader = r
	if m.cfg.WrapOffloadSource != nil {
		src = m.cfg.WrapOffloadSource(src)
	}
	start := time.Now()
	n, err := m.cfg.Tier.Offload(m.ctx, src, id, last, length, base, func(entries, bytes int64) {
		m.off.entries.Store(entries)
		m.off.bytes.Store(bytes)
	})
	if err != nil {
		return 0, fmt.Errorf("mledger: %s: offload ledger %d: %w", m.name, id, err)
	}
	m.log.Info("ledger offloaded", "ledger", id, "base", base, "bytes", n, "took", time.Since(start).Round(time.Millisecond))
	return n, nil
}

// notRecorded wraps an error of recordOffload after which the copy is
// certainly not in etcd: the ledger left the list, or the write's
// condition failed (meta.ErrConflict: another owner).
type notRecorded struct{ err error }

func (e *notRecorded) Error() string { return e.err.Error() }
func (e *notRecorded) Unwrap() error { return e.err }

// recordOffload (loop) records ledger id's verified copy info with the
// ownership-conditioned write. Errors wrapped in notRecorded (the ledger
// left the list meanwhile, the write's condition failed) leave the copy
// unrecorded, for the caller to delete; after any other write error it
// may be recorded, and is kept.
func (m *ML) recordOffload(id int64, info *OffloadInfo) error {
	m.mu.Lock()
	var l *ledgerState
	for _, x := range m.core.ledgers {
		if x.ID == id {
			l = x
		}
	}
	if l == nil {
		m.mu.Unlock()
		return &notRecorded{fmt.Errorf("mledger: %s: ledger %d left the list during its offload", m.name, id)}
	}
	info.Time = m.cfg.Now().UTC()
	l.Offload = info
	tm := m.buildMeta()
	m.dirty = false
	m.mu.Unlock()
	if err := m.write(m.ctx, tm); err != nil {
		m.mu.Lock()
		l.Offload = nil
		m.dirty = true
		m.mu.Unlock()
		if errors.Is(err, meta.ErrConflict) {
			return &notRecorded{err}
		}
		return err
	}
	return nil
}

// deleteBookieCopy (loop) deletes an offloaded ledger's bookie copy and
// records it (with the next write). Reads switch to the tier.
func (m *ML) deleteBookieCopy(l *ledgerState) {
	err := m.cfg.Ledgers.Delete(m.ctx, l.ID)
	if err != nil && !errors.Is(err, ledger.ErrNoLedger) {
		if m.ctx.Err() == nil {
			m.log.Warn("deleting an offloaded ledger's bookie copy failed; will retry", "ledger", l.ID, "err", err)
		}
		return
	}
	m.rmu.Lock()
	delete(m.readers, l.ID)
	m.rmu.Unlock()
	m.mu.Lock()
	if l.Offload != nil {
		o := *l.Offload
		o.BookieDeleted = true
		l.Offload = &o
		m.dirty = true
	}
	m.mu.Unlock()
	m.log.Info("offloaded ledger's bookie copy deleted", "ledger", l.ID)
}

// tierReader returns a (cached) reader of the tier copy under base.
func (m *ML) tierReader(ctx context.Context, id int64, base string) (TierReader, error) {
	m.rmu.Lock()
	r := m.treaders[id]
	m.rmu.Unlock()
	if r != nil {
		return r, nil
	}
	if m.cfg.Tier == nil {
		return nil, fmt.Errorf("mledger: %s: ledger %d is offloaded and no tier is configured", m.name, id)
	}
	r, err := m.cfg.Tier.Open(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("mledger: %s: open tier copy of ledger %d: %w", m.name, id, err)
	}
	m.rmu.Lock()
	if old := m.treaders[id]; old != nil {
		m.rmu.Unlock()
		_ = r.Close()
		return old, nil
	}
	m.treaders[id] = r
	m.rmu.Unlock()
	return r, nil
}

// offloadOf is ledger id's offload record as it stands (nil: none).
func (m *ML) offloadOf(id int64) *OffloadInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.core.ledgers {
		if l.ID == id {
			return l.Offload
		}
	}
	return nil
}

// closeTierReaders releases the tier readers (shutdown) or those of ids.
func (m *ML) closeTierReaders(ids ...int64) {
	m.rmu.Lock()
	var rs []TierReader
	if len(ids) == 0 {
		for id, r := range m.treaders {
			rs = append(rs, r)
			delete(m.treaders, id)
		}
	}
	for _, id := range ids {
		if r := m.treaders[id]; r != nil {
			rs = append(rs, r)
			delete(m.treaders, id)
		}
	}
	m.rmu.Unlock()
	for _, r := range rs {
		_ = r.Close()
	}
}

// deleteTierTrash deletes the given tier copies (recorded in the tier
// trash in etcd) and forgets those deleted.
func (m *ML) deleteTierTrash(ctx context.Context, bases []string) {
	if m.cfg.Tier == nil || len(bases) == 0 {
		return
	}
	var deleted []string
	for _, b := range bases {
		if err := m.cfg.Tier.Delete(ctx, b); err != nil {
			m.log.Warn("deleting a tier copy failed; will retry", "base", b, "err", err)
			continue
		}
		deleted = append(deleted, b)
	}
	if len(deleted) == 0 {
		return
	}
	m.mu.Lock()
	m.core.tierTrash = slices.DeleteFunc(m.core.tierTrash, func(b string) bool { return slices.Contains(deleted, b) })
	m.dirty = true
	m.mu.Unlock()
}
