package core

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestScripts runs the interaction scripts in testdata/ (etcd-io/raft's
// interaction_test.go style): a Writer and a Recovery driven by commands
// against a toy etcd (one record with a revision) and toy bookies (what
// each stores, whether fenced, down or wiped). After every command the
// harness drains Ready/Advance and prints what the core asked for.
//
// Writer commands:
//
//	new E=3 Qw=2 Qa=2 bookies=k1,k2,k3,k4   create the ledger (ensemble: the first E) and its writer
//	add [n=1] [len=10]                      add n entries of len bytes
//	ack k2 5 [epoch=N]                      deliver the send of entry 5 to k2 (latest epoch unless N) and ack it;
//	                                        a fenced bookie answers "fenced" instead
//	ack k2 5 again                          deliver the same ack once more (duplicate)
//	deliver k2 5 [epoch=N]                  k2 stores the entry but the ack is lost
//	ack-all                                 ack every send in flight, oldest first
//	fail k3 [entry=5] [reason=timeout]      a send to k3 fails (the oldest in flight unless entry=)
//	fenced k1 [entry=5]                     a send to k1 is answered "fenced"
//	replace k3 k4                           the driver's placement picked k4 for k3
//	cas | cas-ok | cas-conflict [state=S]   the update in flight: CAS against the toy etcd, or
//	                                        force success / a conflict (setting the stored state)
//	close                                   Writer.Close, then its CAS
//
// Recovery commands:
//
//	recover [readahead=1]                   BeginRecovery (+ CAS OPEN→IN_RECOVERY), NewRecovery
//	fence-ok k1 [lac=4]                     k1 fences (reporting lac, default: what it stores)
//	drop-fence k1                           the fence request to k1 is lost (FenceFailed)
//	read k1 5 [found|absent|unknown] [len=] k1 answers the read of 5 (default: from what it stores)
//	rewrite-ok k1 5 | rewrite-fail k1 5     k1 answers the rewrite of 5
//	stabilize                               answer every recovery request from the toy bookies until none is left
//	rec-replace k3 k4                       the driver's placement picked k4 for the recovery's failed k3
//	no-replacement k3                       placement found no bookie for k3 (ReplacementUnavailable)
//	rec-cas | rec-cas-conflict [state=S]    the recovery's metadata update: CAS against the toy etcd, or
//	                                        another process changed the record first (setting the state)
//
// World: down k3 / up k3 (unreachable: unknown answers, failed fences
// and rewrites), wipe k3 (answers as another instance: unknown). state
// prints everything.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			e := &scriptEnv{}
			runScript(t, f, e.run)
		})
	}
}

type storedEntry struct{ lac, length int64 }

type scriptEnv struct {
	etcd     Metadata // the stored record; Version is its revision
	w        *Writer
	inflight []Send
	answered []Send    // sends delivered, for "ack ... again"
	cas      *Metadata // the writer's update in flight
	store    map[BookieID]map[int64]storedEntry
	fenced   map[BookieID]bool
	down     map[BookieID]bool
	wiped    map[BookieID]bool
	rec      *Recovery
	fences   []FenceRequest
	reads    []ReadRequest
	rewrites []RewriteRequest
	recCAS   *Metadata // the recovery's update in flight
}

func (e *scriptEnv) run(t *testing.T, d *testCase) string {
	var b strings.Builder
	out := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	writerCmd := true
	b1, b2 := BookieID(d.arg(0)), d.arg(1)
	entry := func() int64 {
		var n int64
		if _, err := fmt.Sscan(b2, &n); err != nil {
			t.Fatalf("%s: entry id %q: %v", d.Pos, b2, err)
		}
		return n
	}
	switch d.Cmd {
	case "new":
		e.newLedger(t, d)
		out("etcd v%d %s %s", e.etcd.Version, e.etcd.State, fmtSegments(e.etcd.Segments))
	case "add":
		for range d.intVal(t, "n", 1) {
			if _, err := e.w.Add(int(d.intVal(t, "len", 10))); err != nil {
				out("add: %v", err)
			}
		}
	case "ack", "deliver":
		s, ok := e.takeSend(b1, entry(), d.intVal(t, "epoch", -1))
		if d.arg(2) == "again" {
			i := slices.IndexFunc(e.answered, func(s Send) bool { return s.Bookie == b1 && s.Entry == entry() })
			s, ok = Send{}, i >= 0
			if ok {
				s = e.answered[i]
			}
		}
		if !ok {
			out("no send of %s to %s in flight", b2, b1)
			break
		}
		e.deliver(s, d.Cmd == "ack", out)
	case "ack-all":
		sends := e.inflight
		e.inflight = nil
		for _, s := range sends {
			e.deliver(s, true, out)
		}
	case "fail", "fenced":
		reason := FailFenced
		if d.Cmd == "fail" {
			reason = FailTimeout
			if r, has := d.val("reason"); has {
				var ok bool
				if reason, ok = parseFailReason(r); !ok {
					t.Fatalf("%s: reason %q", d.Pos, r)
				}
			}
		}
		s, ok := e.takeSend(b1, d.intVal(t, "entry", -1), -1)
		if !ok {
			s = Send{Bookie: b1, Entry: 0, Epoch: e.w.Epoch()}
		}
		e.w.Failed(s, reason)
	case "replace":
		if err := e.w.Replace(b1, BookieID(b2), ""); err != nil {
			out("replace: %v", err)
		}
	case "cas", "cas-ok", "cas-conflict":
		e.casWriter(t, d, out)
	case "close":
		md, err := e.w.Close()
		if err != nil {
			out("close: %v", err)
			break
		}
		out("close: %s", e.casStore(md))
	default:
		writerCmd = false
	}
	if !writerCmd {
		if !e.runRecovery(t, d, b1, out) {
			e.runWorld(t, d, b1, out)
		}
	}
	e.process(out)
	switch {
	case d.Cmd == "state":
		e.printState(out)
	case writerCmd && e.w != nil:
		out("%s", e.writerStatus())
	case e.rec != nil && !slices.Contains([]string{"down", "up", "wipe"}, d.Cmd):
		out("%s", e.recoveryStatus())
	}
	return b.String()
}

func (e *scriptEnv) newLedger(t *testing.T, d *testCase) {
	pool, _ := d.val("bookies")
	var ids []BookieID
	for _, s := range strings.Split(pool, ",") {
		ids = append(ids, BookieID(s))
	}
	ens := int(d.intVal(t, "E", 3))
	if len(ids) < ens {
		t.Fatalf("%s: %d bookies for E=%d", d.Pos, len(ids), ens)
	}
	e.etcd = Metadata{
		LedgerID: 1, EnsembleSize: ens, WriteQuorum: int(d.intVal(t, "Qw", 2)), AckQuorum: int(d.intVal(t, "Qa", 2)),
		State: StateOpen, LastEntryID: NoEntry, DigestType: "crc32c", MasterKey: []byte("key"),
		Segments: []Segment{{FirstEntry: 0, Ensemble: slices.Clone(ids[:ens])}}, Version: 1,
	}
	e.store = map[BookieID]map[int64]storedEntry{}
	for _, id := range ids {
		e.store[id] = map[int64]storedEntry{}
	}
	e.fenced, e.down, e.wiped = map[BookieID]bool{}, map[BookieID]bool{}, map[BookieID]bool{}
	e.inflight, e.answered, e.cas = nil, nil, nil
	e.rec, e.fences, e.reads, e.rewrites, e.recCAS = nil, nil, nil, nil, nil
	w, err := NewWriter(e.etcd)
	if err != nil {
		t.Fatalf("%s: %v", d.Pos, err)
	}
	e.w = w
}

// takeSend removes from the in-flight list the send of entry (any if < 0)
// to b of epoch (the latest if < 0).
func (e *scriptEnv) takeSend(b BookieID, entry, epoch int64) (Send, bool) {
	best := -1
	for i, s := range e.inflight {
		if s.Bookie != b || (entry >= 0 && s.Entry != entry) || (epoch >= 0 && s.Epoch != epoch) {
			continue
		}
		if best < 0 || (entry >= 0 && s.Epoch > e.inflight[best].Epoch) {
			best = i
		}
	}
	if best < 0 {
		return Send{}, false
	}
	s := e.inflight[best]
	e.inflight = slices.Delete(e.inflight, best, best+1)
	return s, true
}

// deliver has s reach its bookie: it stores the entry (and acks it when
// ack), or answers "fenced" when fenced.
func (e *scriptEnv) deliver(s Send, ack bool, out func(string, ...any)) {
	switch {
	case e.down[s.Bookie] || e.wiped[s.Bookie]:
		out("%s: unreachable, %d@%d not delivered", s.Bookie, s.Entry, s.Epoch)
	case e.fenced[s.Bookie]:
		out("%s: fenced, refuses %d@%d", s.Bookie, s.Entry, s.Epoch)
		e.w.Failed(s, FailFenced)
	default:
		e.store[s.Bookie][s.Entry] = storedEntry{lac: s.LAC, length: s.Length}
		e.answered = append(e.answered, s)
		if ack {
			e.w.Acked(s)
		}
	}
}

func (e *scriptEnv) casWriter(t *testing.T, d *testCase, out func(string, ...any)) {
	if e.cas == nil {
		out("no metadata update in flight")
		return
	}
	p := *e.cas
	ok := e.etcd.Version == p.Version
	switch d.Cmd {
	case "cas-ok":
		ok = true
	case "cas-conflict":
		ok = false
		if s, has := d.val("state"); has {
			if err := e.etcd.State.UnmarshalText([]byte(s)); err != nil {
				t.Fatalf("%s: %v", d.Pos, err)
			}
		}
		e.etcd.Version++
	}
	e.cas = nil
	if ok {
		e.etcd = p.Clone()
		e.etcd.Version = max(e.etcd.Version, p.Version) + 1
		out("cas ok: etcd v%d %s", e.etcd.Version, fmtSegments(e.etcd.Segments))
		if err := e.w.MetadataCommitted(e.etcd.Version); err != nil {
			out("committed: %v", err)
		}
		return
	}
	out("cas conflict: etcd v%d %s", e.etcd.Version, e.etcd.State)
	if err := e.w.MetadataConflict(e.etcd.Clone()); err != nil {
		out("conflict: %v", err)
	}
}

// casStore CASes md into the toy etcd.
func (e *scriptEnv) casStore(md Metadata) string {
	if e.etcd.Version != md.Version {
		return fmt.Sprintf("cas conflict (etcd v%d %s, wanted v%d)", e.etcd.Version, e.etcd.State, md.Version)
	}
	e.etcd = md.Clone()
	e.etcd.Version++
	return fmt.Sprintf("cas ok: etcd v%d %s last=%d length=%d", e.etcd.Version, e.etcd.State, e.etcd.LastEntryID, e.etcd.Length)
}

// process drains the Ready of the writer and of the recovery, printing them.
func (e *scriptEnv) process(out func(string, ...any)) {
	for progress := true; progress; {
		progress = false
		if e.w != nil && e.w.HasReady() {
			progress = true
			rd := e.w.Ready()
			e.w.Advance(rd)
			e.printWriterReady(rd, out)
			e.inflight = append(e.inflight, rd.Sends...)
			if rd.MetadataUpdate != nil {
				p := rd.MetadataUpdate.Clone()
				e.cas = &p
			}
		}
		if e.rec != nil && e.rec.HasReady() {
			progress = true
			rd := e.rec.Ready()
			e.rec.Advance(rd)
			e.printRecoveryReady(rd, out)
			e.fences = append(e.fences, rd.Fences...)
			e.reads = append(e.reads, rd.Reads...)
			e.rewrites = append(e.rewrites, rd.Rewrites...)
			if rd.MetadataUpdate != nil {
				p := rd.MetadataUpdate.Clone()
				e.recCAS = &p
			}
			if rd.Close != nil {
				out("recovery close: %s", e.casStore(*rd.Close))
			}
		}
	}
}

func (e *scriptEnv) printWriterReady(rd Ready, out func(string, ...any)) {
	for i := 0; i < len(rd.Sends); {
		s := rd.Sends[i]
		var to []string
		for ; i < len(rd.Sends) && rd.Sends[i].Entry == s.Entry && rd.Sends[i].Epoch == s.Epoch; i++ {
			to = append(to, string(rd.Sends[i].Bookie))
		}
		out("send %d → %s lac=%d len=%d epoch=%d", s.Entry, strings.Join(to, ","), s.LAC, s.Length, s.Epoch)
	}
	if len(rd.Completed) > 0 {
		out("completed %s", fmtInts(rd.Completed))
	}
	if len(rd.Replace) > 0 {
		out("replace %s", fmtIDs(rd.Replace))
	}
	if m := rd.MetadataUpdate; m != nil {
		out("metadata update (cas at v%d): %s", m.Version, fmtSegments(m.Segments))
	}
	if rd.Err != nil {
		out("writer ended: %v", rd.Err)
	}
}

func (e *scriptEnv) writerStatus() string {
	w := e.w
	s := fmt.Sprintf("writer: lac=%d pushed=%d epoch=%d", w.LAC(), w.LastAddPushed(), w.Epoch())
	if c := w.change; c != nil {
		s += fmt.Sprintf(" changing(first=%d failed=%s", c.first, fmtIDs(c.failed))
		if len(c.later) > 0 {
			s += " later=" + fmtIDs(c.later)
		}
		if need := w.NeedReplacement(); len(need) > 0 {
			s += " need=" + fmtIDs(need)
		}
		if c.sent {
			s += " cas-in-flight"
		}
		s += ")"
	}
	switch {
	case w.Err() != nil:
		s += " ended"
	case w.closed:
		s += " closed"
	}
	return s
}

func (e *scriptEnv) printState(out func(string, ...any)) {
	out("etcd v%d %s last=%d length=%d %s", e.etcd.Version, e.etcd.State, e.etcd.LastEntryID, e.etcd.Length, fmtMetadataSegments(e.etcd))
	if e.w != nil {
		out("%s", e.writerStatus())
		for i, p := range e.w.pending {
			out("  pending %d acks=%s", e.w.lac+1+int64(i), fmtIDs(p.acks))
		}
		var fl []string
		for _, s := range e.inflight {
			fl = append(fl, fmt.Sprintf("%s:%d@%d", s.Bookie, s.Entry, s.Epoch))
		}
		if len(fl) > 0 {
			out("  in flight %s", strings.Join(fl, " "))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(e.store)) {
		ents := slices.Sorted(maps.Keys(e.store[id]))
		line := fmt.Sprintf("bookie %s: entries %s lac=%d", id, fmtInts(ents), e.bookieLAC(id))
		for _, f := range []struct {
			on   bool
			name string
		}{{e.fenced[id], "fenced"}, {e.down[id], "down"}, {e.wiped[id], "wiped"}} {
			if f.on {
				line += " " + f.name
			}
		}
		out("%s", line)
	}
	if e.rec != nil {
		out("%s", e.recoveryStatus())
		for _, r := range e.reads {
			out("  read %d from %s in flight", r.Entry, r.Bookie)
		}
		for _, r := range e.rewrites {
			out("  rewrite %d to %s in flight", r.Entry, r.Bookie)
		}
	}
}

func (e *scriptEnv) bookieLAC(b BookieID) int64 {
	lac := NoEntry
	for _, s := range e.store[b] {
		lac = max(lac, s.lac)
	}
	return lac
}

func fmtInts(v []int64) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprint(x))
	}
	return "[" + strings.Join(s, " ") + "]"
}

func fmtIDs(v []BookieID) string {
	var s []string
	for _, x := range v {
		s = append(s, string(x))
	}
	return "[" + strings.Join(s, " ") + "]"
}

func fmtSegments(segs []Segment) string {
	var s []string
	for _, g := range segs {
		var ids []string
		for _, b := range g.Ensemble {
			ids = append(ids, string(b))
		}
		s = append(s, fmt.Sprintf("[%d: %s]", g.FirstEntry, strings.Join(ids, " ")))
	}
	return strings.Join(s, " ")
}

// parseFailReason is the reason named by String.
func parseFailReason(s string) (FailReason, bool) {
	for r, n := range failNames {
		if n == s {
			return r, true
		}
	}
	return 0, false
}
