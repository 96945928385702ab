package mledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// queueItems pushes n messages of size bytes each for led, from seq on.
func queueItems(b *batcher, led *openLedger, seq uint64, n int, size int64) []*item {
	var out []*item
	for i := range n {
		it := &item{seq: seq + uint64(i), led: led, size: size}
		b.push(it)
		out = append(out, it)
	}
	return out
}

func seqsOf(items []*item) []uint64 {
	var s []uint64
	for _, it := range items {
		s = append(s, it.seq)
	}
	return s
}

func TestBatcherInflight(t *testing.T) {
	l1 := &openLedger{id: 1}
	b := newBatcher(2, 1000, 1<<20)
	queueItems(&b, l1, 1, 1, 10)
	// Low load: each message goes alone, at once.
	if got := b.next(); len(got) != 1 || got[0].seq != 1 {
		t.Fatalf("first entry %v", seqsOf(got))
	}
	queueItems(&b, l1, 2, 1, 10)
	if got := b.next(); len(got) != 1 || got[0].seq != 2 {
		t.Fatalf("second entry %v", seqsOf(got))
	}
	// K = 2 in flight: the rest queues.
	queueItems(&b, l1, 3, 5, 10)
	if got := b.next(); got != nil || b.queued() != 5 || b.bytes != 50 {
		t.Fatalf("third entry with 2 in flight: %v (queued %d, %d bytes)", seqsOf(got), b.queued(), b.bytes)
	}
	// One confirmed: everything queued goes as one entry.
	b.done()
	if got := b.next(); len(got) != 5 || got[0].seq != 3 || got[4].seq != 7 || b.queued() != 0 || b.bytes != 0 {
		t.Fatalf("after a confirmation: %v", seqsOf(got))
	}
	if got := b.next(); got != nil {
		t.Fatalf("empty queue gave %v", seqsOf(got))
	}
}

func TestBatcherCaps(t *testing.T) {
	l1, l2 := &openLedger{id: 1}, &openLedger{id: 2}
	// Count cap.
	b := newBatcher(10, 3, 1<<20)
	queueItems(&b, l1, 1, 7, 10)
	for _, want := range [][]uint64{{1, 2, 3}, {4, 5, 6}, {7}} {
		if got := seqsOf(b.next()); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("count cap: %v, want %v", got, want)
		}
	}
	// Byte cap, header included: 13 + 3×100 ≤ 320 < 13 + 4×100; a message
	// larger than the cap goes alone.
	b = newBatcher(10, 1000, 320)
	queueItems(&b, l1, 1, 4, 100)
	queueItems(&b, l1, 5, 1, 500)
	queueItems(&b, l1, 6, 2, 100)
	for _, want := range [][]uint64{{1, 2, 3}, {4}, {5}, {6, 7}} {
		if got := seqsOf(b.next()); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("byte cap: %v, want %v", got, want)
		}
	}
	// An entry never spans ledgers (a rollover switched in between).
	b = newBatcher(10, 1000, 1<<20)
	queueItems(&b, l1, 1, 2, 10)
	queueItems(&b, l2, 3, 2, 10)
	for _, want := range [][]uint64{{1, 2}, {3, 4}} {
		if got := b.next(); fmt.Sprint(seqsOf(got)) != fmt.Sprint(want) || got[0].led != got[len(got)-1].led {
			t.Fatalf("ledger boundary: %v, want %v", seqsOf(got), want)
		}
	}
	if b.inflight != 2 {
		t.Fatalf("in flight %d", b.inflight)
	}
}

func TestEntryIndex(t *testing.T) {
	x := newEntryIndex(10)
	// Ledger 1: entries of 3, 1, 4 messages from seq 5.
	for e, n := range []int{3, 1, 4} {
		first := []uint64{5, 8, 9}[e]
		if !x.add(1, int64(e), first, n) {
			t.Fatalf("add entry %d", e)
		}
	}
	for seq, want := range map[uint64]int64{5: 0, 7: 0, 8: 1, 9: 2, 12: 2} {
		if e, _, ok := x.find(1, seq); !ok || e != want {
			t.Errorf("find %d: %d %v, want %d", seq, e, ok, want)
		}
	}
	for _, seq := range []uint64{4, 13} {
		if _, _, ok := x.find(1, seq); ok {
			t.Errorf("find %d: found", seq)
		}
	}
	if n, next := x.known(1); n != 3 || next != 13 {
		t.Fatalf("known %d %d", n, next)
	}
	// Contradictions are refused; entries past the prefix ignored.
	if x.add(1, 3, 14, 1) || x.add(1, 1, 9, 1) {
		t.Fatal("inconsistent add accepted")
	}
	if !x.add(1, 7, 40, 1) || !x.add(2, 5, 40, 1) {
		t.Fatal("add past the prefix refused")
	}
	if n, _ := x.known(2); n != 0 {
		t.Fatal("a ledger started past entry 0")
	}
	// The budget (10) drops the least recently used ledger's prefix.
	for e := range 6 {
		x.add(2, int64(e), uint64(100+e), 1)
	}
	x.find(2, 100)
	for e := range 3 {
		x.add(3, int64(e), uint64(200+e), 1)
	}
	if n, _ := x.known(1); n != 0 {
		t.Fatal("ledger 1 (least recently used) kept over budget")
	}
	if n2, _ := x.known(2); n2 != 6 {
		t.Fatalf("ledger 2: %d entries", n2)
	}
	// A ledger longer than the budget alone stays a prefix.
	x.drop(2)
	for e := range 20 {
		x.add(4, int64(e), uint64(1000+e), 1)
	}
	if n, _ := x.known(4); n > 10 || x.held > 10 {
		t.Fatalf("ledger 4 holds %d entries, %d in all", n, x.held)
	}
}

// fakeLedger is a closed ledger's entries, for readFrom.
type fakeLedger struct {
	id      int64
	entries [][]byte
	reads   int
}

func (f *fakeLedger) fetch(_ context.Context, lo, hi int64) ([][]byte, error) {
	f.reads++
	if lo < 0 || hi >= int64(len(f.entries)) || hi < lo {
		return nil, fmt.Errorf("fetch %d..%d of %d entries", lo, hi, len(f.entries))
	}
	return f.entries[lo : hi+1], nil
}

func (f *fakeLedger) ref(first, last uint64) ledgerRef {
	return ledgerRef{id: f.id, first: first, last: last, entries: int64(len(f.entries))}
}

func TestReadFromChecks(t *testing.T) {
	msg := func(seq uint64) Message { return Message{Seq: seq, Subject: "s", Time: t0} }
	batch := func(from, to uint64) []byte {
		var ms []Message
		for s := from; s <= to; s++ {
			ms = append(ms, msg(s))
		}
		return EncodeBatch(nil, ms, Local{})
	}
	for name, c := range map[string]struct {
		entries [][]byte
		want    string
	}{
		"gap":         {[][]byte{batch(1, 2), batch(4, 5)}, "entry 1 holds seqs from 4, want 3"},
		"wrong first": {[][]byte{batch(2, 5)}, "entry 0 holds seqs from 2, want 1"},
		"short":       {[][]byte{batch(1, 2), batch(3, 4)}, "ends at seq 4, its list entry at 5"},
		"corrupt":     {[][]byte{batch(1, 2), {9}}, "entry 1: mledger: corrupt: entry version 9"},
	} {
		f := &fakeLedger{id: 7, entries: c.entries}
		_, err := readFrom(context.Background(), newEntryIndex(100), f.ref(1, 5), Local{}, 5, 1, f.fetch)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrCorrupt with %q", name, err, c.want)
		}
	}
	// v1 and v2 entries read alike (v1: one message each).
	f := &fakeLedger{id: 8, entries: [][]byte{encodeV1(nil, &Message{Seq: 1, Time: t0}), batch(2, 4)}}
	got, err := readFrom(context.Background(), newEntryIndex(100), f.ref(1, 4), Local{}, 3, 2, f.fetch)
	if err != nil || len(got) != 2 || got[0].Seq != 3 || got[1].Seq != 4 {
		t.Fatalf("mixed read: %+v, %v", got, err)
	}
}

// TestBatchPipelineAgainstModel drives the batching policy the way the
// ML does — publishes of random sizes, rollovers to a next ledger, entry
// confirmations in each writer's order, reads — with entries encoded
// for real into fake ledgers, and checks: at most K entries in flight,
// and none held back while fewer are; entries within the caps and never
// spanning ledgers; sequences gap-free within and across entries and
// ledgers; answers (done callbacks) in sequence order once their entry
// is confirmed; and every message read back through readFrom, with the
// index the ML builds while writing and with a fresh (small) one learnt
// from the entries, in order or at random. Messages have no origin, a
// local one (compact records) or a replicated one, at random.
func TestBatchPipelineAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(1, 5).Draw(t, "K")
		maxMsgs := rapid.IntRange(1, 8).Draw(t, "max msgs")
		maxBytes := rapid.IntRange(batchHeaderSize+1, 400).Draw(t, "max bytes")
		b := newBatcher(k, maxMsgs, maxBytes)
		written := newEntryIndex(1 << 20)

		type ledgerSim struct {
			led      *openLedger
			first    uint64
			entries  [][]byte
			inflight []*sentEntry // appended, unconfirmed, in entry order
		}
		var ledgers []*ledgerSim
		cur := func() *ledgerSim { return ledgers[len(ledgers)-1] }
		roll := func(first uint64) {
			ledgers = append(ledgers, &ledgerSim{led: &openLedger{id: int64(len(ledgers) + 1), firstSeq: first}, first: first})
		}
		roll(1)
		var published []Message
		var queue []*item // unanswered, in publish order
		var answered uint64
		t0 := time.Unix(1700000000, 0)
		local := Local{Region: "us-east", Incarnation: "7d0c5f8e-4b1a-4f7e-9a65-3e2d1c0b9a88"}
		var localSeq, remoteSeq uint64

		// send is ML.send with the writer replaced by the fake ledgers.
		send := func() {
			for {
				items := b.next()
				if items == nil {
					break
				}
				var ls *ledgerSim
				for _, l := range ledgers {
					if l.led == items[0].led {
						ls = l
					}
				}
				size := batchHeaderSize
				for i, it := range items {
					size += int(it.size)
					if it.led != ls.led || (i > 0 && it.seq != items[i-1].seq+1) {
						t.Fatalf("entry %v spans ledgers or has a gap", seqsOf(items))
					}
				}
				if len(items) > maxMsgs || (len(items) > 1 && size > maxBytes) {
					t.Fatalf("entry of %d messages, %d bytes: caps %d, %d", len(items), size, maxMsgs, maxBytes)
				}
				buf := appendBatchHeader(nil, items[0].seq, len(items))
				for _, it := range items {
					buf = append(buf, it.rec...)
				}
				e := &sentEntry{led: ls.led, id: int64(len(ls.entries)), items: items}
				if !written.add(ls.led.id, e.id, items[0].seq, len(items)) {
					t.Fatalf("index refused entry %d of ledger %d", e.id, ls.led.id)
				}
				ls.entries = append(ls.entries, buf)
				ls.inflight = append(ls.inflight, e)
			}
			inflight := 0
			for _, l := range ledgers {
				inflight += len(l.inflight)
			}
			if inflight > k || inflight != b.inflight || (inflight < k && b.queued() > 0) {
				t.Fatalf("%d in flight (batcher %d), K %d, %d queued", inflight, b.inflight, k, b.queued())
			}
		}
		// complete answers what can be answered, as the completer does.
		complete := func() {
			for len(queue) > 0 && queue[0].confirmed {
				if queue[0].seq != answered+1 {
					t.Fatalf("answered seq %d after %d", queue[0].seq, answered)
				}
				answered++
				queue = queue[1:]
			}
		}

		for range rapid.IntRange(1, 120).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op <= 5: // publish
				seq := uint64(len(published) + 1)
				m := Message{
					Seq: seq, Subject: rapid.SampledFrom([]string{"a", "b.c"}).Draw(t, "subject"),
					Data: make([]byte, rapid.IntRange(0, 150).Draw(t, "data")),
					Time: t0.Add(time.Duration(seq) * time.Millisecond).UTC(),
				}
				m.Data = append(m.Data[:0], fmt.Sprint(seq)...)[:len(m.Data):len(m.Data)]
				if len(m.Data) == 0 {
					m.Data = nil
				}
				switch rapid.IntRange(0, 2).Draw(t, "origin") {
				case 1:
					localSeq++
					m.Origin = Origin{Region: local.Region, Incarnation: local.Incarnation, Seq: localSeq, Time: m.Time}
				case 2:
					remoteSeq++
					m.Origin = Origin{Region: "eu-west", Incarnation: "E1", Seq: remoteSeq, Time: m.Time.Add(-time.Second)}
				}
				rec := appendRecord(nil, &m, local)
				if len(rec) != EncodedSize(&m, local) {
					t.Fatalf("record of %d bytes, EncodedSize %d", len(rec), EncodedSize(&m, local))
				}
				it := &item{seq: seq, led: cur().led, rec: rec, msg: storedMessage(rec, &m), size: int64(len(rec))}
				published = append(published, m)
				queue = append(queue, it)
				b.push(it)
				send()
			case op <= 7: // a writer confirms its oldest entry
				var busy []*ledgerSim
				for _, l := range ledgers {
					if len(l.inflight) > 0 {
						busy = append(busy, l)
					}
				}
				if len(busy) == 0 {
					continue
				}
				l := busy[rapid.IntRange(0, len(busy)-1).Draw(t, "writer")]
				e := l.inflight[0]
				l.inflight = l.inflight[1:]
				for _, it := range e.items {
					it.confirmed = true
				}
				b.done()
				complete()
				send()
			case op == 8: // rollover: the next message goes to a new ledger
				if len(cur().entries) > 0 || b.queued() > 0 {
					roll(uint64(len(published) + 1))
				}
			case op == 9: // read a random published message from its ledger
				if len(published) == 0 {
					continue
				}
				seq := uint64(rapid.IntRange(1, len(published)).Draw(t, "read seq"))
				for _, l := range ledgers {
					if seq < l.first || len(l.entries) == 0 {
						continue
					}
					if _, _, ok := written.find(l.led.id, seq); !ok {
						continue // not sent yet, or another ledger
					}
					f := &fakeLedger{id: l.led.id, entries: l.entries}
					end := l.first + uint64(len(published)) // upper bound; the last entry's end is checked below
					n, next := written.known(l.led.id)
					end = min(end, next-1)
					got, err := readFrom(context.Background(), written, ledgerRef{id: f.id, first: l.first, last: end, entries: n},
						local, seq, int64(rapid.IntRange(1, 4).Draw(t, "chunk")), f.fetch)
					if err != nil || got[0].Seq != seq || !sameMessage(got[0], published[seq-1]) {
						t.Fatalf("read %d: %+v, %v", seq, got, err)
					}
				}
			}
		}
		// Drain: every writer confirms everything; all answered in order.
		for b.queued() > 0 || b.inflight > 0 {
			for _, l := range ledgers {
				for _, e := range l.inflight {
					for _, it := range e.items {
						it.confirmed = true
					}
					b.done()
				}
				l.inflight = nil
			}
			complete()
			send()
		}
		complete()
		if answered != uint64(len(published)) || len(queue) != 0 {
			t.Fatalf("%d of %d answered", answered, len(published))
		}
		// The ledgers hold every message once, gap-free, each in the
		// ledger it was published to; reads return every message, with
		// the index built while writing and with small fresh ones
		// (learning, and evicting, as they go).
		next := uint64(1)
		fresh := newEntryIndex(rapid.IntRange(1, 6).Draw(t, "fresh budget"))
		for _, l := range ledgers {
			if len(l.entries) == 0 {
				continue
			}
			if l.first != next {
				t.Fatalf("ledger %d starts at %d, want %d", l.led.id, l.first, next)
			}
			for e, p := range l.entries {
				msgs, err := DecodeBatch(p, local)
				if err != nil || msgs[0].Seq != next {
					t.Fatalf("ledger %d entry %d: first %d (want %d), %v", l.led.id, e, msgs[0].Seq, next, err)
				}
				next += uint64(len(msgs))
			}
			f := &fakeLedger{id: l.led.id, entries: l.entries}
			ref := ledgerRef{id: f.id, first: l.first, last: next - 1, entries: int64(len(l.entries))}
			for _, x := range []*entryIndex{written, fresh} {
				for seq := l.first; seq <= ref.last; {
					got, err := readFrom(context.Background(), x, ref, local, seq, int64(rapid.IntRange(1, 3).Draw(t, "chunk")), f.fetch)
					if err != nil {
						t.Fatalf("read ledger %d from %d: %v", f.id, seq, err)
					}
					for _, m := range got {
						if m.Seq != seq || !sameMessage(m, published[seq-1]) {
							t.Fatalf("read %+v, want %+v", m, published[seq-1])
						}
						seq++
					}
				}
			}
		}
		if next != uint64(len(published)+1) {
			t.Fatalf("ledgers hold up to %d, published %d", next-1, len(published))
		}
	})
}
