package audit

import "math"

// Result is the comparison of one region's copy of an origin stream
// with the origin's own (Compare).
type Result struct {
	// MissingAtGot: held by the origin within the window, not by the
	// other region.
	MissingAtGot []Range
	// MissingAtRef: held by the other region within the window, no
	// longer by the origin (lost there; retention trims only below the
	// window).
	MissingAtRef []Range
	// ExtraAtGot: held by the other region above the origin's last
	// origin sequence: never published at the origin.
	ExtraAtGot []Range
	// Differing: single origin sequences both hold with different
	// digests (found in spans of one sequence).
	Differing []Range
	// Narrow: spans of the window the sums could not settle; ask both
	// regions again for them with spans of NextSpan(r.Len()) and compare
	// with the span as the window.
	Narrow []Range
	// Duplicates: origin sequences the other region holds twice.
	Duplicates []uint64
}

// Clean reports whether r found nothing (Narrow aside).
func (r *Result) Clean() bool {
	return len(r.MissingAtGot)+len(r.MissingAtRef)+len(r.ExtraAtGot)+len(r.Differing)+len(r.Duplicates) == 0
}

// Bound is the highest origin sequence a region must hold of an origin
// stream: the origin's replicator cursor position towards it (what it
// acknowledged as stored), or the highest sequence it holds when that
// is higher and the origin published it (stored copies are gap-free up
// to there, whoever relayed them). Above the bound messages are in
// flight.
func Bound(position uint64, got *OriginSummary, refLast uint64) uint64 {
	return max(position, min(highest(got), refLast))
}

// Window is the origin sequences Compare checks: from the lowest both
// still hold (lower ones count as trimmed by retention) to bound; ok
// false when empty (nothing to compare yet).
func Window(ref, got *OriginSummary, bound uint64) (Range, bool) {
	lo := max(lowest(ref), lowest(got), 1)
	if lowest(ref) == 0 { // the origin holds none: compare what the other holds
		lo = max(lowest(got), 1)
	}
	if lowest(got) == 0 { // the other holds none: all of the origin's is missing
		lo = max(lowest(ref), 1)
	}
	if bound < lo {
		return Range{}, false
	}
	return Range{lo, bound}, true
}

// Compare compares got (another region's summary of an origin stream;
// nil: it holds none) with ref (the origin region's; nil: none) over
// window win, refLast being the origin's last origin sequence read
// after got was. Both summaries must come from requests covering win
// with the same grid (same From and Span).
func Compare(ref, got *OriginSummary, win Range, refLast uint64) Result {
	var r Result
	refHeld, gotHeld := heldOf(ref), heldOf(got)
	r.MissingAtGot = subtract(clip(refHeld, win), gotHeld)
	r.MissingAtRef = subtract(clip(gotHeld, Range{win.From, min(win.To, refLast)}), refHeld)
	if refLast < math.MaxUint64 {
		r.ExtraAtGot = clip(gotHeld, Range{refLast + 1, math.MaxUint64})
	}
	if got != nil {
		r.Duplicates = got.Duplicates
	}
	refSpans, gotSpans := spansOf(ref), spansOf(got)
	i, j := 0, 0
	for i < len(refSpans) || j < len(gotSpans) {
		var a, b Span
		switch {
		case j >= len(gotSpans) || (i < len(refSpans) && refSpans[i].From < gotSpans[j].From):
			a = refSpans[i]
			b = Span{From: a.From, To: a.To}
			i++
		case i >= len(refSpans) || gotSpans[j].From < refSpans[i].From:
			b = gotSpans[j]
			a = Span{From: b.From, To: b.To}
			j++
		default:
			a, b = refSpans[i], gotSpans[j]
			i++
			j++
		}
		c := Range{max(a.From, win.From), min(a.To, win.To)}
		if c.From > c.To {
			continue
		}
		refIn, gotIn := clip(refHeld, c), clip(gotHeld, c)
		if len(refIn) == 0 || len(gotIn) == 0 {
			continue // nothing held in common: missing (or extra) says it all
		}
		// The sums cover c exactly when neither holds anything of the
		// span outside c (the window's edges).
		sp := Range{a.From, a.To}
		inside := equal(clip(refHeld, sp), refIn) && equal(clip(gotHeld, sp), gotIn)
		switch {
		case inside && equal(refIn, gotIn) && a.Sum == b.Sum:
		case inside && equal(refIn, gotIn) && c.From == c.To:
			r.Differing = append(r.Differing, c)
		default:
			r.Narrow = append(r.Narrow, c)
		}
	}
	r.Differing = normalize(r.Differing)
	return r
}

// NextSpan is the span width to narrow a span of width w with: 1/64 of
// it (at least 1), so a span of DefaultSpan is settled in two rounds.
func NextSpan(w uint64) uint64 { return max(1, (w+63)/64) }

// Cursor is one reading of a replicator cursor (the origin region's
// topic owner's ReplicationStats).
type Cursor struct {
	Topic         string  `json:"topic"`
	Region        string  `json:"region"` // the origin: where the cursor runs
	Remote        string  `json:"remote"`
	Position      uint64  `json:"position"`
	LastOriginSeq uint64  `json:"last_origin_seq"`
	LagMsgs       uint64  `json:"lag_msgs"`
	LagSeconds    float64 `json:"lag_seconds"`
}

// Stall is a replicator cursor that did not move between two readings
// although it had a backlog at the first.
type Stall struct {
	First  Cursor `json:"first"`
	Second Cursor `json:"second"`
}

// Stalled compares two readings of the mesh's replicator cursors (the
// second taken after the first): a cursor present in both with a
// backlog at the first (LastOriginSeq > Position) and a position not
// above the first's at the second is stalled, whatever lag it reports.
func Stalled(first, second []Cursor) []Stall {
	type key struct{ topic, region, remote string }
	at := map[key]Cursor{}
	for _, c := range first {
		at[key{c.Topic, c.Region, c.Remote}] = c
	}
	var out []Stall
	for _, c := range second {
		f, ok := at[key{c.Topic, c.Region, c.Remote}]
		if ok && f.LastOriginSeq > f.Position && c.Position <= f.Position {
			out = append(out, Stall{First: f, Second: c})
		}
	}
	return out
}

func heldOf(s *OriginSummary) []Range {
	if s == nil {
		return nil
	}
	return s.Held
}

func spansOf(s *OriginSummary) []Span {
	if s == nil {
		return nil
	}
	return s.Spans
}

func lowest(s *OriginSummary) uint64 {
	if s == nil || len(s.Held) == 0 {
		return 0
	}
	return s.Held[0].From
}

func highest(s *OriginSummary) uint64 {
	if s == nil || len(s.Held) == 0 {
		return 0
	}
	return s.Held[len(s.Held)-1].To
}

// clip is rs ∩ w (rs ascending, disjoint).
func clip(rs []Range, w Range) []Range {
	var out []Range
	for _, r := range rs {
		if r.To < w.From || r.From > w.To {
			continue
		}
		out = append(out, Range{max(r.From, w.From), min(r.To, w.To)})
	}
	return out
}

// subtract is a \ b (both ascending, disjoint).
func subtract(a, b []Range) []Range {
	var out []Range
	j := 0
	for _, r := range a {
		cur := r
		for j < len(b) && b[j].To < cur.From {
			j++
		}
		k := j
		done := false
		for ; k < len(b) && b[k].From <= cur.To; k++ {
			if b[k].From > cur.From {
				out = append(out, Range{cur.From, b[k].From - 1})
			}
			if b[k].To >= cur.To {
				done = true
				break
			}
			cur.From = b[k].To + 1
		}
		if !done {
			out = append(out, cur)
		}
	}
	return out
}

func equal(a, b []Range) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
