package ledger

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stratamesh/strata/bookie/ledger/core"
)

// simEntry is an entry as a simulated bookie stores it.
// simEntry is an entry a simulated bookie holds.
type simEntry struct{ lac, length int64 }

// recSim is a toy world for driving core.Recovery deterministically.
// recSim is a writer's and recoveries' bookies simulated in memory,
// answering the core's requests in FIFO order: deterministic interleavings
// of several recoveries without real bookies.
type recSim struct {
	t       *testing.T
	store   map[core.BookieID]map[int64]simEntry
	lac     map[core.BookieID]int64
	out     map[core.BookieID]bool // unreachable or wiped: unknown / failed
	failRW  func(b core.BookieID, entry int64) bool
	spares  []core.BookieID
	etcd    core.Metadata
	commits int
}

func newRecSim(t *testing.T, ids ...core.BookieID) *recSim {
	s := &recSim{t: t, store: map[core.BookieID]map[int64]simEntry{}, lac: map[core.BookieID]int64{},
		out: map[core.BookieID]bool{}, failRW: func(core.BookieID, int64) bool { return false }}
	for _, id := range ids {
		s.store[id] = map[int64]simEntry{}
		s.lac[id] = core.NoEntry
	}
	return s
}

func (s *recSim) put(b core.BookieID, e, lac, length int64) {
	s.store[b][e] = simEntry{lac, length}
	s.lac[b] = max(s.lac[b], lac)
}

// run drives r, answering every request in FIFO order, until it closes,
// fails, or stopAfterCommits metadata updates were committed (the
// recoverer then "crashes": nothing more is done). It returns the close.
func (s *recSim) run(r *core.Recovery, stopAfterCommits int) *core.Metadata {
	var queue []func()
	for i := 0; i < 10000; i++ {
		for _, old := range r.NeedReplacement() {
			ex := r.Exclude()
			ok := false
			for _, sp := range s.spares {
				if !slices.Contains(ex, sp) && r.Replace(old, sp, "") == nil {
					ok = true
					break
				}
			}
			if !ok {
				r.ReplacementUnavailable(old, fmt.Errorf("no spare"))
			}
		}
		rd := r.Ready()
		r.Advance(rd)
		if rd.Close != nil {
			return rd.Close
		}
		if rd.Err != nil {
			s.t.Logf("recovery ended: %v", rd.Err)
			return nil
		}
		for _, f := range rd.Fences {
			b := f.Bookie
			queue = append(queue, func() {
				if s.out[b] {
					r.FenceFailed(b)
				} else {
					r.Fenced(b, s.lac[b])
				}
			})
		}
		for _, rq := range rd.Reads {
			queue = append(queue, func() {
				se, ok := s.store[rq.Bookie][rq.Entry]
				switch {
				case s.out[rq.Bookie]:
					r.ReadResult(rq.Bookie, rq.Entry, core.Unknown())
				case ok:
					r.ReadResult(rq.Bookie, rq.Entry, core.Found(fmt.Appendf(nil, "p%d", rq.Entry), se.length))
				default:
					r.ReadResult(rq.Bookie, rq.Entry, core.Absent())
				}
			})
		}
		for _, w := range rd.Rewrites {
			queue = append(queue, func() {
				if s.out[w.Bookie] || s.failRW(w.Bookie, w.Entry) {
					r.RewriteFailed(w.Bookie, w.Entry)
					return
				}
				s.put(w.Bookie, w.Entry, w.LAC, w.Length)
				r.RewriteAcked(w.Bookie, w.Entry)
			})
		}
		if u := rd.MetadataUpdate; u != nil {
			md := u.Clone()
			queue = append(queue, func() {
				s.etcd = md
				s.etcd.Version++
				s.commits++
				if err := r.MetadataCommitted(s.etcd.Version); err != nil {
					s.t.Fatal(err)
				}
			})
		}
		if stopAfterCommits > 0 && s.commits >= stopAfterCommits {
			return nil
		}
		if len(queue) == 0 {
			if r.HasReady() {
				continue
			}
			s.t.Fatalf("recovery waits for nothing")
		}
		f := queue[0]
		queue = queue[1:]
		f()
	}
	s.t.Fatal("recovery does not end")
	return nil
}

// TestReviewReaderFloorBeyondClose: a recovery that changes the ensemble
// twice and then dies leaves an IN_RECOVERY record whose last segment
// starts past entries that no acknowledged add ever stored. A reader
// takes "last segment's FirstEntry − 1" as confirmed (floorLAC / adopt)
// and may return those entries; the next recovery, deciding on the
// fenced segment, closes the ledger below them.
// crashedWriter writes, E=Qw=3 Qa=2 on k1..k3, entry 0 to k1 and k2
// (acknowledged: LAC 0) and then tail more entries to k1 only (never
// acknowledged), as a writer that crashed there leaves them. It returns
// the ledger's metadata as created and the writer.
func (s *recSim) crashedWriter(tail int) (core.Metadata, *core.Writer) {
	md := core.Metadata{LedgerID: 1, EnsembleSize: 3, WriteQuorum: 3, AckQuorum: 2, State: core.StateOpen,
		LastEntryID: core.NoEntry, DigestType: DigestCRC32C, MasterKey: []byte("k"),
		Segments: []core.Segment{{FirstEntry: 0, Ensemble: []core.BookieID{"k1", "k2", "k3"}}}, Version: 1}
	w, err := core.NewWriter(md)
	if err != nil {
		s.t.Fatal(err)
	}
	w.Add(10)
	rd := w.Ready()
	w.Advance(rd)
	for _, sd := range rd.Sends {
		if sd.Bookie != "k3" {
			s.put(sd.Bookie, sd.Entry, sd.LAC, sd.Length)
			w.Acked(sd)
		}
	}
	for range tail {
		w.Add(10)
	}
	rd = w.Ready()
	w.Advance(rd)
	for _, sd := range rd.Sends {
		if sd.Bookie == "k1" {
			s.put(sd.Bookie, sd.Entry, sd.LAC, sd.Length)
		}
	}
	return md, w
}

// TestReaderFloorOfARecoveringLedger: a recovery that changed the
// ensemble twice (segments from entries 1 and 2 for its rewrites) and died
// leaves an IN_RECOVERY record; a reader must not take the entry before
// its last segment as confirmed, because a later recovery, deciding on the
// fenced segment with other bookies unreachable, may close below it. (The
// floor was the last segment's first entry − 1: 1 here, with the ledger
// then closed at 0.)
func TestReaderFloorOfARecoveringLedger(t *testing.T) {
	s := newRecSim(t, "k1", "k2", "k3", "k4", "k5", "k6", "k7")
	// The writer: entry 0 acked by k1, k2 (LAC 0); entries 1 and 2 reached
	// k1 only and were never acknowledged. Then the writer crashed.
	md, w := s.crashedWriter(2)
	if w.LAC() != 0 {
		t.Fatalf("writer LAC %d, want 0", w.LAC())
	}
	acked := w.LAC()

	rmd, err := core.BeginRecovery(w.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	rmd.Version++
	s.etcd = rmd

	// Recovery A: k3 down; k2 answers reads but its rewrites fail; the
	// replacements k4, k5 take entry 1 but fail entry 2. A changes the
	// ensemble twice ([1: k1 k4 k5], then [2: k1 k6 k7]) and dies.
	s.out["k3"] = true
	s.spares = []core.BookieID{"k4", "k5", "k6", "k7"}
	s.failRW = func(b core.BookieID, e int64) bool {
		return b == "k2" || ((b == "k4" || b == "k5") && e == 2)
	}
	ra, err := core.NewRecovery(s.etcd, core.DefaultRecoveryConfig())
	if err != nil {
		t.Fatal(err)
	}
	if c := s.run(ra, 2); c != nil {
		t.Fatalf("recovery A closed at %d; the scenario needs it to die first", c.LastEntryID)
	}
	afterA := s.etcd.Clone()
	t.Logf("after recovery A: %s segments %v fenced %v", afterA.State, afterA.Segments, afterA.FencedSegment)

	// What a reader opening (or watching) the ledger now believes.
	rdr := &Reader{id: 1, md: md, lac: floorLAC(md)}
	rdr.adopt(afterA)
	readerLAC := rdr.LAC()
	t.Logf("reader: floorLAC=%d, LAC after adopting the IN_RECOVERY record=%d", floorLAC(afterA), readerLAC)

	// Recovery B: k1's disk was wiped (wrong instance: unknown), k2, k3 up.
	s.out = map[core.BookieID]bool{"k1": true}
	s.failRW = func(core.BookieID, int64) bool { return false }
	rb, err := core.NewRecovery(s.etcd, core.DefaultRecoveryConfig())
	if err != nil {
		t.Fatal(err)
	}
	closed := s.run(rb, 0)
	if closed == nil {
		t.Fatal("recovery B did not close")
	}
	t.Logf("recovery B closed at %d (writer acked through %d)", closed.LastEntryID, acked)
	if readerLAC > closed.LastEntryID {
		t.Fatalf("a reader of the IN_RECOVERY ledger was told entries up to %d are confirmed (and can read them), "+
			"but the ledger was closed at %d", readerLAC, closed.LastEntryID)
	}
}

// TestReviewConcurrentRecoveryPublishesLAC: two recoverers of the same
// IN_RECOVERY ledger. B reads k2, k3 before A's rewrites reach them and
// gets no answer from k1: it ends the ledger at 0. A found entries 1..3 on
// k1 and rewrote them with LAC up to its confirmed point; a tailing
// reader (pollLAC: highest LAC of the last segment's bookies) learns that
// LAC and reads entries the ledger, once B's close CAS wins, never had.
// TestConcurrentRecoveryPublishesOnlyBase: of two concurrent recoveries,
// one (B) cannot reach the bookie holding entries 1..3 and decides to
// close at 0; the other (A) finds and rewrites them. A's rewrites must not
// tell the bookies (and so tailing readers) a LAC above what the fences
// proved, since B's close may win. (They carried A's confirmed point, 1.)
func TestConcurrentRecoveryPublishesOnlyBase(t *testing.T) {
	s := newRecSim(t, "k1", "k2", "k3")
	_, w := s.crashedWriter(3) // entry 0 acknowledged, entries 1..3 on k1 only
	rmd, err := core.BeginRecovery(w.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	rmd.Version++
	s.etcd = rmd

	// B: k1 does not answer B in time (unknown), k2 and k3 answer before
	// A's rewrites reach them.
	s.out = map[core.BookieID]bool{"k1": true}
	rb, _ := core.NewRecovery(s.etcd, core.RecoveryConfig{ReadAhead: 1})
	closeB := s.run(rb, 0)
	if closeB == nil {
		t.Fatal("B did not decide")
	}
	// A, meanwhile, reaches every bookie; readahead 1 makes each rewrite
	// carry the point confirmed before it. Its close CAS loses to B's.
	s.out = map[core.BookieID]bool{}
	ra, _ := core.NewRecovery(s.etcd, core.RecoveryConfig{ReadAhead: 1})
	closeA := s.run(ra, 0)
	bookieLAC := max(s.lac["k1"], s.lac["k2"], s.lac["k3"])
	t.Logf("B decides last=%d; A would decide last=%d; bookies' LAC while IN_RECOVERY: %d", closeB.LastEntryID,
		closeA.LastEntryID, bookieLAC)
	if bookieLAC > closeB.LastEntryID {
		t.Fatalf("readers of the IN_RECOVERY ledger learn LAC %d from A's rewrites, but B's close (which wins the CAS) ends it at %d",
			bookieLAC, closeB.LastEntryID)
	}
}
