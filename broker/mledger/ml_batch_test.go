package mledger

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/bookie/storage"
	"github.com/stratamesh/strata/internal/testutil"
)

// batching configures small batches, so that tests see many entries of
// several messages.
func batching(inflight, msgs int) func(*Config) {
	return func(c *Config) { c.MaxInflightEntries, c.MaxBatchMsgs = inflight, msgs }
}

// TestTakeoverWithBatchesInFlight: an owner publishing with many
// publishes in flight — entries of several messages, several entries
// appended and unconfirmed, more queued, rollovers under way — crashes
// (Drop). The next owner finds every acknowledged message, and only
// published ones, gap-free, with local origin sequences gap-free too;
// both go on; the ledgers it recovered record entries and messages apart.
func TestTakeoverWithBatchesInFlight(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	mod := []func(*Config){batching(3, 7), func(c *Config) { c.Limits.RolloverEntries = 300 }}
	ml := e.open(testTopic, e.config(testTopic, nil, mod...))
	var p asyncPublisher
	window := make(chan struct{}, 1000)
	enough := make(chan struct{})
	var oks atomic.Int64
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 0; i < 100000; i++ {
			select {
			case window <- struct{}{}:
			case <-ml.Done():
				return
			}
			p.publishThen(ml, fmt.Sprintf("b.%d", i%3), fmt.Sprintf("m%d", i), PublishOptions{MsgID: fmt.Sprintf("id-%d", i)},
				func(_ PubResult, err error) {
					if err == nil && oks.Add(1) == 1500 {
						close(enough)
					}
					<-window
				})
		}
	}()
	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		t.Fatal("publishes not acknowledged")
	}
	ml.mu.Lock()
	inflight, queued := ml.batch.inflight, ml.batch.queued()
	ml.mu.Unlock()
	ml.Drop()
	<-stopped
	answers := p.wait(t)
	acked := map[uint64]int{}
	failed := 0
	for i, a := range answers {
		switch {
		case a.err == nil:
			if a.res.Seq != uint64(i+1) {
				t.Fatalf("publish %d acknowledged with seq %d", i, a.res.Seq)
			}
			acked[a.res.Seq] = i
		case errors.Is(a.err, ErrNotOwner):
			failed++
		default:
			t.Fatalf("publish %d: %v", i, a.err)
		}
	}
	t.Logf("at the crash: %d entries in flight, %d messages queued; %d acknowledged, %d failed", inflight, queued, len(acked), failed)
	if failed == 0 {
		t.Fatal("nothing was in flight at the crash")
	}

	ml2 := e.open(testTopic, e.config(testTopic, nil, mod...))
	st := ml2.State()
	if int(st.LastSeq) < len(acked) || st.LastSeq > uint64(len(answers)) || st.FirstSeq != 1 {
		t.Fatalf("after takeover %+v: %d acknowledged of %d", st, len(acked), len(answers))
	}
	for s := uint64(1); s <= st.LastSeq; s++ { // acknowledged ones among them
		m, err := ml2.Read(testCtx(t), s)
		if err != nil || string(m.Data) != fmt.Sprintf("m%d", s-1) || m.Subject != fmt.Sprintf("b.%d", (s-1)%3) {
			t.Fatalf("seq %d after takeover: %+v, %v", s, m, err)
		}
	}
	// Local origin sequences too: gap-free up to the last recovered
	// message, and on from there.
	if sc := scanOrigins(t, ml2, 1); len(sc.local) != int(st.LastSeq) {
		t.Fatalf("%d local origins in %d messages", len(sc.local), st.LastSeq)
	}
	if next := mustPublish(t, ml2, "b.0", "after", PublishOptions{}); next != st.LastSeq+1 {
		t.Fatalf("next seq %d after %d", next, st.LastSeq)
	}
	if m, _ := ml2.Read(testCtx(t), st.LastSeq+1); m.Origin.Seq != st.LastSeq+1 || ml2.LastOriginSeq() != st.LastSeq+1 {
		t.Fatalf("local origin after takeover %+v", m.Origin)
	}
	last := st.LastSeq
	if r, err := publish(t, ml2, "b.1", "again", PublishOptions{MsgID: fmt.Sprintf("id-%d", last-1)}); err != nil || !r.Duplicate || r.Seq != last {
		t.Fatalf("repeated id of seq %d: %+v, %v", last, r, err)
	}
	tm, _, err := Load(testCtx(t), e.st, testTopic)
	if err != nil {
		t.Fatal(err)
	}
	batched := false
	next := uint64(1)
	for _, l := range tm.Ledgers {
		if l.FirstSeq != next {
			t.Fatalf("ledger list not contiguous: %+v", tm.Ledgers)
		}
		if l.State == LedgerClosed {
			if l.Msgs < l.Entries || l.Entries == 0 {
				t.Fatalf("ledger %+v", l)
			}
			batched = batched || l.Msgs > l.Entries
			next += uint64(l.Msgs)
		}
	}
	if !batched {
		t.Fatalf("no ledger holds batches: %+v", tm.Ledgers)
	}
}

// countingTransport counts the bookie reads (ReadRange calls) of a
// ledger client.
type countingTransport struct {
	ledger.GRPCTransport
	reads *atomic.Int64
}

type countingConn struct {
	ledger.Conn
	reads *atomic.Int64
}

func (t countingTransport) Dial(ctx context.Context, tg ledger.Target) (ledger.Conn, error) {
	c, err := t.GRPCTransport.Dial(ctx, tg)
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, reads: t.reads}, nil
}

func (c countingConn) ReadRange(ctx context.Context, id, first, last int64, maxBytes int) ([]storage.Entry, error) {
	c.reads.Add(1)
	return c.Conn.ReadRange(ctx, id, first, last, maxBytes)
}

// TestReadBatchesLazily: a new owner reads ledgers written in batches by
// the one before, with no entry index: sequential reads learn it on the
// way and cost about one bookie read per chunk of entries, not one per
// message; reads in the middle of a ledger, SeqAtTime and MaxMsgs
// trimming (which reads trimmed subjects back) work on it.
func TestReadBatchesLazily(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	mod := []func(*Config){batching(1, 10), func(c *Config) { c.Limits.RolloverEntries = 400 }}
	ml := e.open(testTopic, e.config(testTopic, nil, mod...))
	const n = 1000
	var p asyncPublisher
	for i := range n {
		p.publish(ml, fmt.Sprintf("r.%d", i%4), fmt.Sprintf("m%d", i), PublishOptions{})
	}
	for i, a := range p.wait(t) {
		if a.err != nil || a.res.Seq != uint64(i+1) {
			t.Fatalf("publish %d: %+v %v", i, a.res, a.err)
		}
	}
	if err := ml.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	tm, _, _ := Load(testCtx(t), e.st, testTopic)
	var entries int64
	for _, l := range tm.Ledgers {
		entries += l.Entries
	}
	if entries >= n/2 {
		t.Fatalf("%d entries for %d messages with 1 in flight: no batching? %+v", entries, n, tm.Ledgers)
	}

	var reads atomic.Int64
	lc := e.bk.Client(t, func(c *ledger.Config) { c.Transport = countingTransport{reads: &reads} })
	ml2 := e.open(testTopic, e.config(testTopic, nil, append(mod, func(c *Config) { c.Ledgers = lc })...))
	check := func(s uint64) {
		t.Helper()
		m, err := ml2.Read(testCtx(t), s)
		if err != nil || m.Seq != s || string(m.Data) != fmt.Sprintf("m%d", s-1) || m.Subject != fmt.Sprintf("r.%d", (s-1)%4) {
			t.Fatalf("read %d: %+v, %v", s, m, err)
		}
	}
	// The middle of the last ledger first (learns its index up to there),
	// then everything in order.
	check(n - 50)
	reads.Store(0)
	for s := uint64(1); s <= n; s++ {
		check(s)
	}
	t.Logf("%d messages in %d entries read with %d bookie reads", n, entries, reads.Load())
	if r := reads.Load(); r > entries {
		t.Fatalf("%d bookie reads for %d entries", r, entries)
	}
	if got, err := ml2.SeqAtTime(testCtx(t), time.Now().Add(-time.Hour)); err != nil || got != 1 {
		t.Fatalf("SeqAtTime: %d, %v", got, err)
	}
	// Retention into the old ledgers: subjects are read back.
	if err := ml2.SetLimits(testCtx(t), Limits{MaxMsgs: 100, RolloverEntries: 400}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "trimmed to 100 with subject counts", 30*time.Second, func() bool {
		st := ml2.State()
		_, c0 := ml2.LastForSubject("r.0")
		return st.FirstSeq == n-99 && st.Msgs == 100 && c0 == 25
	})
	check(n - 99)
}

// TestBackPressureAndClose: with one entry in flight and no room to
// queue, Publish blocks for the ledger instead of queueing without
// bound; answers stay in order; Close with publishes still in the
// pipeline sends and confirms them first.
func TestBackPressureAndClose(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	ml := e.open(testTopic, e.config(testTopic, nil, batching(1, 3), func(c *Config) { c.MaxQueuedBytes = 1 }))
	var p asyncPublisher
	const n = 90
	for i := range n {
		p.publish(ml, "bp", fmt.Sprint(i), PublishOptions{})
		ml.mu.Lock()
		queued := ml.batch.queued()
		ml.mu.Unlock()
		if queued > 1 {
			t.Fatalf("%d messages queued with MaxQueuedBytes 1", queued)
		}
	}
	if err := ml.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	for i, a := range p.wait(t) {
		if a.err != nil || a.res.Seq != uint64(i+1) {
			t.Fatalf("publish %d: %+v, %v", i, a.res, a.err)
		}
	}
	ml2 := e.open(testTopic, e.config(testTopic, nil))
	if st := ml2.State(); st.LastSeq != n || st.Msgs != n {
		t.Fatalf("after Close and reopen: %+v", st)
	}
	if m, err := ml2.Read(testCtx(t), n); err != nil || string(m.Data) != fmt.Sprint(n-1) {
		t.Fatalf("last message: %q, %v", m.Data, err)
	}
}

// TestIdleLingerGathersBurst: a burst published while no entry is in
// flight goes to the ledger as one entry when Config.Linger is on, and
// starts with a lone message when it is off.
func TestIdleLingerGathersBurst(t *testing.T) {
	for _, tc := range []struct {
		name        string
		linger, gap time.Duration
		check       func(entries int64) bool
		want        string
	}{
		{"on", 5 * time.Second, 500 * time.Millisecond, func(n int64) bool { return n == 1 }, "1 entry"},
		{"off", -1, 0, func(n int64) bool { return n >= 2 }, "the first message alone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.create(testTopic, `{}`)
			ml := e.open(testTopic, e.config(testTopic, nil, func(c *Config) { c.Linger, c.LingerGap = tc.linger, tc.gap }))
			var p asyncPublisher
			for i := 0; i < 20; i++ {
				p.publish(ml, "b.x", fmt.Sprintf("m%d", i), PublishOptions{})
			}
			for i, a := range p.wait(t) {
				if a.err != nil || a.res.Seq != uint64(i+1) {
					t.Fatalf("publish %d: seq %d, %v", i, a.res.Seq, a.err)
				}
			}
			ml.mu.Lock()
			entries := ml.cur.entries
			ml.mu.Unlock()
			if !tc.check(entries) {
				t.Fatalf("20 publishes went in %d entries, want %s", entries, tc.want)
			}
		})
	}
}
