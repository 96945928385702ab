package mledger

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func u64(v uint64) *uint64 { return &v }
func str(s string) *string { return &s }

// pub checks and assigns a message of size bytes at now, confirming it
// at once into ledger id; it returns the check's outcome.
func pub(c *core, id int64, subject, msgID string, size int64, now time.Time, o PublishOptions) (uint64, bool, error) {
	o.MsgID = msgID
	dup, isDup, err := c.check(subject, 0, int(size), int(size), &o, now)
	if err != nil || isDup {
		return dup, isDup, err
	}
	seq, t := c.assign(subject, msgID, size, now, nil)
	c.confirm(id, &Message{Seq: seq, Subject: subject, Time: t}, msgID, size, true)
	return seq, false, nil
}

func TestCheckOrder(t *testing.T) {
	c := newCore(Limits{MaxMsgSize: 10, MaxMsgs: 2, DiscardNew: true}, 100, 1)
	c.addLedger(1, 1)
	if _, _, err := pub(c, 1, "a", "id1", 5, t0, PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	// Size first, even for a duplicate with every expectation wrong.
	all := PublishOptions{ExpectedLastSeq: u64(9), ExpectedLastMsgID: str("zz")}
	if _, _, err := pub(c, 1, "a", "id1", 11, t0, all); !errors.Is(err, ErrMsgTooBig) {
		t.Fatalf("size: %v", err)
	}
	if _, _, err := c.check("a", 0, 5, 101, &PublishOptions{}, t0); !errors.Is(err, ErrMsgTooBig) {
		t.Fatalf("entry size: %v", err)
	}
	// Then the duplicate: the original's sequence, expectations ignored.
	if seq, dup, err := pub(c, 1, "a", "id1", 5, t0, all); err != nil || !dup || seq != 1 {
		t.Fatalf("dup: %d %v %v", seq, dup, err)
	}
	// Then the expected last sequence.
	var wls *WrongLastSeqError
	if _, _, err := pub(c, 1, "a", "", 5, t0, all); !errors.As(err, &wls) || wls.Actual != 1 {
		t.Fatalf("expected last seq: %v", err)
	}
	// Then the last subject sequence (default subject, then another).
	o := PublishOptions{ExpectedLastSeq: u64(1), ExpectedLastSubjectSeq: u64(0), ExpectedLastMsgID: str("zz")}
	if _, _, err := pub(c, 1, "a", "", 5, t0, o); !errors.As(err, &wls) || wls.Actual != 1 {
		t.Fatalf("expected last subject seq: %v", err)
	}
	o.ExpectedLastSubjectSeqSubject = "b"
	var wlm *WrongLastMsgIDError
	if _, _, err := pub(c, 1, "a", "", 5, t0, o); !errors.As(err, &wlm) || wlm.Actual != "id1" {
		t.Fatalf("expected last msg id: %v", err)
	}
	o.ExpectedLastMsgID = str("id1")
	if seq, _, err := pub(c, 1, "a", "", 5, t0, o); err != nil || seq != 2 {
		t.Fatalf("all expectations met: %d %v", seq, err)
	}
	// Last: DiscardNew at MaxMsgs.
	if _, _, err := pub(c, 1, "a", "", 5, t0, PublishOptions{ExpectedLastMsgID: str("")}); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("discard new: %v", err)
	}
	if c.head.msgID != "" {
		t.Fatalf("last msg id after a message without one: %q", c.head.msgID)
	}
}

func TestCheckCountsUnconfirmed(t *testing.T) {
	c := newCore(Limits{}, 1000, 1)
	c.addLedger(1, 1)
	o := PublishOptions{MsgID: "m"}
	if _, _, err := c.check("s", 0, 1, 10, &o, t0); err != nil {
		t.Fatal(err)
	}
	c.assign("s", "m", 10, t0, nil) // appended, not confirmed
	if dup, isDup, _ := c.check("s", 0, 1, 10, &o, t0); dup != 1 || !isDup {
		t.Fatalf("duplicate of an unconfirmed message: dup %d", dup)
	}
	o = PublishOptions{ExpectedLastSeq: u64(1), ExpectedLastSubjectSeq: u64(1), ExpectedLastMsgID: str("m")}
	if _, _, err := c.check("s", 0, 1, 10, &o, t0); err != nil {
		t.Fatalf("expectations against unconfirmed state: %v", err)
	}
	if seq, n := c.subjects.lastConf("s", c.first); seq != 0 || n != 0 {
		t.Fatalf("confirmed view has the unconfirmed message: %d %d", seq, n)
	}
}

func TestPublishTimeNeverGoesBack(t *testing.T) {
	c := newCore(Limits{}, 1000, 1)
	_, t1 := c.assign("a", "", 1, t0.Add(time.Second), nil)
	_, t2 := c.assign("a", "", 1, t0, nil)
	if !t2.Equal(t1) {
		t.Fatalf("second time %v before first %v", t2, t1)
	}
}

func TestDedupWindow(t *testing.T) {
	d := newDedupWindow(time.Minute)
	d.add("a", 1, t0)
	d.add("b", 2, t0.Add(30*time.Second))
	if s, ok := d.lookup("a", t0.Add(59*time.Second)); !ok || s != 1 {
		t.Fatalf("a within window: %d %v", s, ok)
	}
	if _, ok := d.lookup("a", t0.Add(time.Minute)); ok {
		t.Fatal("a at the window's end still a duplicate")
	}
	d.expire(t0.Add(time.Minute))
	if d.len() != 1 {
		t.Fatalf("after expiry %d ids", d.len())
	}
	d.add("a", 3, t0.Add(70*time.Second)) // re-used after expiry
	d.expire(t0.Add(89 * time.Second))    // b (30 s) still in: 59 s old
	if s, ok := d.lookup("a", t0.Add(89*time.Second)); !ok || s != 3 {
		t.Fatalf("re-used id: %d %v", s, ok)
	}
	got := d.snapshot(2, t0.Add(89*time.Second), 10)
	if len(got) != 1 || got[0].ID != "b" {
		t.Fatalf("snapshot up to 2: %+v", got)
	}
	got = d.snapshot(10, t0.Add(89*time.Second), 1)
	if len(got) != 1 || got[0].ID != "a" {
		t.Fatalf("snapshot, newest 1: %+v", got)
	}
}

// info is a msgInfo over known messages from a sequence on.
type info struct {
	from  uint64
	size  map[uint64]int64
	times map[uint64]time.Time
}

func (i *info) From() uint64 { return i.from }
func (i *info) Info(s uint64) (int64, time.Time) {
	return i.size[s], i.times[s]
}

// threeLedgers is a core with ledgers 1: seqs 1-10 (10 B each), 2: 11-20
// (20 B each), 3 (open): 21-25 (30 B each), one second apart from t0.
func threeLedgers(lim Limits) (*core, *info) {
	c := newCore(lim, 1000, 1)
	in := &info{from: 1, size: map[uint64]int64{}, times: map[uint64]time.Time{}}
	for l, n := range []int{10, 10, 5} {
		id := int64(l + 1)
		c.addLedger(id, c.head.seq+1)
		for range n {
			now := t0.Add(time.Duration(c.head.seq) * time.Second)
			seq, _, _ := pub(c, id, "s", "", int64(10*(l+1)), now, PublishOptions{})
			in.size[seq], in.times[seq] = int64(10*(l+1)), now
		}
		if l < 2 {
			c.closeLedger(id, int64(n), int64(n*10*(l+1)))
		}
	}
	return c, in
}

func TestRetentionArithmetic(t *testing.T) {
	now := t0.Add(25 * time.Second) // seq s was published at t0+(s-1)s
	unknown := &info{from: 21}      // only the open ledger cached
	for _, tc := range []struct {
		name string
		lim  Limits
		in   *info // nil: everything known
		want uint64
	}{
		{"none", Limits{}, nil, 1},
		{"max msgs", Limits{MaxMsgs: 7}, nil, 19},
		{"max msgs, discard new", Limits{MaxMsgs: 7, DiscardNew: true}, nil, 1},
		{"max bytes exact", Limits{MaxBytes: 150 + 20*3}, nil, 18},
		{"max bytes whole ledgers", Limits{MaxBytes: 150 + 200}, unknown, 11},
		{"max bytes by average", Limits{MaxBytes: 150 + 200 + 35}, unknown, 8}, // 7 × 10 B
		{"max age exact", Limits{MaxAge: 10 * time.Second}, nil, 17},           // t ≤ now-MaxAge expires
		{"max age whole ledger only", Limits{MaxAge: 12 * time.Second}, unknown, 11},
		{"max age into the cached ledger", Limits{MaxAge: 2 * time.Second}, unknown, 25},
	} {
		c, all := threeLedgers(tc.lim)
		in := tc.in
		if in == nil {
			in = all
		} else {
			in.size, in.times = all.size, all.times
		}
		if got := c.retainFrom(now, in); got != tc.want {
			t.Errorf("%s: retainFrom = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestTrimBytesAndForget(t *testing.T) {
	c, all := threeLedgers(Limits{})
	if c.live != 100+200+150 {
		t.Fatalf("live %d", c.live)
	}
	unknown := &info{from: 21, size: all.size, times: all.times}
	c.trim(5, unknown) // 4 of ledger 1 at its 10 B average
	if c.live != 450-40 || c.msgs() != 21 {
		t.Fatalf("after trim to 5: live %d msgs %d", c.live, c.msgs())
	}
	c.trim(14, unknown) // rest of ledger 1 exact, 3 of ledger 2
	if c.live != 450-100-60 || c.first != 14 {
		t.Fatalf("after trim to 14: live %d first %d", c.live, c.first)
	}
	// Ledgers 1 and 2 were written here: breakdowns known.
	if k, _, l := c.nextForget(); k != forgetLedger || l.ID != 1 {
		t.Fatalf("next forget %v %v", k, l)
	}
	c.forgetWholeLedger(c.ledgers[0])
	for s := uint64(11); s < 14; s++ {
		k, seq, _ := c.nextForget()
		if k != forgetMsg || seq != s {
			t.Fatalf("forget step %d: %v %d", s, k, seq)
		}
		if err := c.forgetMsg(seq, "s"); err != nil {
			t.Fatal(err)
		}
	}
	if k, _, _ := c.nextForget(); k != forgetNone {
		t.Fatalf("after catching up: %v", k)
	}
	if seq, n := c.subjects.lastConf("s", c.first); seq != 25 || n != 12 {
		t.Fatalf("subject s: last %d count %d", seq, n)
	}
	if gone := c.removeDone(); len(gone) != 1 || gone[0] != 1 {
		t.Fatalf("removed %v", gone)
	}
	// Trim everything: the open ledger too; the counts reset at once.
	c.trim(100, unknown)
	if c.first != 26 || c.msgs() != 0 || c.live != 0 {
		t.Fatalf("after trim all: first %d msgs %d live %d", c.first, c.msgs(), c.live)
	}
	if k, _, _ := c.nextForget(); k != forgetAll {
		t.Fatalf("next forget %v", k)
	}
	c.forgetAllConfirmed()
	if len(c.subjects.m) != 0 || c.subjects.numConf != 0 {
		t.Fatalf("subjects after purge: %v", c.subjects.m)
	}
	if gone := c.removeDone(); len(gone) != 1 || gone[0] != 2 {
		t.Fatalf("removed %v", gone)
	}
}

func TestSnapshotRestore(t *testing.T) {
	c, all := threeLedgers(Limits{})
	c.head.msgID, c.conf.msgID = "last", "last"
	c.dedup.add("x", 24, t0.Add(23*time.Second))
	c.trim(15, &info{from: 21, size: all.size, times: all.times})
	c.closeLedger(3, 5, 150)
	tm := TopicMeta{FirstSeq: c.first, Ledgers: c.ledgerInfos(), Snapshot: c.snapshot(t0.Add(30*time.Second), 100)}
	r, from, err := restoreCore(&tm, Limits{}, 1000, testTopic, "")
	if err != nil {
		t.Fatal(err)
	}
	if from != 26 || r.first != 15 || r.conf.seq != 25 || r.head.msgID != "last" || r.counted != 1 {
		t.Fatalf("restored from %d first %d last %d msgid %q counted %d", from, r.first, r.conf.seq, r.head.msgID, r.counted)
	}
	if r.live != c.live || r.msgs() != 11 {
		t.Fatalf("restored live %d (had %d) msgs %d", r.live, c.live, r.msgs())
	}
	if s, ok := r.dedup.lookup("x", t0.Add(60*time.Second)); !ok || s != 24 {
		t.Fatalf("restored dedup: %d %v", s, ok)
	}
	if seq, n := r.subjects.lastConf("s", r.first); seq != 25 || n != 25 {
		t.Fatalf("restored subject: %d %d (counts from %d)", seq, n, r.counted)
	}
	// A hole in the list is refused.
	tm.Ledgers[1].FirstSeq++
	if _, _, err := restoreCore(&tm, Limits{}, 1000, testTopic, ""); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("hole: %v", err)
	}
}
