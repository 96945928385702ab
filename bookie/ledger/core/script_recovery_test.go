package core

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// runRecovery handles the recovery commands of the scripts (see
// TestScripts); false if d is not one.
func (e *scriptEnv) runRecovery(t *testing.T, d *testCase, b BookieID, out func(string, ...any)) bool {
	entry := func() int64 {
		var n int64
		if _, err := fmt.Sscan(d.arg(1), &n); err != nil {
			t.Fatalf("%s: entry id %q: %v", d.Pos, d.arg(1), err)
		}
		return n
	}
	switch d.Cmd {
	case "recover":
		before := e.etcd.State
		md, err := BeginRecovery(e.etcd)
		if err != nil {
			out("begin recovery: %v", err)
			break
		}
		if before == StateOpen {
			out("begin recovery: %s", e.casStore(md))
		}
		e.fences, e.reads, e.rewrites, e.recCAS = nil, nil, nil, nil
		r, err := NewRecovery(e.etcd.Clone(), RecoveryConfig{ReadAhead: int(d.intVal(t, "readahead", 1))})
		if err != nil {
			t.Fatalf("%s: %v", d.Pos, err)
		}
		e.rec = r
	case "fence-ok", "drop-fence":
		if !e.takeFence(b) {
			out("no fence of %s in flight", b)
			break
		}
		if d.Cmd == "drop-fence" {
			e.rec.FenceFailed(b)
			break
		}
		e.fenced[b] = true
		e.rec.Fenced(b, d.intVal(t, "lac", e.bookieLAC(b)))
	case "read":
		n := entry()
		if !e.takeRead(b, n) {
			out("no read of %d from %s in flight", n, b)
			break
		}
		res := e.readFromStore(b, n)
		switch kind := d.arg(2); kind {
		case "":
		case "found":
			res = Found(payloadOf(n), d.intVal(t, "len", e.store[b][n].length))
		case "absent":
			res = Absent()
		case "unknown":
			res = Unknown()
		default:
			t.Fatalf("%s: read outcome %q", d.Pos, kind)
		}
		if res.Kind != ReadUnknown {
			e.fenced[b] = true
		}
		out("%s answers %d: %s", b, n, res.Kind)
		e.rec.ReadResult(b, n, res)
	case "rewrite-ok", "rewrite-fail":
		n := entry()
		rw, ok := e.takeRewrite(b, n)
		if !ok {
			out("no rewrite of %d to %s in flight", n, b)
			break
		}
		if d.Cmd == "rewrite-fail" {
			e.rec.RewriteFailed(b, n)
			break
		}
		e.store[b][n] = storedEntry{lac: rw.LAC, length: rw.Length}
		e.rec.RewriteAcked(b, n)
	case "rec-replace":
		if err := e.rec.Replace(b, BookieID(d.arg(1)), ""); err != nil {
			out("replace: %v", err)
		}
	case "no-replacement":
		e.rec.ReplacementUnavailable(b, errors.New("no writable bookie outside the ensemble"))
	case "rec-cas", "rec-cas-conflict":
		e.casRecovery(t, d, out)
	case "stabilize":
		e.stabilize(out)
	default:
		return false
	}
	return true
}

// casRecovery CASes the recovery's metadata update in flight against the
// toy etcd (rec-cas), or has it fail (rec-cas-conflict [state=S]: another
// process changed the record; CLOSED closes it at the writer's LAC).
func (e *scriptEnv) casRecovery(t *testing.T, d *testCase, out func(string, ...any)) {
	if e.recCAS == nil {
		out("no recovery metadata update in flight")
		return
	}
	p := *e.recCAS
	e.recCAS = nil
	if d.Cmd == "rec-cas-conflict" {
		if s, has := d.val("state"); has {
			if err := e.etcd.State.UnmarshalText([]byte(s)); err != nil {
				t.Fatalf("%s: %v", d.Pos, err)
			}
			if e.etcd.State == StateClosed {
				e.etcd.LastEntryID = e.w.LAC()
			}
		}
		e.etcd.Version++
	}
	if e.etcd.Version != p.Version {
		out("recovery cas conflict: etcd v%d %s", e.etcd.Version, e.etcd.State)
		if err := e.rec.MetadataConflict(e.etcd.Clone()); err != nil {
			out("conflict: %v", err)
		}
		return
	}
	e.etcd = p.Clone()
	e.etcd.Version++
	out("recovery cas ok: etcd v%d %s %s", e.etcd.Version, e.etcd.State, fmtMetadataSegments(e.etcd))
	if err := e.rec.MetadataCommitted(e.etcd.Version); err != nil {
		out("committed: %v", err)
	}
}

// stabilize answers every recovery request from the toy bookies, and
// the requests that follow, until none is left.
func (e *scriptEnv) stabilize(out func(string, ...any)) {
	for len(e.fences)+len(e.reads)+len(e.rewrites) > 0 {
		fences, reads, rewrites := e.fences, e.reads, e.rewrites
		e.fences, e.reads, e.rewrites = nil, nil, nil
		for _, f := range fences {
			if e.unreachable(f.Bookie) {
				e.rec.FenceFailed(f.Bookie)
				continue
			}
			e.fenced[f.Bookie] = true
			e.rec.Fenced(f.Bookie, e.bookieLAC(f.Bookie))
		}
		var answers []string
		for _, r := range reads {
			res := e.readFromStore(r.Bookie, r.Entry)
			if res.Kind != ReadUnknown {
				e.fenced[r.Bookie] = true
			}
			answers = append(answers, fmt.Sprintf("%s:%d=%s", r.Bookie, r.Entry, res.Kind))
			e.rec.ReadResult(r.Bookie, r.Entry, res)
		}
		if len(answers) > 0 {
			out("answers %s", strings.Join(answers, " "))
		}
		for _, w := range rewrites {
			if e.unreachable(w.Bookie) {
				out("rewrite %d to %s failed", w.Entry, w.Bookie)
				e.rec.RewriteFailed(w.Bookie, w.Entry)
				continue
			}
			e.store[w.Bookie][w.Entry] = storedEntry{lac: w.LAC, length: w.Length}
			e.rec.RewriteAcked(w.Bookie, w.Entry)
		}
		e.process(out)
	}
}

func (e *scriptEnv) unreachable(b BookieID) bool { return e.down[b] || e.wiped[b] }

// readFromStore is b's answer to a fenced read of entry.
func (e *scriptEnv) readFromStore(b BookieID, entry int64) ReadOutcome {
	if e.unreachable(b) {
		return Unknown()
	}
	if s, ok := e.store[b][entry]; ok {
		return Found(payloadOf(entry), s.length)
	}
	return Absent()
}

func payloadOf(entry int64) []byte { return fmt.Appendf(nil, "p%d", entry) }

func (e *scriptEnv) takeFence(b BookieID) bool {
	i := slices.IndexFunc(e.fences, func(f FenceRequest) bool { return f.Bookie == b })
	if i >= 0 {
		e.fences = slices.Delete(e.fences, i, i+1)
	}
	return i >= 0
}

func (e *scriptEnv) takeRead(b BookieID, entry int64) bool {
	i := slices.IndexFunc(e.reads, func(r ReadRequest) bool { return r.Bookie == b && r.Entry == entry })
	if i >= 0 {
		e.reads = slices.Delete(e.reads, i, i+1)
	}
	return i >= 0
}

func (e *scriptEnv) takeRewrite(b BookieID, entry int64) (RewriteRequest, bool) {
	i := slices.IndexFunc(e.rewrites, func(r RewriteRequest) bool { return r.Bookie == b && r.Entry == entry })
	if i < 0 {
		return RewriteRequest{}, false
	}
	rw := e.rewrites[i]
	e.rewrites = slices.Delete(e.rewrites, i, i+1)
	return rw, true
}

// runWorld handles down, up, wipe and state.
func (e *scriptEnv) runWorld(t *testing.T, d *testCase, b BookieID, out func(string, ...any)) {
	switch d.Cmd {
	case "down":
		e.down[b] = true
	case "up":
		e.down[b] = false
	case "wipe":
		e.wiped[b] = true
		e.store[b] = map[int64]storedEntry{}
	case "state":
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
}

func (e *scriptEnv) printRecoveryReady(rd RecoveryReady, out func(string, ...any)) {
	if len(rd.Fences) > 0 {
		var ids []BookieID
		for _, f := range rd.Fences {
			ids = append(ids, f.Bookie)
		}
		out("fence %s", fmtIDs(ids))
	}
	for i := 0; i < len(rd.Reads); {
		r := rd.Reads[i]
		var ids []BookieID
		for ; i < len(rd.Reads) && rd.Reads[i].Entry == r.Entry; i++ {
			ids = append(ids, rd.Reads[i].Bookie)
		}
		out("read %d from %s fence=%t", r.Entry, fmtIDs(ids), r.Fence)
	}
	for i := 0; i < len(rd.Rewrites); {
		w := rd.Rewrites[i]
		var ids []BookieID
		for ; i < len(rd.Rewrites) && rd.Rewrites[i].Entry == w.Entry; i++ {
			ids = append(ids, rd.Rewrites[i].Bookie)
		}
		out("rewrite %d to %s lac=%d len=%d payload=%s", w.Entry, fmtIDs(ids), w.LAC, w.Length, w.Payload)
	}
	if len(rd.Replace) > 0 {
		out("recovery replace %s", fmtIDs(rd.Replace))
	}
	if m := rd.MetadataUpdate; m != nil {
		out("recovery metadata update (cas at v%d, %s): %s", m.Version, m.State, fmtMetadataSegments(*m))
	}
	if rd.Err != nil {
		out("recovery ended: %v", rd.Err)
	}
}

// fmtMetadataSegments is md's segments, and its fenced segment if set.
func fmtMetadataSegments(md Metadata) string {
	s := fmtSegments(md.Segments)
	if f := md.FencedSegment; f != nil {
		s += " fenced=" + fmtSegments([]Segment{*f})
	}
	return s
}

func (e *scriptEnv) recoveryStatus() string {
	r := e.rec
	var fenced []BookieID
	for _, b := range r.seg.Ensemble {
		if r.fenced[b] {
			fenced = append(fenced, b)
		}
	}
	s := fmt.Sprintf("recovery: %s fenced=%s", r.phase, fmtIDs(fenced))
	if !r.started {
		return s
	}
	s += fmt.Sprintf(" base=%d", r.base)
	switch r.phase {
	case phaseReading:
		s += fmt.Sprintf(" next=%d confirmed=%d", r.first, r.confirmed)
		if r.stop != NoEntry {
			s += fmt.Sprintf(" stop=%d", r.stop)
		}
		if c := r.change; c != nil {
			s += fmt.Sprintf(" changing(failed=%s", fmtIDs(c.failed))
			if need := r.NeedReplacement(); len(need) > 0 {
				s += " need=" + fmtIDs(need)
			}
			if c.sent {
				s += fmt.Sprintf(" first=%d cas-in-flight", c.first)
			}
			s += ")"
		}
	case phaseDone:
		s += fmt.Sprintf(" last=%d length=%d", r.result.LastEntryID, r.result.Length)
	}
	return s
}
