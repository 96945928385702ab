package mledger

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The naive specification of the core: every message ever appended, in a
// slice, and FirstSeq; every answer is recomputed by scanning.

type modelMsg struct {
	seq         uint64
	subject, id string
	t           time.Time
	size        int64
	ledger      int64
	conf        bool
}

type model struct {
	window  time.Duration
	msgs    []modelMsg // msgs[i].seq == i+1
	first   uint64
	entries map[int64]int64 // ledger → entries confirmed in it
}

// ledgerBytes is the size of ledger id's confirmed messages.
func (m *model) ledgerBytes(id int64) int64 {
	var b int64
	for _, x := range m.msgs {
		if x.ledger == id && x.conf {
			b += x.size
		}
	}
	return b
}

func (m *model) last() uint64 { return uint64(len(m.msgs)) }

func (m *model) lastConf() uint64 {
	n := uint64(0)
	for _, x := range m.msgs {
		if !x.conf {
			break
		}
		n = x.seq
	}
	return n
}

func (m *model) msg(seq uint64) *modelMsg { return &m.msgs[seq-1] }

// dup: the latest message with id, if within the window at now.
func (m *model) dup(id string, now time.Time) uint64 {
	for i := len(m.msgs) - 1; i >= 0; i-- {
		if x := m.msgs[i]; x.id == id {
			if now.Sub(x.t) < m.window {
				return x.seq
			}
			return 0
		}
	}
	return 0
}

// lastSubject is subject's last live sequence (conf: confirmed only) and
// its live count.
func (m *model) lastSubject(subject string, conf bool) (last, n uint64) {
	for s := m.first; s <= m.last(); s++ {
		if x := m.msg(s); x.subject == subject && (x.conf || !conf) {
			last, n = s, n+1
		}
	}
	return last, n
}

func (m *model) liveBytes() int64 {
	var b int64
	for s := m.first; s <= m.lastConf(); s++ {
		b += m.msg(s).size
	}
	return b
}

// check is Publish's checks as nats-wire §2.4 words them.
func (m *model) check(lim Limits, subject string, size int64, o PublishOptions, now time.Time) (uint64, error) {
	if lim.MaxMsgSize > 0 && size > int64(lim.MaxMsgSize) {
		return 0, ErrMsgTooBig
	}
	if o.MsgID != "" {
		if d := m.dup(o.MsgID, now); d > 0 {
			return d, nil
		}
	}
	if o.ExpectedLastSeq != nil && *o.ExpectedLastSeq != m.last() {
		return 0, &WrongLastSeqError{Actual: m.last()}
	}
	if o.ExpectedLastSubjectSeq != nil {
		subj := o.ExpectedLastSubjectSeqSubject
		if subj == "" {
			subj = subject
		}
		if last, _ := m.lastSubject(subj, false); last != *o.ExpectedLastSubjectSeq {
			return 0, &WrongLastSeqError{Actual: last}
		}
	}
	lastID := ""
	if n := len(m.msgs); n > 0 {
		lastID = m.msgs[n-1].id
	}
	if o.ExpectedLastMsgID != nil && *o.ExpectedLastMsgID != lastID {
		return 0, &WrongLastMsgIDError{Actual: lastID}
	}
	if lim.DiscardNew && lim.MaxMsgs > 0 && m.last()+1-m.first >= uint64(lim.MaxMsgs) {
		return 0, ErrStoreFull
	}
	return 0, nil
}

// retain is the first sequence the limits keep, all sizes and times known.
func (m *model) retain(lim Limits, now time.Time) uint64 {
	f, last := m.first, m.lastConf()
	if lim.MaxMsgs > 0 && last+1 > f+uint64(lim.MaxMsgs) {
		f = last + 1 - uint64(lim.MaxMsgs)
	}
	if lim.MaxBytes > 0 {
		for f <= last {
			var b int64
			for s := f; s <= last; s++ {
				b += m.msg(s).size
			}
			if b <= lim.MaxBytes {
				break
			}
			f++
		}
	}
	if lim.MaxAge > 0 {
		for f <= last && !m.msg(f).t.After(now.Add(-lim.MaxAge)) {
			f++
		}
	}
	return max(f, m.first)
}

// modelInfo is the cache's view: every message from from on.
type modelInfo struct {
	m    *model
	from uint64
}

func (i modelInfo) From() uint64 { return max(i.from, 1) }
func (i modelInfo) Info(s uint64) (int64, time.Time) {
	x := i.m.msg(s)
	return x.size, x.t
}

func sameErr(a, b error) bool {
	var wa, wb *WrongLastSeqError
	var ma, mb *WrongLastMsgIDError
	switch {
	case a == nil || b == nil:
		return a == b
	case errors.As(a, &wa):
		return errors.As(b, &wb) && wa.Actual == wb.Actual
	case errors.As(a, &ma):
		return errors.As(b, &mb) && ma.Actual == mb.Actual
	default:
		return errors.Is(a, b) || errors.Is(b, a)
	}
}

// TestCoreAgainstModel drives the core and the model with the same
// random operations: publishes with random headers, confirmations,
// rollovers, trims, retention, forgetting, and takeovers (snapshot +
// replay), and compares every answer.
func TestCoreAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		exact := rapid.Bool().Draw(t, "all sizes known")
		lim := Limits{DuplicateWindow: time.Minute}
		if rapid.Bool().Draw(t, "discard new") {
			lim.DiscardNew, lim.MaxMsgs = true, int64(rapid.IntRange(1, 20).Draw(t, "discard max msgs"))
		}
		if rapid.Bool().Draw(t, "max msg size") {
			lim.MaxMsgSize = 40
		}
		c := newCore(lim, 1000, 1)
		md := &model{window: time.Minute, first: 1, entries: map[int64]int64{}}
		// Confirmations come in entries (batches) of random sizes, never
		// spanning ledgers: entryLeft more messages go to the entry in
		// progress, of ledger entryLedger.
		entryLeft, entryLedger := 0, int64(0)
		now := t0
		nextLedger := int64(1)
		c.addLedger(nextLedger, 1)
		var saved *TopicMeta   // a snapshot written earlier: a takeover may start from it
		exactFrom := uint64(1) // bytes are exact when first is at a ledger boundary or exact
		info := func() msgInfo {
			if exact {
				return modelInfo{md, 1}
			}
			return modelInfo{md, c.ledgers[len(c.ledgers)-1].FirstSeq}
		}
		openLedger := func() *ledgerState { return c.ledgers[len(c.ledgers)-1] }
		// closeDone closes the ledgers before the last whose messages are
		// all confirmed (the rollover's Writer.Close).
		closeDone := func() {
			for i, l := range c.ledgers[:len(c.ledgers)-1] {
				if next := c.ledgers[i+1].FirstSeq; l.State == LedgerOpen && md.lastConf() >= next-1 {
					if err := c.closeLedger(l.ID, md.entries[l.ID], md.ledgerBytes(l.ID)); err != nil {
						t.Fatal(err)
					}
				}
			}
		}

		steps := rapid.IntRange(1, 150).Draw(t, "steps")
		for range steps {
			switch op := rapid.IntRange(0, 11).Draw(t, "op"); {
			case op <= 3: // publish
				now = now.Add(time.Duration(rapid.IntRange(0, 20).Draw(t, "dt")) * time.Second)
				subject := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "subject")
				size := int64(rapid.IntRange(1, 50).Draw(t, "size"))
				o := PublishOptions{MsgID: rapid.SampledFrom([]string{"", "", "x", "y", "z"}).Draw(t, "id")}
				if rapid.IntRange(0, 3).Draw(t, "exp seq") == 0 {
					o.ExpectedLastSeq = u64(md.last() + uint64(rapid.IntRange(0, 1).Draw(t, "seq off")))
				}
				if rapid.IntRange(0, 3).Draw(t, "exp subj") == 0 {
					o.ExpectedLastSubjectSeqSubject = rapid.SampledFrom([]string{"", "a", "b"}).Draw(t, "exp subject")
					o.ExpectedLastSubjectSeq = u64(uint64(rapid.IntRange(0, int(md.last())).Draw(t, "subj seq")))
				}
				if rapid.IntRange(0, 3).Draw(t, "exp id") == 0 {
					o.ExpectedLastMsgID = str(rapid.SampledFrom([]string{"", "x", "y"}).Draw(t, "exp id value"))
				}
				wantDup, wantErr := md.check(lim, subject, size, o, now)
				gotDup, _, gotErr := c.check(subject, 0, int(size), int(size), &o, now)
				if gotDup != wantDup || !sameErr(gotErr, wantErr) {
					t.Fatalf("check(%s, %d, %+v): got %d, %v; model %d, %v", subject, size, o, gotDup, gotErr, wantDup, wantErr)
				}
				if gotErr != nil || gotDup > 0 {
					continue
				}
				seq, ts := c.assign(subject, o.MsgID, size, now, nil)
				if seq != md.last()+1 || !ts.Equal(now) {
					t.Fatalf("assigned %d at %v, model %d at %v", seq, ts, md.last()+1, now)
				}
				md.msgs = append(md.msgs, modelMsg{seq: seq, subject: subject, id: o.MsgID, t: now, size: size, ledger: openLedger().ID})

			case op <= 5: // confirm some
				k := rapid.IntRange(1, 5).Draw(t, "confirm")
				for s := md.lastConf() + 1; s <= md.last() && k > 0; s, k = s+1, k-1 {
					x := md.msg(s)
					newEntry := entryLeft == 0 || x.ledger != entryLedger
					if newEntry {
						entryLeft, entryLedger = rapid.IntRange(1, 4).Draw(t, "entry msgs"), x.ledger
						md.entries[x.ledger]++
					}
					entryLeft--
					c.confirm(x.ledger, &Message{Seq: s, Subject: x.subject, Time: x.t}, x.id, x.size, newEntry)
					x.conf = true
				}
				closeDone()

			case op == 6: // rollover
				nextLedger++
				c.addLedger(nextLedger, c.head.seq+1)
				closeDone()
				saved = nil

			case op == 7: // TrimTo
				to := uint64(rapid.IntRange(int(md.first), int(md.last())+2).Draw(t, "trim to"))
				c.trim(to, info())
				md.first = max(md.first, min(to, md.lastConf()+1))

			case op == 8: // retention
				rl := lim
				rl.DiscardNew = false
				if rapid.Bool().Draw(t, "ret msgs") {
					rl.MaxMsgs = int64(rapid.IntRange(1, 30).Draw(t, "max msgs"))
				}
				if rapid.Bool().Draw(t, "ret bytes") {
					rl.MaxBytes = int64(rapid.IntRange(1, 600).Draw(t, "max bytes"))
				}
				if rapid.Bool().Draw(t, "ret age") {
					rl.MaxAge = time.Duration(rapid.IntRange(1, 200).Draw(t, "max age")) * time.Second
				}
				c.setLimits(rl)
				got := c.retainFrom(now, info())
				c.setLimits(lim)
				want := md.retain(rl, now)
				if exact && md.first >= exactFrom {
					if got != want {
						t.Fatalf("retainFrom %+v = %d, model %d", rl, got, want)
					}
				} else {
					msgsOnly := md.retain(Limits{MaxMsgs: rl.MaxMsgs}, now)
					if got < msgsOnly || got > md.lastConf()+1 {
						t.Fatalf("retainFrom %+v = %d, outside [%d, %d]", rl, got, msgsOnly, md.lastConf()+1)
					}
				}
				c.trim(got, info())
				md.first = max(md.first, min(got, md.lastConf()+1))

			case op == 9: // forget, remove done ledgers
				for {
					kind, seq, l := c.nextForget()
					if kind == forgetNone {
						break
					}
					switch kind {
					case forgetAll:
						c.forgetAllConfirmed()
					case forgetLedger:
						c.forgetWholeLedger(l)
					case forgetMsg:
						if err := c.forgetMsg(seq, md.msg(seq).subject); err != nil {
							t.Fatal(err)
						}
					}
				}
				for _, id := range c.removeDone() {
					for _, x := range md.msgs {
						if x.ledger == id && x.seq >= md.first {
							t.Fatalf("ledger %d removed with live seq %d", id, x.seq)
						}
					}
					saved = nil
				}
				for _, subj := range []string{"a", "b", "c"} {
					wl, wn := md.lastSubject(subj, true)
					if gl, gn := c.subjects.lastConf(subj, c.first); gl != wl || gn != wn {
						t.Fatalf("subject %s after forgetting: last %d count %d; model %d %d", subj, gl, gn, wl, wn)
					}
				}

			case op == 10: // write a snapshot (as a lazy metadata write would)
				saved = &TopicMeta{FirstSeq: c.first, Ledgers: c.ledgerInfos(), Snapshot: c.snapshot(now, 1000)}

			case op == 11: // takeover: everything confirmed, the open ledger recovered
				if md.lastConf() != md.last() {
					continue
				}
				l := openLedger()
				if err := c.closeLedger(l.ID, md.entries[l.ID], md.ledgerBytes(l.ID)); err != nil {
					t.Fatal(err)
				}
				if l.Entries > l.Msgs || (l.Msgs > 0) != (l.Entries > 0) {
					t.Fatalf("ledger %d: %d entries, %d messages", l.ID, l.Entries, l.Msgs)
				}
				tm := saved
				if tm == nil {
					tm = &TopicMeta{FirstSeq: c.first, Snapshot: c.snapshot(now, 1000)}
				}
				tm.Ledgers = c.ledgerInfos()
				r, from, err := restoreCore(tm, lim, 1000, testTopic, "")
				if err != nil {
					t.Fatalf("restore: %v", err)
				}
				for s := from; s <= md.last(); s++ {
					x := md.msg(s)
					r.replay(x.ledger, &Message{Seq: s, Subject: x.subject, Time: x.t}, x.id)
				}
				c = r
				md.first = c.first // FirstSeq is persisted lazily: trims after the snapshot come back
				if fl := c.ledgerFor(md.first); fl != nil && fl.FirstSeq != md.first {
					exactFrom = fl.last() + 1 // estimated until first leaves that ledger
				}
				nextLedger++
				c.addLedger(nextLedger, c.head.seq+1)
				saved = nil
			}

			// Invariants after every step.
			if c.first != md.first || c.conf.seq != md.lastConf() || c.head.seq != md.last() {
				t.Fatalf("first/conf/head %d/%d/%d, model %d/%d/%d", c.first, c.conf.seq, c.head.seq, md.first, md.lastConf(), md.last())
			}
			if c.msgs() != md.lastConf()+1-md.first {
				t.Fatalf("msgs %d, model %d", c.msgs(), md.lastConf()+1-md.first)
			}
			atBoundary := md.first > md.lastConf() || c.ledgerFor(md.first) == nil || c.ledgerFor(md.first).FirstSeq == md.first
			if (exact && md.first >= exactFrom) || atBoundary {
				if c.live != md.liveBytes() {
					t.Fatalf("live bytes %d, model %d (first %d)", c.live, md.liveBytes(), md.first)
				}
			}
			for _, subj := range []string{"a", "b", "c"} {
				wl, wn := md.lastSubject(subj, true)
				gl, gn := c.subjects.lastConf(subj, c.first)
				if gl != wl || gn < wn {
					t.Fatalf("subject %s: last %d count %d; model %d %d", subj, gl, gn, wl, wn)
				}
				if hl, _ := md.lastSubject(subj, false); c.subjects.lastHead(subj, c.first) != hl {
					t.Fatalf("subject %s head last %d, model %d", subj, c.subjects.lastHead(subj, c.first), hl)
				}
			}
		}
	})
}
