package mledger

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/tenancy"
)

const testInc = "inc-local"

func originCore() *core {
	c := newCore(Limits{}, 1000, 1)
	c.setOrigin(testTopic, testRegion, testInc)
	c.addLedger(1, 1)
	return c
}

// offer checks and appends a publish as Publish does (local when from is
// nil) and returns check's outcome and the message appended.
func offer(c *core, from *Origin, o PublishOptions, now time.Time) (dup uint64, isDup bool, m Message, err error) {
	o.Origin = from
	t := c.publishTime(now)
	m = Message{Seq: c.head.seq + 1, Subject: "s", Time: t, Origin: c.localOrigin(t)}
	if from != nil {
		m.Origin = *from
	}
	if dup, isDup, err = c.check(m.Subject, 0, 10, 10, &o, now); err != nil || isDup {
		return dup, isDup, Message{}, err
	}
	m.Seq, _ = c.assign(m.Subject, o.MsgID, 10, now, from)
	return 0, false, m, nil
}

func eu(inc string, seq uint64) *Origin {
	return &Origin{Region: "eu-west", Incarnation: inc, Seq: seq, Time: t0.Add(-time.Minute)}
}

// TestCoreOrigins: local messages take the local origin sequences; the
// receiver rule on replicated ones (store HWM+1, duplicate at or below
// with the stored message's sequence, gap above, a new incarnation from
// 1, malformed and own-region origins refused, msg ids and expectations
// not applied); the confirmed marks follow confirmations; gap records;
// snapshot and restore, with a gap record lost after the snapshot
// counted again from the jump of the next replayed message.
func TestCoreOrigins(t *testing.T) {
	c := originCore()
	var appended []Message
	mustOffer := func(from *Origin, o PublishOptions) Message {
		t.Helper()
		_, isDup, m, err := offer(c, from, o, t0)
		if err != nil || isDup {
			t.Fatalf("offer %+v: dup %v, %v", from, isDup, err)
		}
		appended = append(appended, m)
		return m
	}
	if m := mustOffer(nil, PublishOptions{MsgID: "a"}); m.Origin != (Origin{Region: testRegion, Incarnation: testInc, Seq: 1, Time: t0}) {
		t.Fatalf("local origin %+v", m.Origin)
	}
	s1 := eu("E1", 0).Stream(c.topic)
	mustOffer(eu("E1", 1), PublishOptions{MsgID: "a", ExpectedLastSeq: u64(99)}) // id and expectation not applied
	if dup, isDup, _, err := offer(c, eu("E1", 1), PublishOptions{}, t0); err != nil || !isDup || dup != 2 {
		t.Fatalf("replicated duplicate of the last: %d %v %v", dup, isDup, err)
	}
	var gap *OriginGapError
	if _, _, _, err := offer(c, eu("E1", 3), PublishOptions{}, t0); !errors.As(err, &gap) || gap.Expected != 2 {
		t.Fatalf("gap: %v", err)
	}
	mustOffer(eu("E1", 2), PublishOptions{})
	if dup, isDup, _, err := offer(c, eu("E1", 1), PublishOptions{}, t0); err != nil || !isDup || dup != 0 {
		t.Fatalf("replicated duplicate below the last: %d %v %v", dup, isDup, err)
	}
	mustOffer(eu("E2", 1), PublishOptions{}) // a new incarnation is a new stream
	if m := mustOffer(nil, PublishOptions{MsgID: "b"}); m.Origin.Seq != 2 {
		t.Fatalf("second local origin %+v", m.Origin)
	}
	// "a" is remembered from the local publish only: the duplicate is seq 1.
	if dup, isDup, _, err := offer(c, nil, PublishOptions{MsgID: "a"}, t0); err != nil || !isDup || dup != 1 {
		t.Fatalf("msg id duplicate: %d %v %v", dup, isDup, err)
	}
	for name, o := range map[string]*Origin{
		"own region":  {Region: testRegion, Incarnation: "X", Seq: 1, Time: t0},
		"no region":   {Incarnation: "X", Seq: 1, Time: t0},
		"no inc":      {Region: "eu-west", Seq: 1, Time: t0},
		"seq 0":       {Region: "eu-west", Incarnation: "X", Time: t0},
		"zero time":   {Region: "eu-west", Incarnation: "X", Seq: 1},
		"time beyond": {Region: "eu-west", Incarnation: "X", Seq: 1, Time: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if _, _, _, err := offer(c, o, PublishOptions{}, t0); !errors.Is(err, ErrBadOrigin) {
			t.Errorf("%s: %v, want ErrBadOrigin", name, err)
		}
	}
	if err := c.checkStream(replicator.Stream{Topic: tenancy.Name{Tenant: "x", Namespace: "y", Topic: "z"}, Region: "eu-west", Incarnation: "E1"}); !errors.Is(err, ErrBadOrigin) {
		t.Errorf("another topic's stream: %v", err)
	}
	// MaxMsgSize does not apply to replicated messages; the entry size does.
	c.setLimits(Limits{MaxMsgSize: 5})
	if _, _, err := c.check("s", 0, 10, 10, &PublishOptions{Origin: eu("E1", 3)}, t0); err != nil {
		t.Fatalf("replicated over max_msg_size: %v", err)
	}
	if _, _, err := c.check("s", 0, 10, 10, &PublishOptions{}, t0); !errors.Is(err, ErrMsgTooBig) {
		t.Fatalf("local over max_msg_size: %v", err)
	}
	if _, _, err := c.check("s", 0, 10, 1001, &PublishOptions{Origin: eu("E1", 3)}, t0); !errors.Is(err, ErrMsgTooBig) {
		t.Fatalf("replicated over the entry size: %v", err)
	}
	c.setLimits(Limits{})

	// Nothing confirmed yet: the confirmed view is empty.
	if c.conf.origin != 0 || c.recvConf.HWM(s1) != 0 || c.recv.HWM(s1) != 2 {
		t.Fatalf("before confirming: origin %d, conf hwm %d, hwm %d", c.conf.origin, c.recvConf.HWM(s1), c.recv.HWM(s1))
	}
	for i := range appended {
		c.confirm(1, &appended[i], "", 10, true)
	}
	if c.conf.origin != 2 || c.recvConf.HWM(s1) != 2 || c.ledger(1).LastOrigin != 2 || c.lost != 0 {
		t.Fatalf("after confirming: origin %d, conf hwm %d, ledger %+v", c.conf.origin, c.recvConf.HWM(s1), c.ledger(1).LedgerInfo)
	}
	snap1 := TopicMeta{Incarnation: testInc, FirstSeq: 1, Snapshot: c.snapshot(t0, 100)}

	// Gap records: duplicate, gap, accepted (the duplicate's sequence is
	// then unknown), confirmed once its turn comes.
	if v, h := c.skip(s1, 1, 2); v != replicator.VerdictDuplicate || h != 2 {
		t.Fatalf("duplicate gap record: %v %d", v, h)
	}
	if v, h := c.skip(s1, 4, 6); v != replicator.VerdictGap || h != 2 {
		t.Fatalf("gap record above: %v %d", v, h)
	}
	if v, h := c.skip(s1, 2, 6); v != replicator.VerdictStore || h != 6 {
		t.Fatalf("gap record: %v %d", v, h)
	}
	if dup, isDup, _, _ := offer(c, eu("E1", 6), PublishOptions{}, t0); !isDup || dup != 0 {
		t.Fatalf("duplicate of a skipped sequence: %d %v", dup, isDup)
	}
	if lost := c.confirmSkip(s1, 2, 6); lost != 4 || c.lost != 4 || c.recvConf.Lost(s1) != 4 {
		t.Fatalf("confirmed gap record: lost %d, total %d", lost, c.lost)
	}
	m7 := mustOffer(eu("E1", 7), PublishOptions{})
	c.confirm(1, &m7, "", 10, true)
	snap2 := TopicMeta{Incarnation: testInc, FirstSeq: 1, Snapshot: c.snapshot(t0, 100)}
	if got := snap2.Snapshot.Origins; len(got) != 2 || got[0].Incarnation != "E1" || got[0].HWM != 7 || got[0].Lost != 4 ||
		got[0].GapRecords != 1 || got[1].HWM != 1 || snap2.Snapshot.LastOriginSeq != 2 {
		t.Fatalf("snapshot origins %+v, last origin %d", got, snap2.Snapshot.LastOriginSeq)
	}

	restore := func(tm TopicMeta, replay []Message) *core {
		t.Helper()
		r, from, err := restoreCore(&tm, Limits{}, 1000, testTopic, testRegion)
		if err != nil {
			t.Fatal(err)
		}
		for i := range replay {
			if replay[i].Seq >= from {
				if !r.replay(1, &replay[i], "") {
					t.Fatalf("replay of %+v irregular", replay[i])
				}
			}
		}
		return r
	}
	// From the last snapshot: everything.
	r := restore(snap2, nil)
	if r.recv.HWM(s1) != 7 || r.recvConf.HWM(s1) != 7 || r.lost != 4 || r.conf.origin != 2 || r.head.origin != 2 {
		t.Fatalf("restored: hwm %d/%d lost %d origin %d", r.recv.HWM(s1), r.recvConf.HWM(s1), r.lost, r.conf.origin)
	}
	if o := r.localOrigin(t0); o.Seq != 3 || o.Incarnation != testInc {
		t.Fatalf("next local origin after restore %+v", o)
	}
	// From the snapshot before the gap record, replaying message 7: the
	// jump counts the same loss.
	r = restore(snap1, appended)
	if r.recvConf.HWM(s1) != 7 || r.recv.HWM(s1) != 7 || r.lost != 4 || r.recvConf.State().Streams[0].GapRecords != 1 {
		t.Fatalf("restored with a jump: hwm %d lost %d %+v", r.recvConf.HWM(s1), r.lost, r.recvConf.State())
	}
	if dup, isDup, _, _ := offer(r, eu("E1", 7), PublishOptions{}, t0); !isDup || dup != m7.Seq {
		t.Fatalf("duplicate of a replayed message: %d %v", dup, isDup)
	}
	// A snapshot naming another topic's stream is corrupt.
	bad := snap2
	bad.Snapshot = &Snapshot{Origins: []replicator.StreamState{{Stream: replicator.Stream{Topic: tenancy.Name{Tenant: "a", Namespace: "b", Topic: "c"}, Region: "x", Incarnation: "y"}, HWM: 1}}}
	if _, _, err := restoreCore(&bad, Limits{}, 1000, testTopic, testRegion); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("another topic's mark: %v", err)
	}
}

// TestLocalBounds: the range of topic sequences that can hold a local
// origin sequence, from the ledgers' LastOrigin: exact for a ledger of
// local messages only.
func TestLocalBounds(t *testing.T) {
	c := originCore()
	// Ledger 1: L L L (origins 1-3); ledger 2: R L R L R (4, 5); ledger
	// 3: R R; ledger 4 (open): L (6).
	pattern := [][]bool{{true, true, true}, {false, true, false, true, false}, {false, false}, {true}}
	seqOf := map[uint64]uint64{}
	rseq := uint64(0)
	for i, ledger := range pattern {
		if i > 0 {
			l := c.ledgers[len(c.ledgers)-1]
			if err := c.closeLedger(l.ID, l.Entries, l.Bytes); err != nil {
				t.Fatal(err)
			}
			c.addLedger(int64(i+1), c.head.seq+1)
		}
		for _, local := range ledger {
			var from *Origin
			if !local {
				rseq++
				from = eu("E", rseq)
			}
			_, _, m, err := offer(c, from, PublishOptions{}, t0)
			if err != nil {
				t.Fatal(err)
			}
			c.confirm(int64(i+1), &m, "", 10, true)
			if local {
				seqOf[m.Origin.Seq] = m.Seq
			}
		}
	}
	want := map[uint64][2]uint64{1: {1, 1}, 2: {2, 2}, 3: {3, 3}, 4: {4, 7}, 5: {5, 8}, 6: {11, 11}}
	for n, w := range want {
		lo, hi, _, err := c.localBounds(n)
		if err != nil || lo != w[0] || hi != w[1] || seqOf[n] < lo || seqOf[n] > hi {
			t.Errorf("localBounds(%d) = %d..%d %v, want %d..%d (at %d)", n, lo, hi, err, w[0], w[1], seqOf[n])
		}
	}
	if _, _, _, err := c.localBounds(7); !errors.Is(err, ErrCorrupt) {
		t.Errorf("localBounds beyond the last local origin: %v", err)
	}
	// With the first two ledgers removed (trimmed), origins 1-5 are gone:
	// the first ledger left (R R) may be searched, but headless.
	c.trim(9, noInfo{})
	c.counted = 9
	if gone := c.removeDone(); len(gone) != 2 {
		t.Fatalf("removed %v", gone)
	}
	for n := uint64(1); n <= 5; n++ {
		if lo, hi, headless, err := c.localBounds(n); !errors.Is(err, ErrGone) && !(err == nil && headless && lo >= 9 && hi <= 10) {
			t.Errorf("localBounds(%d) after the trim: %d..%d headless %v, %v", n, lo, hi, headless, err)
		}
	}
	if lo, hi, headless, err := c.localBounds(6); err != nil || lo != 11 || hi != 11 || headless {
		t.Errorf("localBounds(6) after the trim: %d..%d %v %v", lo, hi, headless, err)
	}
}

// originEvent is one appended message or gap record, in append order.
type originEvent struct {
	msg  *Message // nil for a gap record
	skip *skipItem
}

// foldMarks is the naive high-water mark rule over events in order: a
// message moves its stream's mark to its sequence (a jump past mark+1
// counts as a gap record's loss), a gap record moves it to its last
// sequence and counts the ones above the old mark as lost.
func foldMarks(topic tenancy.Name, events []originEvent) map[replicator.Stream]replicator.StreamState {
	out := map[replicator.Stream]replicator.StreamState{}
	move := func(s replicator.Stream, to uint64, jumpFrom uint64) {
		st := out[s]
		st.Stream = s
		if to > st.HWM+jumpFrom {
			st.Lost += to - st.HWM - jumpFrom
			st.GapRecords++
		}
		st.HWM = max(st.HWM, to)
		out[s] = st
	}
	for _, e := range events {
		switch {
		case e.skip != nil:
			move(e.skip.stream, e.skip.last, 0)
		case e.msg.HasOrigin() && e.msg.Origin.Region != testRegion:
			move(e.msg.Origin.Stream(topic), e.msg.Origin.Seq, 1)
		}
	}
	return out
}

// TestCoreOriginsAgainstModel drives the core with random local and
// replicated publishes (several origin streams, sequences around their
// marks), gap records, confirmations in order, rollovers and takeovers
// from the latest or an older snapshot (gap records after it are then
// lost, unless a later message's jump recounts them), and checks every
// answer against the naive fold: local origin sequences gap-free across
// everything, the receiver rule against the appended marks, the
// confirmed marks and losses, the duplicates' sequences, and the local
// bounds of every local origin sequence.
func TestCoreOriginsAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := originCore()
		topic := c.topic
		streams := []replicator.Stream{
			{Topic: topic, Region: "eu-west", Incarnation: "E1"},
			{Topic: topic, Region: "eu-west", Incarnation: "E2"},
			{Topic: topic, Region: "ap-south", Incarnation: "A1"},
		}
		var events []originEvent // every appended event, in order
		confirmed := 0           // events[:confirmed] are confirmed
		var msgs []Message       // every message, by topic sequence
		localSeq := map[uint64]uint64{}
		var saved *TopicMeta
		savedAt := 0 // events confirmed when saved was taken
		now := t0
		nextLedger := int64(1)

		for range rapid.IntRange(1, 120).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op <= 1: // local publish
				now = now.Add(time.Second)
				_, isDup, m, err := offer(c, nil, PublishOptions{}, now)
				if err != nil || isDup {
					t.Fatalf("local publish: %v %v", isDup, err)
				}
				if want := uint64(len(localSeq)) + 1; m.Origin.Seq != want {
					t.Fatalf("local origin seq %d, want %d", m.Origin.Seq, want)
				}
				localSeq[m.Origin.Seq] = m.Seq
				msgs = append(msgs, m)
				events = append(events, originEvent{msg: &msgs[len(msgs)-1]})

			case op <= 4: // replicated publish
				s := streams[rapid.IntRange(0, len(streams)-1).Draw(t, "stream")]
				h := foldMarks(topic, events)[s].HWM
				seq := uint64(max(int64(h)+int64(rapid.IntRange(-2, 2).Draw(t, "off")), 1))
				o := &Origin{Region: s.Region, Incarnation: s.Incarnation, Seq: seq, Time: t0}
				dup, isDup, m, err := offer(c, o, PublishOptions{}, now)
				var gap *OriginGapError
				switch {
				case seq <= h:
					if err != nil || !isDup {
						t.Fatalf("seq %d at mark %d of %s: dup %v, %v", seq, h, s, isDup, err)
					}
					if dup != 0 && (dup > uint64(len(msgs)) || msgs[dup-1].Origin != *o) {
						t.Fatalf("duplicate of %s seq %d answered with seq %d", s, seq, dup)
					}
				case seq > h+1:
					if !errors.As(err, &gap) || gap.Expected != h+1 {
						t.Fatalf("seq %d at mark %d of %s: %v", seq, h, s, err)
					}
				default:
					if err != nil || isDup {
						t.Fatalf("seq %d at mark %d of %s: dup %v, %v", seq, h, s, isDup, err)
					}
					msgs = append(msgs, m)
					events = append(events, originEvent{msg: &msgs[len(msgs)-1]})
				}

			case op == 5: // gap record
				s := streams[rapid.IntRange(0, len(streams)-1).Draw(t, "stream")]
				h := foldMarks(topic, events)[s].HWM
				first := uint64(max(int64(h)+int64(rapid.IntRange(-2, 2).Draw(t, "first off")), 1))
				last := first + uint64(rapid.IntRange(0, 3).Draw(t, "len"))
				v, hwm := c.skip(s, first, last)
				switch {
				case last <= h:
					if v != replicator.VerdictDuplicate || hwm != h {
						t.Fatalf("gap record %d-%d at %d: %v %d", first, last, h, v, hwm)
					}
				case first > h+1:
					if v != replicator.VerdictGap || hwm != h {
						t.Fatalf("gap record %d-%d at %d: %v %d", first, last, h, v, hwm)
					}
				default:
					if v != replicator.VerdictStore || hwm != last {
						t.Fatalf("gap record %d-%d at %d: %v %d", first, last, h, v, hwm)
					}
					events = append(events, originEvent{skip: &skipItem{stream: s, first: first, last: last}})
				}

			case op <= 7: // confirm some, in order
				for k := rapid.IntRange(1, 4).Draw(t, "confirm"); k > 0 && confirmed < len(events); k-- {
					e := events[confirmed]
					if e.skip != nil {
						c.confirmSkip(e.skip.stream, e.skip.first, e.skip.last)
					} else {
						c.confirm(nextLedger, e.msg, "", 10, true)
					}
					confirmed++
				}
				want := foldMarks(topic, events[:confirmed])
				var lost uint64
				for _, s := range streams {
					w := want[s]
					if c.recvConf.HWM(s) != w.HWM || c.recvConf.Lost(s) != w.Lost {
						t.Fatalf("confirmed %s: hwm %d lost %d, model %+v", s, c.recvConf.HWM(s), c.recvConf.Lost(s), w)
					}
					lost += w.Lost
				}
				if c.lost != lost {
					t.Fatalf("lost %d, model %d", c.lost, lost)
				}

			case op == 8: // snapshot (a metadata write)
				saved = &TopicMeta{Incarnation: testInc, FirstSeq: c.first, Snapshot: c.snapshot(now, 100)}
				savedAt = confirmed

			case op == 9: // rollover or takeover, everything confirmed
				if confirmed != len(events) {
					continue
				}
				l := c.ledgers[len(c.ledgers)-1]
				if err := c.closeLedger(l.ID, l.Entries, l.Bytes); err != nil {
					t.Fatal(err)
				}
				if rapid.Bool().Draw(t, "rollover") {
					nextLedger++
					c.addLedger(nextLedger, c.head.seq+1)
					continue
				}
				tm := saved
				if tm == nil || rapid.Bool().Draw(t, "latest snapshot") {
					tm = &TopicMeta{Incarnation: testInc, FirstSeq: c.first, Snapshot: c.snapshot(now, 100)}
					savedAt = confirmed
				}
				tm.Ledgers = c.ledgerInfos()
				tm.Ledgers[len(tm.Ledgers)-1].LastOrigin = 0 // as recovered
				r, from, err := restoreCore(tm, Limits{}, 1000, topic, testRegion)
				if err != nil {
					t.Fatal(err)
				}
				for i := from; i <= uint64(len(msgs)); i++ {
					if !r.replay(r.ledgerFor(i).ID, &msgs[i-1], "") {
						t.Fatalf("replay of seq %d irregular", i)
					}
				}
				// The model: the gap records after the snapshot are gone.
				var kept []originEvent
				for i, e := range events {
					if i < savedAt || e.msg != nil {
						kept = append(kept, e)
					}
				}
				events, confirmed, saved = kept, len(kept), nil
				c = r
				nextLedger++
				c.addLedger(nextLedger, c.head.seq+1)
				want := foldMarks(topic, events)
				for _, s := range streams {
					w := want[s]
					if c.recv.HWM(s) != w.HWM || c.recvConf.HWM(s) != w.HWM || c.recvConf.Lost(s) != w.Lost {
						t.Fatalf("after takeover %s: hwm %d/%d lost %d, model %+v", s, c.recv.HWM(s), c.recvConf.HWM(s), c.recvConf.Lost(s), w)
					}
				}
				if c.conf.origin != uint64(len(localSeq)) || c.head.origin != c.conf.origin {
					t.Fatalf("after takeover: last local origin %d/%d, %d published", c.head.origin, c.conf.origin, len(localSeq))
				}
			}
			// Every confirmed local origin sequence is where its bounds say.
			for n := uint64(1); n <= c.conf.origin; n++ {
				lo, hi, _, err := c.localBounds(n)
				if s := localSeq[n]; err != nil || s < lo || s > hi {
					t.Fatalf("local origin %d at seq %d, bounds %d..%d %v; ledgers %s", n, s, lo, hi, err, ledgerOrigins(c))
				}
			}
		}
	})
}

func ledgerOrigins(c *core) string {
	s := ""
	for _, l := range c.ledgers {
		s += fmt.Sprintf("[%d: %d+%d last origin %d] ", l.ID, l.FirstSeq, l.Msgs, l.LastOrigin)
	}
	return s
}
