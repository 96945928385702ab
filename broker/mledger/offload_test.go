package mledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/tiered"
	"github.com/stratamesh/strata/tiered/blob/memblob"
)

// memTier is a Tier in memory: each copy is its entries. It counts
// reads so tests can see where data came from.
type memTier struct {
	mu     sync.Mutex
	copies map[string][]ledger.Entry
	reads  int
}

func newMemTier() *memTier { return &memTier{copies: map[string][]ledger.Entry{}} }

// storeTier is the real Tier (package tiered's format, offload and
// reader) over an in-memory blob store, with the fake's counters.
type storeTier struct {
	Tier
	store *memblob.Store
}

func newBlobTier() *storeTier {
	st := memblob.New()
	return &storeTier{Tier: NewTier(st, tiered.NewBlockCache(1<<20), tiered.Config{BlockSize: 64 << 10}), store: st}
}

func (t *storeTier) readCount() int { return t.store.Calls(memblob.OpRead) }

// bases lists the copies in the store (one per data object).
func (t *storeTier) bases() []string {
	objs, _ := t.store.List(context.Background(), "")
	var out []string
	for _, o := range objs {
		if b, ok := strings.CutSuffix(o.Name, ".data"); ok {
			out = append(out, b)
		}
	}
	return out
}

func (m *memTier) Offload(ctx context.Context, src EntryReader, id, last, length int64, base string, progress OffloadProgress) (int64, error) {
	var all []ledger.Entry
	var n int64
	for lo := int64(0); lo <= last; lo += 10 {
		ents, err := src.Read(ctx, lo, min(lo+9, last))
		if err != nil {
			return 0, err
		}
		for _, e := range ents {
			all = append(all, ledger.Entry{ID: e.ID, Payload: slices.Clone(e.Payload)})
			n += int64(len(e.Payload))
		}
		progress(int64(len(all)), n)
	}
	m.mu.Lock()
	m.copies[base] = all
	m.mu.Unlock()
	return n, nil
}

func (m *memTier) Open(_ context.Context, base string) (TierReader, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ents, ok := m.copies[base]
	if !ok {
		return nil, fmt.Errorf("memTier: no copy %s", base)
	}
	return &memTierReader{t: m, ents: ents}, nil
}

func (m *memTier) Delete(_ context.Context, base string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.copies, base)
	return nil
}

func (m *memTier) bases() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for b := range m.copies {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}

func (m *memTier) readCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reads
}

type memTierReader struct {
	t    *memTier
	ents []ledger.Entry
}

func (r *memTierReader) Read(_ context.Context, first, last int64) ([]ledger.Entry, error) {
	if first < 0 || last < first || last >= int64(len(r.ents)) {
		return nil, fmt.Errorf("memTierReader: entries %d..%d of %d", first, last, len(r.ents))
	}
	r.t.mu.Lock()
	r.t.reads++
	r.t.mu.Unlock()
	return r.ents[first : last+1], nil
}

func (r *memTierReader) Close() error { return nil }

// failingSource fails reads from entry failAt on while fail is set.
type failingSource struct {
	src    EntryReader
	failAt int64
	fail   *atomicBool
}

type atomicBool struct {
	mu sync.Mutex
	v  bool
}

func (b *atomicBool) get() bool  { b.mu.Lock(); defer b.mu.Unlock(); return b.v }
func (b *atomicBool) set(v bool) { b.mu.Lock(); b.v = v; b.mu.Unlock() }

func (f failingSource) Read(ctx context.Context, first, last int64) ([]ledger.Entry, error) {
	if f.fail.get() && last >= f.failAt {
		return nil, errors.New("injected: bookie copy unreadable")
	}
	return f.src.Read(ctx, first, last)
}

func TestCoreOffloadDecisions(t *testing.T) {
	c := newCore(Limits{}, 1<<20, 1)
	mk := func(id int64, first uint64, msgs, bytes int64) *ledgerState {
		return &ledgerState{LedgerInfo: LedgerInfo{ID: id, FirstSeq: first, Entries: msgs, Msgs: msgs, Bytes: bytes, State: LedgerClosed}}
	}
	c.ledgers = []*ledgerState{mk(1, 1, 10, 1000), mk(2, 11, 10, 1000), mk(3, 21, 10, 1000),
		{LedgerInfo: LedgerInfo{ID: 4, FirstSeq: 31, Entries: -1, Msgs: -1, State: LedgerOpen}}}
	c.conf.seq = 35
	if l := c.offloadNext(3500, 400); l != nil {
		t.Fatalf("3400 bytes not offloaded, threshold 3500: offload %d", l.ID)
	}
	if l := c.offloadNext(3000, 400); l == nil || l.ID != 1 {
		t.Fatalf("3400 bytes over 3000: want ledger 1, got %+v", l)
	}
	now := time.Unix(1000, 0)
	c.ledgers[0].Offload = &OffloadInfo{Base: "b1", Time: now}
	if l := c.offloadNext(3000, 400); l != nil {
		t.Fatalf("2400 bytes left over 3000: offload %d", l.ID)
	}
	if l := c.offloadNext(0, 0); l == nil || l.ID != 2 {
		t.Fatalf("threshold 0: want ledger 2, got %+v", l)
	}
	// A ledger wholly below first is never copied.
	c.first = 21
	if l := c.offloadNext(0, 0); l == nil || l.ID != 3 {
		t.Fatalf("ledger 2 trimmed: want ledger 3, got %+v", l)
	}
	if due := c.bookieDeletesDue(now.Add(time.Minute-time.Nanosecond), time.Minute); len(due) != 0 {
		t.Fatalf("due before the lag: %v", due)
	}
	if due := c.bookieDeletesDue(now.Add(time.Minute), time.Minute); len(due) != 1 || due[0].ID != 1 {
		t.Fatalf("due at the lag: %v", due)
	}
	c.ledgers[0].Offload.BookieDeleted = true
	if due := c.bookieDeletesDue(now.Add(time.Hour), time.Minute); len(due) != 0 {
		t.Fatalf("due once deleted: %v", due)
	}
	// Removing a wholly trimmed offloaded ledger puts its copy in the
	// tier trash.
	c.counted = 21
	if gone := c.removeDone(); len(gone) != 2 || !slices.Equal(c.tierTrash, []string{"b1"}) {
		t.Fatalf("removeDone: %v, tier trash %v", gone, c.tierTrash)
	}
}

// offloadConfig: 100-entry ledgers, offload at once, no deletion lag.
func offloadConfig(tier Tier) func(*Config) {
	return func(c *Config) {
		c.Limits.RolloverEntries = 100
		c.Tier = tier
		c.Offload = &OffloadPolicy{Threshold: 0, DeletionLag: 0}
	}
}

// waitTierOnly waits until every closed ledger of ml is offloaded and its
// bookie copy deleted, and at least n of them.
func waitTierOnly(t *testing.T, ml *ML, n int) OffloadStatus {
	t.Helper()
	var st OffloadStatus
	testutil.Eventually(t, fmt.Sprintf("%d ledgers offloaded, bookie copies deleted", n), 60*time.Second, func() bool {
		st = ml.OffloadStatus()
		tier := 0
		for _, l := range st.Ledgers {
			switch l.Where {
			case "tier":
				tier++
			case "open":
			default:
				return false
			}
		}
		return tier >= n
	})
	return st
}

// dropCaches empties ml's caches of closed ledgers' messages, so reads
// go to the ledgers.
func dropCaches(ml *ML) {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	ml.cache.evict(0, ml.keepFrom())
	ml.backlog = backlogCache{budget: ml.backlog.budget}
}

func readAll(t *testing.T, ml *ML, from, to uint64) {
	t.Helper()
	for s := from; s <= to; s++ {
		m, err := ml.Read(testCtx(t), s)
		if err != nil {
			t.Fatalf("read %d: %v", s, err)
		}
		if m.Seq != s || string(m.Data) != fmt.Sprintf("msg-%d", s) {
			t.Fatalf("read %d: seq %d data %q", s, m.Seq, m.Data)
		}
	}
}

// TestOffloadThenReadFromTier: 1,000 messages in 100-entry ledgers are
// offloaded and their bookie copies deleted; everything reads back in
// order from the earliest position, here and at a new owner; retention
// deletes the tier copies too.
func TestOffloadThenReadFromTier(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	tier := newBlobTier()
	ml := e.open(testTopic, e.config(testTopic, nil, offloadConfig(tier)))
	for i := 1; i <= 1000; i++ {
		mustPublish(t, ml, "acme.prod.orders", fmt.Sprintf("msg-%d", i), PublishOptions{})
	}
	st := waitTierOnly(t, ml, 9)
	if st.OffloadedLedgers < 9 || st.OffloadedBytes == 0 || st.Running != nil || st.LastError != "" {
		t.Fatalf("status %+v", st)
	}
	// The last ledger may close (a rollover at its 100th entry) after the
	// status above: wait until every closed ledger's offload is recorded.
	var tm TopicMeta
	testutil.Eventually(t, "every closed ledger's offload recorded", 60*time.Second, func() bool {
		m, _, err := Load(testCtx(t), e.st, testTopic)
		if err != nil {
			t.Fatal(err)
		}
		tm = m
		for _, l := range m.Ledgers {
			if l.State == LedgerClosed && (l.Offload == nil || !l.Offload.BookieDeleted) {
				return false
			}
		}
		return true
	})
	onBookies := e.ledgersOf(testTopic)
	for _, l := range tm.Ledgers {
		if l.State != LedgerClosed {
			continue
		}
		if !strings.HasPrefix(l.Offload.Base, "us-east/acme/prod/orders/"+fmt.Sprint(l.ID)+"-") {
			t.Fatalf("ledger %d recorded as %+v", l.ID, l.Offload)
		}
		if slices.Contains(onBookies, l.ID) {
			t.Fatalf("ledger %d still on bookies after its deletion was recorded", l.ID)
		}
	}
	dropCaches(ml)
	before := tier.readCount()
	readAll(t, ml, 1, 1000)
	if tier.readCount() == before {
		t.Fatal("no read went to the tier")
	}
	if err := ml.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	// A new owner reads the offloaded ledgers from the tier.
	ml2 := e.open(testTopic, e.config(testTopic, nil, offloadConfig(tier)))
	readAll(t, ml2, 1, 1000)

	// Retention: trimming below the second ledger deletes the first
	// ledgers' copies from the tier.
	basesBefore := tier.bases()
	if err := ml2.TrimTo(testCtx(t), 501); err != nil {
		t.Fatal(err)
	}
	var below []string // copies of the ledgers wholly below 501
	for _, l := range tm.Ledgers {
		if l.State == LedgerClosed && l.end() < 501 {
			below = append(below, l.Offload.Base)
		}
	}
	testutil.Eventually(t, "trimmed ledgers' tier copies deleted", 30*time.Second, func() bool {
		tm, _, err := Load(testCtx(t), e.st, testTopic)
		if err != nil || len(tm.TierTrash) != 0 {
			return false
		}
		left := tier.bases()
		for _, b := range below {
			if slices.Contains(left, b) {
				return false
			}
		}
		return true
	})
	// Nothing else was deleted. (ml2 may offload the ledger ml closed
	// meanwhile, so the tier can also hold more than before.)
	for _, b := range basesBefore {
		if !slices.Contains(below, b) && !slices.Contains(tier.bases(), b) {
			t.Fatalf("tier copy %s deleted, not below the trim point", b)
		}
	}
	readAll(t, ml2, 501, 1000)
}

// TestOffloadSourceFailsHalfway: the bookie copy turns unreadable halfway
// through a copy; the offload fails and is retried with backoff, the
// ledger stays readable from the bookies and nothing is deleted; once
// readable again a retry succeeds.
func TestOffloadSourceFailsHalfway(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	tier := newBlobTier()
	fail := &atomicBool{v: true}
	ml := e.open(testTopic, e.config(testTopic, nil, offloadConfig(tier), func(c *Config) {
		c.WrapOffloadSource = func(src EntryReader) EntryReader { return failingSource{src: src, failAt: 50, fail: fail} }
	}))
	for i := 1; i <= 150; i++ {
		mustPublish(t, ml, "acme.prod.orders", fmt.Sprintf("msg-%d", i), PublishOptions{})
	}
	var st OffloadStatus
	testutil.Eventually(t, "a failed offload reported", 30*time.Second, func() bool {
		st = ml.OffloadStatus()
		return st.LastError != ""
	})
	if !strings.Contains(st.LastError, "injected") || st.NextRetry.IsZero() || st.OffloadedLedgers != 0 {
		t.Fatalf("status after the failure: %+v", st)
	}
	if b := tier.bases(); len(b) != 0 {
		t.Fatalf("tier holds %v after a failed copy", b)
	}
	first := st.Ledgers[0].ID
	if !slices.Contains(e.ledgersOf(testTopic), first) {
		t.Fatalf("ledger %d deleted from bookies after a failed offload", first)
	}
	readAll(t, ml, 1, 150)
	fail.set(false)
	st = waitTierOnly(t, ml, 1)
	if st.LastError != "" || st.Completed == 0 {
		t.Fatalf("status after the retry: %+v", st)
	}
	readAll(t, ml, 1, 150)
}

// TestOffloadMidRead: a reader halfway through a ledger read from the
// bookies goes on without an error when the ledger's bookie copy is
// deleted under it (its reads switch to the tier copy); and with every
// bookie down, an offloaded ledger whose bookie copy is kept reads from
// the tier.
func TestOffloadMidRead(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	tier := newMemTier()
	big := strings.Repeat("x", 64<<10) // 64 KiB: the read-ahead covers 16 messages
	ml := e.open(testTopic, e.config(testTopic, nil, func(c *Config) {
		c.Limits.RolloverEntries = 100
		c.Tier = tier
		// Never by the threshold: on request, bookie copies deleted at once.
		c.Offload = &OffloadPolicy{Threshold: 1 << 50, DeletionLag: 0}
	}))
	for i := 1; i <= 250; i++ {
		mustPublish(t, ml, "acme.prod.orders", fmt.Sprintf("%d:%s", i, big), PublishOptions{})
	}
	check := func(from, to uint64) {
		t.Helper()
		for s := from; s <= to; s++ {
			m, err := ml.Read(testCtx(t), s)
			if err != nil || !strings.HasPrefix(string(m.Data), fmt.Sprintf("%d:", s)) {
				t.Fatalf("read %d: %v", s, err)
			}
		}
	}
	dropCaches(ml)
	check(1, 40) // from the bookies
	if n := tier.readCount(); n != 0 {
		t.Fatalf("%d tier reads before any offload", n)
	}
	if err := ml.OffloadNow(testCtx(t), 0); err != nil {
		t.Fatal(err)
	}
	waitTierOnly(t, ml, 2)
	if ids := e.ledgersOf(testTopic); slices.Contains(ids, ml.OffloadStatus().Ledgers[0].ID) {
		t.Fatalf("bookie copy of ledger %d kept", ml.OffloadStatus().Ledgers[0].ID)
	}
	dropCaches(ml)
	check(41, 100)
	if tier.readCount() == 0 {
		t.Fatal("the rest of the ledger was not read from the tier")
	}
}

// TestOffloadBookiesDown: with every bookie down, an offloaded ledger
// whose bookie copy is still kept (deletion lag) reads from the tier.
func TestOffloadBookiesDown(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	tier := newMemTier()
	ml := e.open(testTopic, e.config(testTopic, nil, func(c *Config) {
		c.Limits.RolloverEntries = 100
		c.Tier = tier
		c.Offload = &OffloadPolicy{Threshold: 0, DeletionLag: time.Hour}
	}))
	for i := 1; i <= 150; i++ {
		mustPublish(t, ml, "acme.prod.orders", fmt.Sprintf("msg-%d", i), PublishOptions{})
	}
	testutil.Eventually(t, "ledger offloaded", 30*time.Second, func() bool { return ml.OffloadStatus().OffloadedLedgers >= 1 })
	if w := ml.OffloadStatus().Ledgers[0].Where; w != "bookies+tier" {
		t.Fatalf("first ledger is %s within the deletion lag", w)
	}
	for _, id := range e.bk.IDs() {
		e.bk.Stop(id)
	}
	dropCaches(ml)
	readAll(t, ml, 1, 100)
	if tier.readCount() == 0 {
		t.Fatal("no read went to the tier")
	}
}

// TestOffloadNowWithoutTier: a request in a region without a tier fails
// with ErrNoTier.
func TestOffloadNowWithoutTier(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	ml := e.open(testTopic, e.config(testTopic, nil))
	if err := ml.OffloadNow(testCtx(t), 0); !errors.Is(err, ErrNoTier) {
		t.Fatalf("OffloadNow without a tier: %v", err)
	}
}
