package mledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/tenancy"
)

// TestPublishRolloverReopen: 1000 publishes with a rollover every 100
// entries are answered in order with gap-free sequences and read back;
// after Close, a new owner goes on at 1001 without recovery and reads the
// old messages from the bookies.
func TestPublishRolloverReopen(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{"name":"ORDERS"}`)
	roll := func(c *Config) { c.Limits.RolloverEntries = 100 }
	ml := e.open(testTopic, e.config(testTopic, nil, roll))

	// Windows of 50 async publishes (as nats bench does).
	var p asyncPublisher
	for i := range 1000 {
		p.publish(ml, fmt.Sprintf("acme.prod.orders.%d", i%7), fmt.Sprintf("msg-%d", i), PublishOptions{})
		if i%50 == 49 {
			p.wait(t)
		}
	}
	for i, a := range p.wait(t) {
		if a.err != nil || a.res.Seq != uint64(i+1) || a.res.Duplicate {
			t.Fatalf("publish %d: %+v, %v", i, a.res, a.err)
		}
	}
	checkAll := func(ml *ML, n int) {
		t.Helper()
		for i := range n {
			m, err := ml.Read(testCtx(t), uint64(i+1))
			if err != nil {
				t.Fatalf("read %d: %v", i+1, err)
			}
			if m.Seq != uint64(i+1) || string(m.Data) != fmt.Sprintf("msg-%d", i) || m.Subject != fmt.Sprintf("acme.prod.orders.%d", i%7) {
				t.Fatalf("read %d: %+v", i+1, m)
			}
		}
	}
	checkAll(ml, 1000)
	st := ml.State()
	if st.Msgs != 1000 || st.FirstSeq != 1 || st.LastSeq != 1000 || st.NumSubjects != 7 || st.FirstTime.IsZero() {
		t.Fatalf("state %+v", st)
	}
	if seq, n := ml.LastForSubject("acme.prod.orders.3"); seq != 998 || n != 143 {
		t.Fatalf("LastForSubject = %d, %d", seq, n)
	}
	tm, _, err := Load(testCtx(t), e.st, testTopic)
	if err != nil {
		t.Fatal(err)
	}
	// Contiguous ledgers of at least 100 entries (a switch happens at 100
	// when the previous rollover has finished, later otherwise).
	closed, next := 0, uint64(1)
	for _, l := range tm.Ledgers {
		if l.FirstSeq != next || l.State == LedgerClosed && l.Msgs < 100 {
			t.Fatalf("after 1000 entries, rollover at 100: %+v", tm.Ledgers)
		}
		if l.State == LedgerClosed {
			closed++
			next += uint64(l.Msgs)
		}
	}
	if closed < 2 || tm.Ledgers[0].Msgs != 100 { // the first switch uses Open's recorded spare
		t.Fatalf("%d rollovers for 1000 entries at 100: %+v", closed, tm.Ledgers)
	}
	t.Logf("%d ledgers closed", closed)
	if tm.Spare == 0 {
		t.Fatal("no spare ledger recorded")
	}
	if err := ml.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := publish(t, ml, "x", "late", PublishOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("publish after Close: %v", err)
	}
	tm, _, _ = Load(testCtx(t), e.st, testTopic)
	for _, l := range tm.Ledgers {
		if l.State != LedgerClosed {
			t.Fatalf("after Close ledger %d is %s", l.ID, l.State)
		}
	}
	if tm.Snapshot == nil || tm.Snapshot.LastSeq != 1000 || string(tm.Spec) != `{"name":"ORDERS"}` || tm.Spare != 0 {
		t.Fatalf("after Close: snapshot %+v spec %s spare %d", tm.Snapshot, tm.Spec, tm.Spare)
	}
	if ids := e.ledgersOf(testTopic); len(ids) != len(tm.Ledgers) { // the spare was deleted
		t.Fatalf("after Close: ledgers %v, listed %+v", ids, tm.Ledgers)
	}

	ml2 := e.open(testTopic, e.config(testTopic, nil, roll))
	if seq := mustPublish(t, ml2, "acme.prod.orders.6", "msg-1000", PublishOptions{}); seq != 1001 {
		t.Fatalf("first publish after reopen: seq %d", seq)
	}
	checkAll(ml2, 1001)
	if sc := scanOrigins(t, ml2, 1); len(sc.local) != 1001 {
		t.Fatalf("%d local origins", len(sc.local))
	}
	if seq, n := ml2.LastForSubject("acme.prod.orders.6"); seq != 1001 || n != 143 {
		t.Fatalf("LastForSubject after reopen = %d, %d", seq, n)
	}
}

// TestTakeoverAfterCrash: an owner crashes (Drop) with publishes in
// flight; the next owner recovers every acknowledged message, goes on
// gap-free, still knows the msg ids and the subject index.
func TestTakeoverAfterCrash(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	roll := func(c *Config) { c.Limits.RolloverEntries = 50 }
	ml := e.open(testTopic, e.config(testTopic, nil, roll))
	for i := range 120 { // some acknowledged before the crash
		mustPublish(t, ml, fmt.Sprintf("s.%d", i%5), fmt.Sprintf("m%d", i), PublishOptions{MsgID: fmt.Sprintf("id-%d", i)})
	}
	// Publish on with up to 64 in flight until the ML stops; crash (Drop)
	// when the 100th of these is acknowledged, with others in flight.
	var p asyncPublisher
	window := make(chan struct{}, 64)
	hundred := make(chan struct{})
	var oks atomic.Int64
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 120; i < 5000; i++ {
			select {
			case window <- struct{}{}:
			case <-ml.Done():
				return
			}
			p.publishThen(ml, fmt.Sprintf("s.%d", i%5), fmt.Sprintf("m%d", i), PublishOptions{MsgID: fmt.Sprintf("id-%d", i)},
				func(_ PubResult, err error) {
					if err == nil && oks.Add(1) == 100 {
						close(hundred)
					}
					<-window
				})
		}
	}()
	select {
	case <-hundred:
	case <-time.After(60 * time.Second):
		t.Fatal("in-flight publishes not acknowledged")
	}
	ml.Drop() // the crash: in flight adds stop, the ledger stays OPEN
	<-stopped
	answers := p.wait(t)
	acked := map[uint64]int{} // seq → publish index
	for i := range 120 {
		acked[uint64(i+1)] = i
	}
	for j, a := range answers {
		switch {
		case a.err == nil:
			acked[a.res.Seq] = 120 + j
		case !errors.Is(a.err, ErrNotOwner):
			t.Fatalf("publish %d after the crash: %v, want ErrNotOwner", 120+j, a.err)
		}
	}
	t.Logf("%d of %d acknowledged before the crash", len(acked), 120+len(answers))

	ml2 := e.open(testTopic, e.config(testTopic, nil, roll))
	st := ml2.State()
	if int(st.LastSeq) < len(acked) || st.FirstSeq != 1 {
		t.Fatalf("after takeover %+v, %d acknowledged", st, len(acked))
	}
	for seq, i := range acked {
		m, err := ml2.Read(testCtx(t), seq)
		if err != nil || string(m.Data) != fmt.Sprintf("m%d", i) {
			t.Fatalf("acknowledged seq %d (publish %d): %q, %v", seq, i, m.Data, err)
		}
	}
	// Every recovered message is some publish, in order, no gaps.
	counts := map[string]uint64{}
	last := map[string]uint64{}
	for s := uint64(1); s <= st.LastSeq; s++ {
		m, err := ml2.Read(testCtx(t), s)
		if err != nil || string(m.Data) != fmt.Sprintf("m%d", s-1) {
			t.Fatalf("seq %d after takeover: %q, %v", s, m.Data, err)
		}
		counts[m.Subject]++
		last[m.Subject] = s
	}
	for subj, n := range counts {
		if gs, gn := ml2.LastForSubject(subj); gs != last[subj] || gn != n {
			t.Fatalf("subject %s: %d, %d; want %d, %d", subj, gs, gn, last[subj], n)
		}
	}
	scanOrigins(t, ml2, 1)
	next := mustPublish(t, ml2, "s.0", "after", PublishOptions{})
	if next != st.LastSeq+1 {
		t.Fatalf("next seq %d after %d", next, st.LastSeq)
	}
	if m, _ := ml2.Read(testCtx(t), next); m.Origin.Seq != next {
		t.Fatalf("local origin after takeover %+v", m.Origin)
	}
	// A msg id acknowledged before the crash is still a duplicate.
	r, err := publish(t, ml2, "s.1", "again", PublishOptions{MsgID: "id-7"})
	if err != nil || !r.Duplicate || r.Seq != 8 {
		t.Fatalf("repeated id-7: %+v, %v", r, err)
	}
	// And one written after the last snapshot (recovered from the entries).
	var latest uint64
	for seq := range acked {
		latest = max(latest, seq)
	}
	r, err = publish(t, ml2, "s.1", "again", PublishOptions{MsgID: fmt.Sprintf("id-%d", latest-1)})
	if err != nil || !r.Duplicate || r.Seq != latest {
		t.Fatalf("repeated id-%d: %+v, %v", latest-1, r, err)
	}
}

// TestOldOwnerLoses: once another owner opened the topic, the old ML's
// next publish fails with ErrNotOwner, OnLost is called once, and its
// conditioned writes change nothing in etcd.
func TestOldOwnerLoses(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{"v":1}`)
	lost1 := newLost()
	ml1 := e.open(testTopic, e.config(testTopic, lost1))
	for i := range 5 {
		mustPublish(t, ml1, "a", fmt.Sprint(i), PublishOptions{})
	}
	ml2 := e.open(testTopic, e.config(testTopic, nil))
	if _, err := publish(t, ml1, "a", "stale", PublishOptions{}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("old owner's publish: %v", err)
	}
	<-lost1.ch
	<-ml1.Done()
	if errs := lost1.calls(); len(errs) != 1 || !errors.Is(errs[0], ErrNotOwner) || !errors.Is(errs[0], ledger.ErrFenced) {
		t.Fatalf("OnLost calls: %v", errs)
	}
	if _, err := publish(t, ml1, "a", "later", PublishOptions{}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("publish after loss: %v", err)
	}
	if err := ml1.SetLimits(testCtx(t), Limits{}, []byte(`{"v":"old"}`)); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("SetLimits after loss: %v", err)
	}
	if err := ml1.Close(testCtx(t)); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("Close after loss: %v", err)
	}
	if seq := mustPublish(t, ml2, "a", "new owner", PublishOptions{}); seq != 6 {
		t.Fatalf("new owner's seq %d", seq)
	}

	// An old owner that has not noticed yet: its conditioned write fails
	// and changes nothing.
	lost2 := newLost()
	ml2.Drop()
	ml3 := e.open(testTopic, e.config(testTopic, lost2))
	ml4 := e.open(testTopic, e.config(testTopic, nil))
	if err := ml3.SetLimits(testCtx(t), Limits{MaxMsgs: 1}, []byte(`{"v":"stale"}`)); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("stale owner's SetLimits: %v", err)
	}
	<-lost2.ch
	if tm, _, _ := Load(testCtx(t), e.st, testTopic); string(tm.Spec) != `{"v":1}` || string(ml4.Spec()) != `{"v":1}` {
		t.Fatalf("etcd changed by a stale owner: spec %s", tm.Spec)
	}
	if ml4.State().LastSeq != 6 {
		t.Fatalf("new owner's state %+v", ml4.State())
	}
}

// TestPurgeKeepsCounter: Purge sets FirstSeq to LastSeq+1, the sequence
// goes on, counts reset, purged ledgers are deleted, and it survives a
// reopen.
func TestPurgeKeepsCounter(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	roll := func(c *Config) { c.Limits.RolloverEntries = 4 }
	ml := e.open(testTopic, e.config(testTopic, nil, roll))
	for i := range 10 {
		mustPublish(t, ml, fmt.Sprintf("p.%d", i%3), fmt.Sprint(i), PublishOptions{})
	}
	tm, _, _ := Load(testCtx(t), e.st, testTopic)
	n, err := ml.Purge(testCtx(t))
	if err != nil || n != 10 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	st := ml.State()
	if st.Msgs != 0 || st.FirstSeq != 11 || st.LastSeq != 10 || st.NumSubjects != 0 || st.Bytes != 0 {
		t.Fatalf("after purge: %+v", st)
	}
	if _, err := ml.Read(testCtx(t), 5); !errors.Is(err, ErrGone) {
		t.Fatalf("read purged: %v", err)
	}
	if seq, c := ml.LastForSubject("p.1"); seq != 0 || c != 0 {
		t.Fatalf("purged subject: %d %d", seq, c)
	}
	if seq := mustPublish(t, ml, "p.1", "after", PublishOptions{}); seq != 11 {
		t.Fatalf("after purge seq %d", seq)
	}
	if s := ml.Subjects(); len(s) != 1 || s["p.1"] != 1 {
		t.Fatalf("subjects %v", s)
	}
	for _, l := range tm.Ledgers { // every ledger from before the purge goes
		testutil.Eventually(t, fmt.Sprintf("ledger %d deleted", l.ID), 20*time.Second, func() bool {
			_, err := e.lc.Get(testCtx(t), l.ID)
			return errors.Is(err, ledger.ErrNoLedger)
		})
	}
	if err := ml.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	ml2 := e.open(testTopic, e.config(testTopic, nil, roll))
	if st := ml2.State(); st.FirstSeq != 11 || st.LastSeq != 11 || st.Msgs != 1 {
		t.Fatalf("after reopen: %+v", st)
	}
}

// TestLimits: MaxMsgs trims the oldest; DiscardNew refuses; MaxMsgSize
// refuses; reads below FirstSeq are gone.
func TestLimits(t *testing.T) {
	e := newEnv(t)
	t.Run("max msgs", func(t *testing.T) {
		name := tenancy.Name{Tenant: "acme", Namespace: "prod", Topic: "maxmsgs"}
		e.create(name, `{}`)
		ml := e.open(name, e.config(name, nil, func(c *Config) {
			c.Limits.MaxMsgs, c.Limits.RolloverEntries = 10, 5
		}))
		for i := range 27 {
			mustPublish(t, ml, fmt.Sprintf("m.%d", i%2), fmt.Sprint(i), PublishOptions{})
		}
		testutil.Eventually(t, "trimmed to 10", 20*time.Second, func() bool {
			st := ml.State()
			return st.FirstSeq == 18 && st.Msgs == 10
		})
		if _, err := ml.Read(testCtx(t), 3); !errors.Is(err, ErrGone) {
			t.Fatalf("read trimmed: %v", err)
		}
		if m, err := ml.Read(testCtx(t), 18); err != nil || string(m.Data) != "17" {
			t.Fatalf("read first: %q, %v", m.Data, err)
		}
		testutil.Eventually(t, "subject counts follow", 20*time.Second, func() bool {
			_, n0 := ml.LastForSubject("m.0")
			_, n1 := ml.LastForSubject("m.1")
			return n0 == 5 && n1 == 5
		})
		var tm TopicMeta
		defer func() {
			if t.Failed() {
				t.Logf("metadata: first %d ledgers %+v trash %v spare %d snapshot %+v", tm.FirstSeq, tm.Ledgers, tm.Trash, tm.Spare, tm.Snapshot)
			}
		}()
		testutil.Eventually(t, "trimmed ledgers deleted and FirstSeq persisted", 20*time.Second, func() bool {
			var err error
			tm, _, err = Load(testCtx(t), e.st, name)
			if err != nil || tm.FirstSeq != 18 || len(tm.Trash) != 0 {
				return false
			}
			listed := map[int64]bool{tm.Spare: true}
			for _, l := range tm.Ledgers { // none wholly below FirstSeq
				if l.State == LedgerClosed && l.end() < 18 {
					return false
				}
				listed[l.ID] = true
			}
			for _, id := range e.ledgersOf(name) { // and no other left
				if !listed[id] {
					return false
				}
			}
			return true
		})
	})
	t.Run("discard new", func(t *testing.T) {
		name := tenancy.Name{Tenant: "acme", Namespace: "prod", Topic: "discardnew"}
		e.create(name, `{}`)
		ml := e.open(name, e.config(name, nil, func(c *Config) {
			c.Limits.MaxMsgs, c.Limits.DiscardNew = 3, true
		}))
		for i := range 3 {
			mustPublish(t, ml, "d", fmt.Sprint(i), PublishOptions{})
		}
		if _, err := publish(t, ml, "d", "x", PublishOptions{}); !errors.Is(err, ErrStoreFull) {
			t.Fatalf("4th with discard new: %v", err)
		}
		if st := ml.State(); st.LastSeq != 3 || st.Msgs != 3 {
			t.Fatalf("state %+v", st)
		}
	})
	t.Run("max msg size", func(t *testing.T) {
		name := tenancy.Name{Tenant: "acme", Namespace: "prod", Topic: "msgsize"}
		e.create(name, `{}`)
		ml := e.open(name, e.config(name, nil, func(c *Config) { c.Limits.MaxMsgSize = 10 }))
		if _, err := publish(t, ml, "s", "12345678901", PublishOptions{}); !errors.Is(err, ErrMsgTooBig) {
			t.Fatalf("11 bytes: %v", err)
		}
		if seq := mustPublish(t, ml, "s", "1234567890", PublishOptions{}); seq != 1 {
			t.Fatalf("10 bytes: seq %d", seq)
		}
		if _, err := ml.Read(testCtx(t), 2); !errors.Is(err, ErrNotFound) {
			t.Fatalf("read above last: %v", err)
		}
	})
}

// TestExpectationsAndNotify: the JetStream expectation headers, dedup,
// Notify and SeqAtTime through the ML.
func TestExpectationsAndNotify(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	var clock atomicTime
	clock.set(t0)
	ml := e.open(testTopic, e.config(testTopic, nil, func(c *Config) { c.Now = clock.now }))
	ch := ml.Notify()
	mustPublish(t, ml, "a", "1", PublishOptions{MsgID: "one"})
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("Notify not closed by a publish")
	}
	clock.set(t0.Add(time.Minute))
	mustPublish(t, ml, "b", "2", PublishOptions{ExpectedLastSeq: u64(1), ExpectedLastMsgID: str("one")})
	var wls *WrongLastSeqError
	if _, err := publish(t, ml, "a", "3", PublishOptions{ExpectedLastSubjectSeq: u64(2)}); !errors.As(err, &wls) || wls.Actual != 1 {
		t.Fatalf("wrong subject seq: %v", err)
	}
	var wlm *WrongLastMsgIDError
	if _, err := publish(t, ml, "a", "3", PublishOptions{ExpectedLastMsgID: str("one")}); !errors.As(err, &wlm) || wlm.Actual != "" {
		t.Fatalf("wrong last msg id: %v", err)
	}
	if r, err := publish(t, ml, "a", "dup", PublishOptions{MsgID: "one"}); err != nil || r != (PubResult{Seq: 1, Duplicate: true}) {
		t.Fatalf("duplicate: %+v %v", r, err)
	}
	clock.set(t0.Add(3 * time.Minute)) // past the 2 min window
	if r, err := publish(t, ml, "a", "again", PublishOptions{MsgID: "one"}); err != nil || r.Duplicate || r.Seq != 3 {
		t.Fatalf("id after the window: %+v %v", r, err)
	}
	for _, c := range []struct {
		at   time.Time
		want uint64
	}{{t0.Add(-time.Hour), 1}, {t0, 1}, {t0.Add(time.Second), 2}, {t0.Add(2 * time.Minute), 3}, {t0.Add(time.Hour), 4}} {
		if got, err := ml.SeqAtTime(testCtx(t), c.at); err != nil || got != c.want {
			t.Errorf("SeqAtTime(%v) = %d, %v; want %d", c.at, got, err, c.want)
		}
	}
	m, _ := ml.Read(testCtx(t), 1)
	if !bytes.Equal(m.Header, msgHeader("one")) || !m.Time.Equal(t0) {
		t.Fatalf("stored message %+v", m)
	}
}

// TestDeleteTopic: the metadata key and every ledger go.
func TestDeleteTopic(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	ml := e.open(testTopic, e.config(testTopic, nil, func(c *Config) { c.Limits.RolloverEntries = 3 }))
	for i := range 7 {
		mustPublish(t, ml, "x", fmt.Sprint(i), PublishOptions{})
	}
	before := e.ledgersOf(testTopic) // the list's and the spare
	if len(before) < 2 {
		t.Fatalf("ledgers before delete: %v", before)
	}
	if err := ml.DeleteTopic(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(testCtx(t), e.st, testTopic); !errors.Is(err, ErrNotFound) {
		t.Fatalf("load after delete: %v", err)
	}
	if ids := e.ledgersOf(testTopic); len(ids) != 0 {
		t.Fatalf("ledgers left after delete: %v (had %v)", ids, before)
	}
	if _, err := publish(t, ml, "x", "late", PublishOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("publish after delete: %v", err)
	}
	names, err := List(testCtx(t), e.st)
	if err != nil || len(names) != 0 {
		t.Fatalf("List after delete: %v, %v", names, err)
	}
	if _, err := Open(testCtx(t), e.config(testTopic, nil), testTopic); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open deleted: %v", err)
	}
}

func TestCreateLoadList(t *testing.T) {
	st := newEnv(t).st
	n2 := tenancy.Name{Tenant: "acme", Namespace: "dev", Topic: "b"}
	for _, n := range []tenancy.Name{testTopic, n2} {
		if err := Create(testCtx(t), st, n, []byte(`{"x":1}`), t0); err != nil {
			t.Fatal(err)
		}
	}
	if err := Create(testCtx(t), st, testTopic, nil, t0); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	tm, rev, err := Load(testCtx(t), st, testTopic)
	if err != nil || rev == 0 || tm.FirstSeq != 1 || !tm.Created.Equal(t0) || string(tm.Spec) != `{"x":1}` {
		t.Fatalf("load: %+v %d %v", tm, rev, err)
	}
	names, err := List(testCtx(t), st)
	if err != nil || len(names) != 2 || names[0] != n2 || names[1] != testTopic {
		t.Fatalf("list: %v %v", names, err)
	}
	if _, _, err := Load(testCtx(t), st, tenancy.Name{Tenant: "a", Namespace: "b", Topic: "c"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("load missing: %v", err)
	}
}

// TestWriterFailureStops: a writer that fails for another reason than a
// new owner (no bookies left to replace failed ones) stops the ML too,
// OnLost gets that error, and the next owner recovers what was
// acknowledged.
func TestWriterFailureStops(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	lc := e.bk.Client(t, func(c *ledger.Config) {
		c.AddTimeout, c.ReplaceTimeout = time.Second, 300*time.Millisecond
	})
	lost := newLost()
	var self atomic.Pointer[ML]
	closed := make(chan error, 1)
	ml := e.open(testTopic, e.config(testTopic, nil, func(c *Config) {
		c.Ledgers = lc
		c.OnLost = func(err error) { // may use the ML: here, Close it
			lost.onLost(err)
			closed <- self.Load().Close(context.Background())
		}
	}))
	self.Store(ml)
	for i := range 10 {
		mustPublish(t, ml, "w", fmt.Sprint(i), PublishOptions{})
	}
	e.bk.Stop("k1")
	e.bk.Stop("k2") // every ensemble of 3 out of 4 loses a bookie, with no replacement
	var err error
	for i := 0; err == nil && i < 10; i++ { // until a write set holds a stopped bookie
		_, err = publish(t, ml, "w", "lost", PublishOptions{})
	}
	if err == nil || errors.Is(err, ErrNotOwner) || !errors.Is(err, ledger.ErrNotEnoughBookies) {
		t.Fatalf("publish with 2 of 4 bookies: %v", err)
	}
	<-lost.ch
	if errs := lost.calls(); len(errs) != 1 || !errors.Is(errs[0], ledger.ErrNotEnoughBookies) {
		t.Fatalf("OnLost: %v", errs)
	}
	if err := <-closed; !errors.Is(err, ledger.ErrNotEnoughBookies) {
		t.Fatalf("Close from OnLost: %v", err)
	}
	e.bk.Restart("k1")
	e.bk.Restart("k2")
	ml2 := e.open(testTopic, e.config(testTopic, nil))
	if st := ml2.State(); st.LastSeq < 10 {
		t.Fatalf("after recovery: %+v", st)
	}
	for s := uint64(1); s <= 10; s++ {
		if m, err := ml2.Read(testCtx(t), s); err != nil || string(m.Data) != fmt.Sprint(s-1) {
			t.Fatalf("seq %d: %q %v", s, m.Data, err)
		}
	}
}

// TestLeadershipCond: ownership through an election (as brokers hold
// bundles). The old leader's ML learns of the loss from its next lazy
// metadata write (a trim), not from a fenced add.
func TestLeadershipCond(t *testing.T) {
	e := newEnv(t)
	e.create(testTopic, `{}`)
	ctx := testCtx(t)
	lead := func(value string) *meta.Leadership {
		lease, err := e.st.GrantLease(ctx, meta.MinLeaseTTL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lease.Revoke(context.Background()) })
		l, err := e.st.Campaign(ctx, "owners/bundle-1", value, lease)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l1 := lead("broker-1")
	lost := newLost()
	ml1 := e.open(testTopic, e.config(testTopic, lost, func(c *Config) { c.Cond = l1.Cond() }))
	for i := range 3 {
		mustPublish(t, ml1, "l", fmt.Sprint(i), PublishOptions{})
	}
	if err := l1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := lead("broker-2")
	ml2 := e.open(testTopic, e.config(testTopic, nil, func(c *Config) { c.Cond = l2.Cond() }))
	if err := ml1.TrimTo(ctx, 3); err != nil { // in memory; written lazily, and refused
		t.Fatal(err)
	}
	<-lost.ch
	if errs := lost.calls(); len(errs) != 1 || !errors.Is(errs[0], ErrNotOwner) || !errors.Is(errs[0], meta.ErrConflict) {
		t.Fatalf("OnLost: %v", errs)
	}
	if tm, _, _ := Load(ctx, e.st, testTopic); tm.FirstSeq != 1 {
		t.Fatalf("the old leader's trim reached etcd: first %d", tm.FirstSeq)
	}
	if seq := mustPublish(t, ml2, "l", "3", PublishOptions{}); seq != 4 {
		t.Fatalf("new leader's seq %d", seq)
	}
}

// TestRecoverSpareAndHoles: takeover rules for a crash mid-rollover,
// built directly with the ledger client: a spare whose first message
// continues the list is chained (its messages may have been
// acknowledged); a spare that does not is dropped; a ledger after one
// that recovered short is dropped with everything after it. Each case
// runs with version 2 entries (batches of up to 2 messages) and with
// version 1 entries (one message each, as written before batching: a
// crash during an upgrade).
func TestRecoverSpareAndHoles(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	for _, v1 := range []bool{false, true} {
		// write makes an OPEN ledger holding seqs from..to (left open: the
		// crashed owner's writer).
		write := func(from, to uint64) int64 {
			l, err := e.lc.Create(ctx, ledger.CreateOptions{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2, Password: ledgerPassword})
			if err != nil {
				t.Fatal(err)
			}
			for s := from; s <= to; {
				var batch []Message
				for ; s <= to && len(batch) < 2; s++ {
					batch = append(batch, Message{Seq: s, Subject: "r", Data: []byte(fmt.Sprint(s)), Time: t0.Add(time.Duration(s) * time.Second)})
				}
				entry := EncodeBatch(nil, batch, Local{})
				if v1 {
					s = batch[0].Seq + 1
					entry = encodeV1(nil, &batch[0])
				}
				if _, err := l.Append(ctx, entry); err != nil {
					t.Fatal(err)
				}
			}
			return l.ID()
		}
		put := func(name tenancy.Name, tm TopicMeta) {
			tm.Created, tm.FirstSeq = t0, 1
			if _, err := meta.PutJSON(ctx, e.st, TopicKey(name), tm); err != nil {
				t.Fatal(err)
			}
		}
		missingID := int64(1 << 40)
		missingLedger := func() int64 { missingID++; return missingID }
		open := func(id int64, first uint64) LedgerInfo {
			return LedgerInfo{ID: id, FirstSeq: first, Entries: -1, Msgs: -1, State: LedgerOpen}
		}
		for _, c := range []struct {
			topic    string
			tm       func() TopicMeta
			wantLast uint64
		}{
			{"chained", func() TopicMeta {
				return TopicMeta{Ledgers: []LedgerInfo{open(write(1, 5), 1)}, Spare: write(6, 8)}
			}, 8},
			{"spare-unused", func() TopicMeta {
				return TopicMeta{Ledgers: []LedgerInfo{open(write(1, 5), 1)}, Spare: write(9, 9)}
			}, 5},
			{"short-ledger", func() TopicMeta {
				return TopicMeta{Ledgers: []LedgerInfo{
					open(write(1, 3), 1), // its 4, 5 never reached the bookies
					open(write(6, 7), 6),
				}, Spare: write(8, 8)}
			}, 3},
			// Ledgers named in the list but never created (or deleted by
			// an owner whose metadata write looked failed but was not):
			// nothing in them was acknowledged; they are dropped.
			{"missing-last", func() TopicMeta {
				return TopicMeta{Ledgers: []LedgerInfo{open(write(1, 5), 1), open(missingLedger(), 6)}}
			}, 5},
			{"missing-spare", func() TopicMeta {
				return TopicMeta{Ledgers: []LedgerInfo{open(write(1, 4), 1)}, Spare: missingLedger()}
			}, 4},
			{"missing-only", func() TopicMeta {
				return TopicMeta{Ledgers: []LedgerInfo{open(missingLedger(), 1)}, Spare: missingLedger()}
			}, 0},
		} {
			name := tenancy.Name{Tenant: "acme", Namespace: "rec", Topic: fmt.Sprintf("%s-v1-%v", c.topic, v1)}
			tm := c.tm()
			put(name, tm)
			ml := e.open(name, e.config(name, nil))
			if st := ml.State(); st.LastSeq != c.wantLast || st.Msgs != c.wantLast {
				t.Fatalf("%s: state %+v, want last %d", name.Topic, st, c.wantLast)
			}
			for s := uint64(1); s <= c.wantLast; s++ {
				if m, err := ml.Read(ctx, s); err != nil || string(m.Data) != fmt.Sprint(s) {
					t.Fatalf("%s: seq %d: %q %v", name.Topic, s, m.Data, err)
				}
			}
			if seq := mustPublish(t, ml, "r", "next", PublishOptions{}); seq != c.wantLast+1 {
				t.Fatalf("%s: next seq %d", name.Topic, seq)
			}
			// Every ledger of the old list not kept was deleted.
			got, _, _ := Load(ctx, e.st, name)
			kept := map[int64]bool{}
			for _, l := range got.Ledgers {
				kept[l.ID] = true
				if l.State == LedgerClosed && l.Msgs > 0 && (l.FirstTime.IsZero() || l.LastTime.IsZero()) {
					t.Fatalf("%s: recovered ledger without times: %+v", name.Topic, l)
				}
			}
			for _, l := range append(tm.Ledgers, LedgerInfo{ID: tm.Spare}) {
				if l.ID == 0 {
					continue
				}
				if _, err := e.lc.Get(ctx, l.ID); !kept[l.ID] && !errors.Is(err, ledger.ErrNoLedger) {
					t.Fatalf("%s: ledger %d neither kept nor deleted: %v", name.Topic, l.ID, err)
				}
			}
		}
	}
}
