package core

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// simBookie is a bookie of the recovery simulation.
type simBookie struct {
	entries   map[int64]storedEntry
	corrupt   map[int64]bool // copies that fail their checksum (answer unknown)
	fenced    bool
	down      bool // unreachable: every request fails
	crashed   bool // went down during recovery (its disk is intact): every request fails
	wiped     bool // answers as another instance: every request fails
	dropFence bool // its fence request is lost (a fenced read still fences it)
}

func (b *simBookie) out() bool { return b.down || b.crashed || b.wiped }

func (b *simBookie) lac() int64 {
	lac := NoEntry
	for _, s := range b.entries {
		lac = max(lac, s.lac)
	}
	return lac
}

type simWorld struct {
	md      Metadata // committed metadata at the crash
	bookies map[BookieID]*simBookie
	pool    []BookieID
	lengths []int64 // cumulative length per entry, as the writer sent it
	acked   int64   // the writer's LAC at the crash: every entry up to it was acknowledged
	pushed  int64
	lost    map[int64]int // copies of acknowledged entries lost to faults, per entry
	// etcd is the record as stored during recovery (ensemble changes of
	// recovery committed; the close is not stored, so that a second
	// recovery starts where a recoverer whose close CAS was lost would).
	etcd Metadata
	// noPlacement: a recovery ended because no replacement was left.
	noPlacement bool
	changes     int // recovery ensemble changes committed
}

// simStats counts, over a property run, recoveries that changed the
// ensemble and closed: the property must exercise them.
var simStats struct{ changedAndClosed, closed int }

// writeHistory runs a Writer against simulated bookies: random adds,
// deliveries (acked, stored with the ack lost, or lost), bookie failures
// with ensemble changes (committed or still in flight at the crash), then
// the writer crashes.
func writeHistory(t *rapid.T) *simWorld {
	e := rapid.IntRange(1, 5).Draw(t, "E")
	qw := rapid.IntRange(1, e).Draw(t, "Qw")
	qa := rapid.IntRange(1, qw).Draw(t, "Qa")
	sw := &simWorld{bookies: map[BookieID]*simBookie{}, lost: map[int64]int{}}
	var pool []BookieID
	for i := range e + 3 {
		id := BookieID(fmt.Sprintf("k%d", i+1))
		pool = append(pool, id)
		sw.bookies[id] = &simBookie{entries: map[int64]storedEntry{}, corrupt: map[int64]bool{}}
	}
	md := Metadata{LedgerID: 9, EnsembleSize: e, WriteQuorum: qw, AckQuorum: qa, State: StateOpen,
		LastEntryID: NoEntry, MasterKey: []byte("k"), Segments: []Segment{{Ensemble: slices.Clone(pool[:e])}}, Version: 1}
	w, err := NewWriter(md)
	if err != nil {
		t.Fatal(err)
	}
	var inflight []Send
	var update *Metadata
	version := int64(1)
	for range rapid.IntRange(0, 150).Draw(t, "steps") {
		switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
		case op <= 2:
			n := rapid.IntRange(0, 50).Draw(t, "len")
			if _, err := w.Add(n); err != nil {
				t.Fatal(err)
			}
			prev := int64(0)
			if len(sw.lengths) > 0 {
				prev = sw.lengths[len(sw.lengths)-1]
			}
			sw.lengths = append(sw.lengths, prev+int64(n))
		case op <= 7 && len(inflight) > 0:
			i := rapid.IntRange(0, len(inflight)-1).Draw(t, "send")
			s := inflight[i]
			inflight = slices.Delete(inflight, i, i+1)
			switch rapid.IntRange(0, 5).Draw(t, "fate") {
			case 0: // lost
			case 1: // stored, ack lost
				sw.bookies[s.Bookie].entries[s.Entry] = storedEntry{lac: s.LAC, length: s.Length}
			default:
				sw.bookies[s.Bookie].entries[s.Entry] = storedEntry{lac: s.LAC, length: s.Length}
				w.Acked(s)
			}
		case op == 8 && len(inflight) > 0:
			i := rapid.IntRange(0, len(inflight)-1).Draw(t, "failing")
			w.Failed(inflight[i], FailTimeout)
			inflight = slices.Delete(inflight, i, i+1)
		case op == 9 && update != nil:
			version++
			if err := w.MetadataCommitted(version); err != nil {
				t.Fatal(err)
			}
			update = nil
		}
		for _, old := range w.NeedReplacement() {
			// The first bookie Replace accepts (none may be free).
			for _, b := range rapid.Permutation(pool).Draw(t, "placement") {
				if w.Replace(old, b, "") == nil {
					break
				}
			}
		}
		rd := w.Ready()
		w.Advance(rd)
		inflight = append(inflight, rd.Sends...)
		if rd.MetadataUpdate != nil {
			update = rd.MetadataUpdate
		}
	}
	sw.md = w.Metadata()
	sw.acked, sw.pushed, sw.pool = w.LAC(), w.LastAddPushed(), pool
	return sw
}

// fits reports whether losing the copies for which holds is true keeps
// every acknowledged entry within the budget (at most Qa−1 copies of it
// lost on its write set), and records the loss.
func (sw *simWorld) fits(holds func(b BookieID, e int64) bool) bool {
	md := &sw.md
	add := map[int64]int{}
	for e := int64(0); e <= sw.acked; e++ {
		for _, m := range md.writeSetOf(md.SegmentFor(e), e) {
			if _, ok := sw.bookies[m.id].entries[e]; ok && holds(m.id, e) {
				add[e]++
			}
		}
		if sw.lost[e]+add[e] > md.AckQuorum-1 {
			return false
		}
	}
	for e, n := range add {
		sw.lost[e] += n
	}
	return true
}

// injectFaults makes bookies unreachable, wipes some and corrupts copies,
// never losing more than Qa−1 copies of an acknowledged entry on its
// write set (what the ack quorum tolerates); fence requests may be lost.
func (sw *simWorld) injectFaults(t *rapid.T) {
	fits := sw.fits
	ids := slices.Sorted(func(yield func(BookieID) bool) {
		for id := range sw.bookies {
			if !yield(id) {
				return
			}
		}
	})
	pick := func(what string) []BookieID {
		n := rapid.IntRange(0, 2).Draw(t, what)
		return rapid.Permutation(ids).Draw(t, what+" who")[:n]
	}
	for _, id := range pick("down") {
		sw.bookies[id].down = true
	}
	for _, id := range pick("drop fence") {
		sw.bookies[id].dropFence = true
	}
	for _, id := range pick("wipe") {
		if b := sw.bookies[id]; fits(func(h BookieID, _ int64) bool { return h == id }) {
			b.wiped = true
			b.entries = map[int64]storedEntry{}
		}
	}
	type copyAt struct {
		b BookieID
		e int64
	}
	var copies []copyAt
	for _, id := range ids {
		for _, e := range slices.Sorted(maps.Keys(sw.bookies[id].entries)) {
			copies = append(copies, copyAt{id, e})
		}
	}
	if len(copies) == 0 {
		return
	}
	// Favour the copies of the last acknowledged entries: losing those is
	// what could make recovery close short.
	slices.SortStableFunc(copies, func(x, y copyAt) int { return cmp.Compare(-x.e, -y.e) })
	for range rapid.IntRange(0, 4).Draw(t, "corruptions") {
		c := copies[rapid.IntRange(0, min(len(copies)-1, rapid.IntRange(0, len(copies)-1).Draw(t, "spread"))).Draw(t, "corrupt")]
		if b := sw.bookies[c.b]; !b.corrupt[c.e] && fits(func(h BookieID, x int64) bool { return h == c.b && x == c.e }) {
			b.corrupt[c.e] = true
		}
	}
}

// writerCanComplete is the naive form of the fencing rule: whether some
// Qa bookies of some write set of seg are all unfenced, so that the old
// writer could still complete an entry there.
func writerCanComplete(seg Segment, qw, qa int, fenced map[BookieID]bool) bool {
	e := len(seg.Ensemble)
	for start := range e {
		var ws []BookieID
		for k := range qw {
			ws = append(ws, seg.Ensemble[(start+k)%e])
		}
		for mask := 0; mask < 1<<qw; mask++ {
			n, open := 0, true
			for i, b := range ws {
				if mask&(1<<i) != 0 {
					n++
					open = open && !fenced[b]
				}
			}
			if n == qa && open {
				return true
			}
		}
	}
	return false
}

// recoverOnce runs a Recovery of sw.etcd against the simulation to its
// end. Fences are answered in request order; reads, rewrites and the
// CASes of ensemble changes in a random order (recovery's decisions do
// not depend on it). Placement offers a random bookie of the pool that
// Replace accepts (it may be unreachable: its rewrites then fail and it is
// replaced in turn). With crash, bookies may crash during recovery,
// within what the ack quorum tolerates for acknowledged entries.
func (sw *simWorld) recoverOnce(t *rapid.T, crash bool) (*Metadata, error) {
	r, err := NewRecovery(sw.etcd, RecoveryConfig{ReadAhead: rapid.IntRange(1, 4).Draw(t, "readahead")})
	if err != nil {
		t.Fatal(err)
	}
	type req struct {
		read    *ReadRequest
		rewrite *RewriteRequest
		cas     *Metadata
	}
	var pending []req
	crashes := 0
	if crash {
		crashes = rapid.IntRange(0, 2).Draw(t, "crashes")
	}
	for i := 0; ; i++ {
		if i > 100000 {
			t.Fatal("recovery does not end")
		}
		for _, old := range r.NeedReplacement() {
			ok := false
			for _, b := range rapid.Permutation(sw.pool).Draw(t, "placement") {
				if ok = r.Replace(old, b, "") == nil; ok {
					break
				}
			}
			if !ok {
				sw.noPlacement = true
				r.ReplacementUnavailable(old, errors.New("no bookie left"))
			}
		}
		rd := r.Ready()
		r.Advance(rd)
		if rd.Close != nil || rd.Err != nil {
			return rd.Close, rd.Err
		}
		for _, f := range rd.Fences {
			b := sw.bookies[f.Bookie]
			if b.out() || b.dropFence {
				r.FenceFailed(f.Bookie)
				continue
			}
			b.fenced = true
			r.Fenced(f.Bookie, b.lac())
		}
		for _, x := range rd.Reads {
			pending = append(pending, req{read: &x})
		}
		for _, x := range rd.Rewrites {
			pending = append(pending, req{rewrite: &x})
		}
		if u := rd.MetadataUpdate; u != nil {
			if err := u.Validate(); err != nil || u.State != StateInRecovery || u.FencedSegment == nil {
				t.Fatalf("metadata update %+v: %v", *u, err)
			}
			pending = append(pending, req{cas: u})
		}
		if len(rd.Fences) > 0 || len(rd.Replace) > 0 {
			continue
		}
		if len(pending) == 0 {
			t.Fatalf("recovery waits for nothing (phase %s)", r.phase)
		}
		if crashes > 0 && rapid.IntRange(0, 4).Draw(t, "crash now") == 0 {
			crashes--
			id := rapid.SampledFrom(sw.pool).Draw(t, "crashing")
			if b := sw.bookies[id]; !b.out() && sw.fits(func(h BookieID, _ int64) bool { return h == id }) {
				b.crashed = true
			}
		}
		j := rapid.IntRange(0, len(pending)-1).Draw(t, "answer")
		p := pending[j]
		pending = slices.Delete(pending, j, j+1)
		if u := p.cas; u != nil {
			// Segments before the fenced one never change.
			n := len(sw.md.Segments) - 1
			if u.Version != sw.etcd.Version || len(u.Segments) < n ||
				!slices.EqualFunc(u.Segments[:n], sw.md.Segments[:n], Segment.equal) ||
				!u.FencedSegment.equal(sw.md.Segments[n]) {
				t.Fatalf("update %+v over %+v", *u, sw.etcd)
			}
			sw.etcd = u.Clone()
			sw.etcd.Version++
			sw.changes++
			if err := r.MetadataCommitted(sw.etcd.Version); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if x := p.read; x != nil {
			b := sw.bookies[x.Bookie]
			switch s, ok := b.entries[x.Entry]; {
			case b.out():
				r.ReadResult(x.Bookie, x.Entry, Unknown())
			case b.corrupt[x.Entry]:
				b.fenced = true
				r.ReadResult(x.Bookie, x.Entry, Unknown())
			case ok:
				b.fenced = true
				r.ReadResult(x.Bookie, x.Entry, Found(payloadOf(x.Entry), s.length))
			default:
				b.fenced = true
				r.ReadResult(x.Bookie, x.Entry, Absent())
			}
			continue
		}
		x := p.rewrite
		b := sw.bookies[x.Bookie]
		if b.out() {
			r.RewriteFailed(x.Bookie, x.Entry)
			continue
		}
		if string(x.Payload) != string(payloadOf(x.Entry)) || x.LAC >= x.Entry || x.Length != sw.lengths[x.Entry] {
			t.Fatalf("bad rewrite %+v", *x)
		}
		b.entries[x.Entry] = storedEntry{lac: x.LAC, length: x.Length}
		delete(b.corrupt, x.Entry)
		r.RewriteAcked(x.Bookie, x.Entry)
	}
}

// TestRecoveryNeverClosesBelowAckedEntry: after a random writer history
// and faults within what the quorums tolerate, before and during
// recovery, with replacement bookies to change the ensemble to, recovery
// either closes the ledger at or after every acknowledged entry, with its
// exact length, and with every entry up to its end readable from its
// final write set (every recovered one on Qa bookies); or it returns
// ErrRetry. A second recovery, from the record the first left (as if its
// close CAS was lost), gives the same answer. Retry is certain when
// fencing cannot cover the write sets, and never happens without faults.
func TestRecoveryNeverClosesBelowAckedEntry(t *testing.T) {
	simStats.changedAndClosed, simStats.closed = 0, 0
	rapid.Check(t, func(t *rapid.T) {
		sw := writeHistory(t)
		sw.injectFaults(t)
		md, err := BeginRecovery(sw.md)
		if err != nil {
			t.Fatal(err)
		}
		md.Version++
		sw.etcd = md.Clone()
		closed, err := sw.recoverOnce(t, true)
		seg := md.Segments[len(md.Segments)-1]
		fenceable := map[BookieID]bool{}
		faults := false
		for id, b := range sw.bookies {
			fenceable[id] = !b.down && !b.wiped && !b.dropFence
			faults = faults || b.out() || b.dropFence || len(b.corrupt) > 0
		}
		if writerCanComplete(seg, md.WriteQuorum, md.AckQuorum, fenceable) && closed != nil {
			t.Fatalf("closed at %d though fencing cannot cover the write sets", closed.LastEntryID)
		}
		if err != nil {
			if !errors.Is(err, ErrRetry) || closed != nil {
				t.Fatalf("recovery: %v", err)
			}
			if !faults {
				t.Fatalf("retry without faults: %v", err)
			}
			return
		}
		simStats.closed++
		if sw.changes > 0 {
			simStats.changedAndClosed++
		}
		sw.checkClosed(t, md, closed)
		// A second recovery starts from the record as the first left it.
		// Bookies that crashed stay down (one may have answered the first
		// before its crash: the second may then be unable to decide, but
		// never decide otherwise).
		crashed := false
		for _, b := range sw.bookies {
			crashed = crashed || b.crashed
		}
		sw.noPlacement = false
		again, err := sw.recoverOnce(t, false)
		if err != nil {
			if (sw.noPlacement || crashed) && errors.Is(err, ErrRetry) {
				return
			}
			t.Fatalf("second recovery: %v (first closed at %d)", err, closed.LastEntryID)
		}
		if again.LastEntryID != closed.LastEntryID || again.Length != closed.Length {
			t.Fatalf("second recovery closed at %d/%d bytes, first at %d/%d", again.LastEntryID, again.Length,
				closed.LastEntryID, closed.Length)
		}
		sw.checkClosed(t, md, again)
	})
	t.Logf("%d of %d closing recoveries changed the ensemble", simStats.changedAndClosed, simStats.closed)
	if simStats.closed > 100 && simStats.changedAndClosed == 0 {
		t.Fatal("no recovery changed the ensemble and closed")
	}
}

// checkClosed checks closed, the result of recovering md (as BeginRecovery
// returned it, before any ensemble change of recovery).
func (sw *simWorld) checkClosed(t *rapid.T, md Metadata, closed *Metadata) {
	last := closed.LastEntryID
	if err := closed.Validate(); err != nil || closed.State != StateClosed || closed.Version != sw.etcd.Version {
		t.Fatalf("closing metadata %+v (stored version %d): %v", closed, sw.etcd.Version, err)
	}
	if n := len(md.Segments); !slices.EqualFunc(closed.Segments[:n-1], md.Segments[:n-1], Segment.equal) ||
		closed.Segments[len(closed.Segments)-1].FirstEntry < md.Segments[n-1].FirstEntry {
		t.Fatalf("recovery changed segments before the last: %v → %v", md.Segments, closed.Segments)
	}
	if last < sw.acked || last > sw.pushed {
		t.Fatalf("closed at %d: acked through %d, pushed %d", last, sw.acked, sw.pushed)
	}
	want := int64(0)
	if last >= 0 {
		want = sw.lengths[last]
	}
	if closed.Length != want {
		t.Fatalf("length %d, want %d", closed.Length, want)
	}
	// The stopping rule, checked on the world: the entry after the last
	// is nowhere to be read, and Qw−Qa+1 bookies of its write set in the
	// fenced segment lack it (one that crashed during recovery may have
	// answered before or after its crash).
	absent := 0
	for _, m := range md.writeSetOf(md.SegmentFor(last+1), last+1) {
		b := sw.bookies[m.id]
		_, has := b.entries[last+1]
		switch {
		case b.down || b.wiped || b.corrupt[last+1] || (b.crashed && has):
		case has:
			t.Fatalf("closed at %d, but %s has entry %d", last, m.id, last+1)
		default:
			absent++
		}
	}
	if absent < md.WriteQuorum-md.AckQuorum+1 {
		t.Fatalf("closed at %d with %d bookies lacking entry %d", last, absent, last+1)
	}
	// Every entry is where readers of the closed ledger look for it: on
	// a bookie of its write set in the final segments with an intact copy
	// (one that crashed during recovery kept its disk); each recovered
	// one on Qa of them, as an acknowledged add would be.
	for e := int64(0); e <= last; e++ {
		n := 0
		for _, m := range closed.writeSetOf(closed.SegmentFor(e), e) {
			b := sw.bookies[m.id]
			if _, ok := b.entries[e]; ok && !b.wiped && !b.corrupt[e] && (!b.down || e <= sw.acked) {
				n++
			}
		}
		switch {
		case n == 0:
			t.Fatalf("entry %d on no bookie of its final write set (segments %v)", e, closed.Segments)
		case e > sw.acked && n < md.AckQuorum:
			t.Fatalf("recovered entry %d on %d bookies, want %d", e, n, md.AckQuorum)
		}
	}
}

// TestRecoveryRetriesWhenAllUnknown: with every bookie of the last
// segment answering unknown, recovery retries (here at fencing; reads
// are covered by TestRecoveryNeverClosesBelowAckedEntry and the scripts).
func TestRecoveryRetriesWhenAllUnknown(t *testing.T) {
	md := Metadata{LedgerID: 1, EnsembleSize: 3, WriteQuorum: 3, AckQuorum: 2, State: StateInRecovery,
		LastEntryID: NoEntry, MasterKey: []byte("k"), Segments: []Segment{{Ensemble: []BookieID{"a", "b", "c"}}}}
	r, err := NewRecovery(md, DefaultRecoveryConfig())
	if err != nil {
		t.Fatal(err)
	}
	rd := r.Ready()
	r.Advance(rd)
	for _, f := range rd.Fences {
		r.FenceFailed(f.Bookie)
	}
	rd = r.Ready()
	if !errors.Is(rd.Err, ErrRetry) || rd.Close != nil {
		t.Fatalf("Ready %+v", rd)
	}
}
