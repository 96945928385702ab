package core

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// writerModel is the naive specification of the Writer (ARCHITECTURE §2):
// it keeps the set of valid acks of the current epoch and recomputes the
// LAC from scratch, entry by entry.
type writerModel struct {
	e, qw, qa int
	segments  []Segment // committed
	version   int64     // of the committed record
	epoch     int64
	first     int64 // first entry of the current segment
	next      int64
	lengths   []int64 // cumulative length per entry
	changing  bool    // a valid bookie failure not yet covered by a commit
	failed    []BookieID
	chosen    map[BookieID]BookieID // failed → replacement picked by the test
	group     []BookieID            // failed bookies the update in flight replaces
	acks      map[int64]map[BookieID]bool
	sent      map[[2]int64][]BookieID // (epoch, entry) → bookies sent to
	completed []int64
}

func (m *writerModel) ensemble() []BookieID { return m.segments[len(m.segments)-1].Ensemble }

// lac recomputes the LAC: entries before the current segment completed
// (the segment starts at the LAC when its change began); from there an
// entry completes with Qa acks of the current epoch from its write set in
// the current ensemble, and every earlier one completed. Nothing completes
// while a change is under way.
func (m *writerModel) lac() int64 {
	lac := m.first - 1
	if m.changing {
		return lac
	}
	for e := m.first; e < m.next; e++ {
		n := 0
		for _, i := range WriteSet(e, m.e, m.qw) {
			if m.acks[e][m.ensemble()[i]] {
				n++
			}
		}
		if n < m.qa {
			break
		}
		lac = e
	}
	return lac
}

func (m *writerModel) ack(s Send) {
	if s.Epoch != m.epoch || m.changing {
		return
	}
	if m.acks[s.Entry] == nil {
		m.acks[s.Entry] = map[BookieID]bool{}
	}
	m.acks[s.Entry][s.Bookie] = true
}

// fail records a bookie failure; it reports whether it was valid (new).
func (m *writerModel) fail(s Send) bool {
	if s.Epoch != m.epoch || !slices.Contains(m.ensemble(), s.Bookie) || slices.Contains(m.failed, s.Bookie) {
		return false
	}
	if !m.changing {
		m.first = m.lac() + 1
		m.changing = true
		m.acks = map[int64]map[BookieID]bool{}
	}
	m.failed = append(m.failed, s.Bookie)
	return true
}

// expectUpdate is the metadata update m expects for the failed bookies.
func (m *writerModel) expectUpdate() []Segment {
	segs := slices.Clone(m.segments)
	ens := slices.Clone(m.ensemble())
	for _, b := range m.failed {
		ens[slices.Index(ens, b)] = m.chosen[b]
	}
	seg := Segment{FirstEntry: m.first, Ensemble: ens}
	if segs[len(segs)-1].FirstEntry == m.first {
		segs[len(segs)-1] = seg
	} else {
		segs = append(segs, seg)
	}
	return segs
}

type writerHarness struct {
	t        *rapid.T
	w        *Writer
	m        *writerModel
	pool     []BookieID
	inflight []Send
	acked    []Send
	update   *Metadata // in flight
	ended    bool
}

// step drains the writer's Ready and checks it against the model.
func (h *writerHarness) step(newlyFailed []BookieID) {
	t, m := h.t, h.m
	var rd Ready
	if h.w.HasReady() {
		rd = h.w.Ready()
		h.w.Advance(rd)
	}
	if !slices.Equal(rd.Replace, newlyFailed) {
		t.Fatalf("Replace %v, model's new failures %v", rd.Replace, newlyFailed)
	}
	m.completed = append(m.completed, rd.Completed...)
	if rd.Err != nil {
		h.ended = true
	}
	if h.ended {
		return
	}
	lac := m.lac()
	if got := h.w.LAC(); got != lac {
		t.Fatalf("LAC %d, model %d", got, lac)
	}
	for i, e := range m.completed {
		if e != int64(i) {
			t.Fatalf("completions %v not 0..%d in order", m.completed, lac)
		}
	}
	if int64(len(m.completed)) != lac+1 {
		t.Fatalf("completions %v, LAC %d", m.completed, lac)
	}
	for _, s := range rd.Sends {
		ws := WriteSet(s.Entry, m.e, m.qw)
		if m.changing || s.Epoch != m.epoch || s.LAC != lac || s.Entry <= lac || s.Length != m.lengths[s.Entry] ||
			!slices.ContainsFunc(ws, func(i int) bool { return m.ensemble()[i] == s.Bookie }) {
			t.Fatalf("bad send %+v (model: epoch %d lac %d changing %t ensemble %v)", s, m.epoch, lac, m.changing, m.ensemble())
		}
		k := [2]int64{s.Epoch, s.Entry}
		m.sent[k] = append(m.sent[k], s.Bookie)
	}
	h.inflight = append(h.inflight, rd.Sends...)
	if !m.changing {
		for e := m.first; e < m.next; e++ {
			var want []BookieID
			for _, i := range WriteSet(e, m.e, m.qw) {
				want = append(want, m.ensemble()[i])
			}
			if !slices.Equal(m.sent[[2]int64{m.epoch, e}], want) {
				t.Fatalf("entry %d epoch %d sent to %v, want %v", e, m.epoch, m.sent[[2]int64{m.epoch, e}], want)
			}
		}
	}
	if u := rd.MetadataUpdate; u != nil {
		for _, b := range m.failed {
			if _, ok := m.chosen[b]; !ok {
				t.Fatalf("update %v before %s has a replacement", fmtSegments(u.Segments), b)
			}
		}
		want := m.expectUpdate()
		if u.Version != m.version || u.State != StateOpen || len(u.Segments) != len(want) {
			t.Fatalf("update v%d %s %s, want v%d %s", u.Version, u.State, fmtSegments(u.Segments), m.version, fmtSegments(want))
		}
		for i := range want {
			if !u.Segments[i].equal(want[i]) {
				t.Fatalf("update %s, want %s", fmtSegments(u.Segments), fmtSegments(want))
			}
		}
		m.group = slices.Clone(m.failed)
		h.update = u
	}
}

func (h *writerHarness) free() []BookieID {
	var out []BookieID
	for _, b := range h.pool {
		used := slices.Contains(h.m.ensemble(), b) || slices.Contains(h.m.failed, b)
		if h.update != nil {
			used = used || slices.Contains(h.update.Segments[len(h.update.Segments)-1].Ensemble, b)
		}
		for _, c := range h.m.chosen {
			used = used || c == b
		}
		if !used {
			out = append(out, b)
		}
	}
	return out
}

func (h *writerHarness) replace(old, repl BookieID) {
	if err := h.w.Replace(old, repl, ""); err != nil {
		h.t.Fatalf("Replace(%s, %s): %v (free %v)", old, repl, err, h.free())
	}
	h.m.chosen[old] = repl
}

func (h *writerHarness) commit() {
	m := h.m
	m.version++
	if err := h.w.MetadataCommitted(m.version); err != nil {
		h.t.Fatalf("MetadataCommitted: %v", err)
	}
	m.segments = m.expectUpdateFor(m.group)
	for _, b := range m.group {
		delete(m.chosen, b)
	}
	m.failed = slices.DeleteFunc(m.failed, func(b BookieID) bool { return slices.Contains(m.group, b) })
	m.group, h.update = nil, nil
	m.epoch++
	m.acks = map[int64]map[BookieID]bool{}
	m.changing = len(m.failed) > 0
}

// expectUpdateFor is the segments after replacing group.
func (m *writerModel) expectUpdateFor(group []BookieID) []Segment {
	saved := m.failed
	m.failed = group
	defer func() { m.failed = saved }()
	return m.expectUpdate()
}

// TestWriterLACMatchesModel: under random E/Qw/Qa, adds, ack orders,
// duplicate and stale acks, bookie failures (also during a change and
// while its CAS is in flight), replacements, CAS outcomes, the Writer's
// LAC after every step equals the naive model's, completions come in
// order exactly once, sends go to the right write sets at the right
// epoch, and ensemble updates are the expected ones. At the end, with
// failures stopped, everything completes and Close closes at the LAC.
func TestWriterLACMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := rapid.IntRange(1, 5).Draw(t, "E")
		qw := rapid.IntRange(1, e).Draw(t, "Qw")
		qa := rapid.IntRange(1, qw).Draw(t, "Qa")
		var pool []BookieID
		for i := range 2*e + 2 {
			pool = append(pool, BookieID(fmt.Sprintf("k%d", i+1)))
		}
		md := Metadata{LedgerID: 7, EnsembleSize: e, WriteQuorum: qw, AckQuorum: qa, State: StateOpen,
			LastEntryID: NoEntry, MasterKey: []byte("k"), Segments: []Segment{{Ensemble: slices.Clone(pool[:e])}}, Version: 1}
		w, err := NewWriter(md)
		if err != nil {
			t.Fatal(err)
		}
		m := &writerModel{e: e, qw: qw, qa: qa, segments: md.Clone().Segments, version: 1,
			chosen: map[BookieID]BookieID{}, acks: map[int64]map[BookieID]bool{}, sent: map[[2]int64][]BookieID{}}
		h := &writerHarness{t: t, w: w, m: m, pool: pool}
		steps := rapid.IntRange(1, 120).Draw(t, "steps")
		for range steps {
			var failed []BookieID
			switch op := rapid.IntRange(0, 15).Draw(t, "op"); {
			case op <= 2:
				n := rapid.IntRange(0, 100).Draw(t, "len")
				id, err := w.Add(n)
				if err != nil || id != m.next {
					t.Fatalf("Add: %d, %v; want %d", id, err, m.next)
				}
				m.lengths = append(m.lengths, m.lengths0()+int64(n))
				m.next++
			case op <= 8 && len(h.inflight) > 0:
				i := rapid.IntRange(0, len(h.inflight)-1).Draw(t, "send")
				s := h.inflight[i]
				h.inflight = slices.Delete(h.inflight, i, i+1)
				w.Acked(s)
				m.ack(s)
				h.acked = append(h.acked, s)
			case op == 9 && len(h.acked) > 0:
				s := rapid.SampledFrom(h.acked).Draw(t, "dup")
				w.Acked(s)
				m.ack(s)
			case op == 10 && len(h.inflight) > 0 && len(m.failed) < len(pool)-e-2:
				i := rapid.IntRange(0, len(h.inflight)-1).Draw(t, "failing")
				s := h.inflight[i]
				h.inflight = slices.Delete(h.inflight, i, i+1)
				reason := rapid.SampledFrom([]FailReason{FailTimeout, FailUnavailable, FailWrongInstance, FailReadOnly}).Draw(t, "reason")
				w.Failed(s, reason)
				if m.fail(s) {
					failed = append(failed, s.Bookie)
				}
			case op <= 12 && len(w.NeedReplacement()) > 0:
				old := rapid.SampledFrom(w.NeedReplacement()).Draw(t, "old")
				if rapid.IntRange(0, 4).Draw(t, "bad") == 0 {
					bad := rapid.SampledFrom(m.ensemble()).Draw(t, "in-ensemble")
					if err := w.Replace(old, bad, ""); !errors.Is(err, ErrBadReplacement) {
						t.Fatalf("Replace(%s, %s) in the ensemble: %v", old, bad, err)
					}
					break
				}
				h.replace(old, rapid.SampledFrom(h.free()).Draw(t, "repl"))
			case op == 13 && h.update != nil:
				h.commit()
			case op == 14 && h.update != nil:
				// Rewritten by a tool, unchanged: retried at the new version.
				m.version++
				cur := w.Metadata()
				cur.Version = m.version
				if err := w.MetadataConflict(cur); err != nil {
					t.Fatal(err)
				}
				h.update = nil
			case op == 15 && rapid.IntRange(0, 9).Draw(t, "end") == 0:
				if h.update != nil && rapid.Bool().Draw(t, "recovering") {
					cur := w.Metadata()
					cur.State = StateInRecovery
					_ = w.MetadataConflict(cur)
					if !errors.Is(w.Err(), ErrRecovering) {
						t.Fatalf("CAS conflict IN_RECOVERY: %v", w.Err())
					}
				} else {
					w.Failed(Send{Bookie: m.ensemble()[0]}, FailFenced)
					if !errors.Is(w.Err(), ErrFenced) {
						t.Fatalf("fenced: %v", w.Err())
					}
				}
			}
			h.step(failed)
			if h.ended {
				return
			}
		}
		h.drain()
	})
}

func (m *writerModel) lengths0() int64 {
	if len(m.lengths) == 0 {
		return 0
	}
	return m.lengths[len(m.lengths)-1]
}

// drain stops failures and delivers everything: all entries complete.
func (h *writerHarness) drain() {
	t, m := h.t, h.m
	for i := 0; h.w.LAC() < m.next-1 || m.changing; i++ {
		if i > 100 {
			t.Fatalf("no progress: LAC %d next %d changing %t", h.w.LAC(), m.next, m.changing)
		}
		for _, b := range h.w.NeedReplacement() {
			h.replace(b, h.free()[0])
		}
		h.step(nil)
		if h.update != nil {
			h.commit()
		}
		sends := h.inflight
		h.inflight = nil
		for _, s := range sends {
			h.w.Acked(s)
			m.ack(s)
		}
		h.step(nil)
	}
	md, err := h.w.Close()
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	if md.State != StateClosed || md.LastEntryID != m.next-1 || md.Length != m.lengths0() || md.Version != m.version {
		t.Fatalf("Close: %s last %d length %d v%d; want last %d length %d v%d", md.State, md.LastEntryID, md.Length,
			md.Version, m.next-1, m.lengths0(), m.version)
	}
}
