package audit

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

type fataler interface{ Fatal(args ...any) }

type msg struct {
	o    Origin
	seq  uint64
	data string
}

// copyOf is a region's topic: messages in local order (local seq = index+1).
type copyOf []msg

func (c copyOf) summarize(t fataler, q Request) Summary {
	z, err := NewSummarizer("r", q)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range c {
		local := uint64(i + 1)
		if (q.LocalFrom != 0 && local < q.LocalFrom) || (q.LocalTo != 0 && local > q.LocalTo) {
			continue
		}
		z.Add(m.o, m.seq, local, Digest(m.seq, []byte("NATS/1.0\r\n\r\n"), []byte(m.data)))
	}
	return z.Summary()
}

func (c copyOf) fetch(t fataler, n *int) Fetch {
	return func(q Request) (*OriginSummary, error) {
		*n++
		s := c.summarize(t, q)
		return s.Find(*q.Origin), nil
	}
}

var east = Origin{"us-east", "inc-1"}
var west = Origin{"eu-west", "inc-2"}

func stream(o Origin, from, to uint64) copyOf {
	var out copyOf
	for s := from; s <= to; s++ {
		out = append(out, msg{o, s, fmt.Sprintf("m%d", s)})
	}
	return out
}

// audit compares got's copy of origin east with ref's up to bound, and
// settles the spans.
func audit(t testing.TB, ref, got copyOf, position uint64) (Result, int) {
	t.Helper()
	q := Request{Span: 64}
	rs, gs := ref.summarize(t, q), got.summarize(t, q)
	r, g := rs.Find(east), gs.Find(east)
	refLast := highest(r)
	win, ok := Window(r, g, Bound(position, g, refLast))
	if !ok {
		return Result{}, 0
	}
	res := Compare(r, g, win, refLast)
	n := 0
	d, _, err := Settle(res, r, g, east, refLast, ref.fetch(t, &n), got.fetch(t, &n))
	if err != nil {
		t.Fatal(err)
	}
	res.Differing = normalize(append(res.Differing, d...))
	res.Narrow = nil
	return res, n
}

func TestCleanCopiesAreClean(t *testing.T) {
	ref := stream(east, 1, 1000)
	got := append(stream(west, 1, 10), stream(east, 1, 1000)...) // interleaved with another origin
	res, n := audit(t, ref, got, 1000)
	if !res.Clean() {
		t.Fatalf("clean copies: %+v", res)
	}
	if n != 0 {
		t.Fatalf("clean aligned copies needed %d narrowing requests", n)
	}
}

func TestMissingMessage(t *testing.T) {
	ref := stream(east, 1, 1000)
	got := slices.Delete(slices.Clone(ref), 499, 500) // origin seq 500 removed
	res, _ := audit(t, ref, got, 1000)
	if want := []Range{{500, 500}}; !slices.Equal(res.MissingAtGot, want) {
		t.Fatalf("missing = %v, want %v (%+v)", res.MissingAtGot, want, res)
	}
	if len(res.Differing)+len(res.MissingAtRef)+len(res.ExtraAtGot) != 0 {
		t.Fatalf("only one missing message expected: %+v", res)
	}
}

func TestMissingAtOriginAndExtra(t *testing.T) {
	ref := slices.Delete(stream(east, 1, 100), 9, 10) // the origin lost seq 10
	got := stream(east, 1, 103)                       // and got holds 101-103 it never published
	res, _ := audit(t, ref, got, 100)
	if !slices.Equal(res.MissingAtRef, []Range{{10, 10}}) || !slices.Equal(res.ExtraAtGot, []Range{{101, 103}}) {
		t.Fatalf("missing at origin %v, extra %v", res.MissingAtRef, res.ExtraAtGot)
	}
}

func TestDifferingNarrowedToTheMessage(t *testing.T) {
	ref := stream(east, 1, 5000)
	got := slices.Clone(ref)
	got[1233].data = "changed" // origin seq 1234
	res, n := audit(t, ref, got, 5000)
	if !slices.Equal(res.Differing, []Range{{1234, 1234}}) {
		t.Fatalf("differing = %v", res.Differing)
	}
	if len(res.MissingAtGot) != 0 {
		t.Fatalf("nothing missing: %v", res.MissingAtGot)
	}
	// Span 64 → 1: one round of two requests for the one span.
	if n != 2 {
		t.Fatalf("narrowing took %d requests, want 2", n)
	}
}

func TestInFlightIsNoDifference(t *testing.T) {
	ref := stream(east, 1, 1000)
	got := stream(east, 1, 900) // 901-1000 not acknowledged yet
	res, _ := audit(t, ref, got, 900)
	if !res.Clean() {
		t.Fatalf("in-flight messages reported: %+v", res)
	}
	// Acknowledged by the cursor but not held: missing.
	res, _ = audit(t, ref, got, 950)
	if !slices.Equal(res.MissingAtGot, []Range{{901, 950}}) {
		t.Fatalf("missing = %v", res.MissingAtGot)
	}
}

func TestRelayedAboveThePositionIsCompared(t *testing.T) {
	ref := stream(east, 1, 100)
	got := stream(east, 1, 100)
	got[79].data = "x" // seq 80, above the cursor's position 50: relayed, so compared
	res, _ := audit(t, ref, got, 50)
	if !slices.Equal(res.Differing, []Range{{80, 80}}) {
		t.Fatalf("differing = %v", res.Differing)
	}
}

func TestTrimmedPrefixIsNoDifference(t *testing.T) {
	ref := stream(east, 1, 300)
	got := stream(east, 120, 300) // retention trimmed 1-119 there
	res, _ := audit(t, ref, got, 300)
	if !res.Clean() {
		t.Fatalf("trimmed prefix reported: %+v", res)
	}
}

func TestNothingHeldThereIsAllMissing(t *testing.T) {
	ref := stream(east, 1, 10)
	res, _ := audit(t, ref, nil, 10)
	if !slices.Equal(res.MissingAtGot, []Range{{1, 10}}) {
		t.Fatalf("missing = %v", res.MissingAtGot)
	}
}

func TestDuplicates(t *testing.T) {
	ref := stream(east, 1, 10)
	got := append(stream(east, 1, 10), msg{east, 7, "m7"})
	res, _ := audit(t, ref, got, 10)
	if !slices.Equal(res.Duplicates, []uint64{7}) {
		t.Fatalf("duplicates = %v", res.Duplicates)
	}
}

func TestStalled(t *testing.T) {
	first := []Cursor{
		{Topic: "a/b/c", Region: "us-east", Remote: "eu-west", Position: 10, LastOriginSeq: 20},
		{Topic: "a/b/c", Region: "us-east", Remote: "ap-south", Position: 10, LastOriginSeq: 20},
		{Topic: "a/b/c", Region: "eu-west", Remote: "us-east", Position: 5, LastOriginSeq: 5}, // caught up
	}
	second := []Cursor{
		{Topic: "a/b/c", Region: "us-east", Remote: "eu-west", Position: 10, LastOriginSeq: 30}, // stuck, lag "0"
		{Topic: "a/b/c", Region: "us-east", Remote: "ap-south", Position: 25, LastOriginSeq: 30},
		{Topic: "a/b/c", Region: "eu-west", Remote: "us-east", Position: 5, LastOriginSeq: 5},
	}
	s := Stalled(first, second)
	if len(s) != 1 || s[0].Second.Remote != "eu-west" {
		t.Fatalf("stalled = %+v", s)
	}
}

func TestRequestNormalize(t *testing.T) {
	q := Request{}
	if err := q.Normalize(); err != nil || q.From != 1 || q.To != math.MaxUint64 || q.Span != DefaultSpan {
		t.Fatalf("defaults: %+v %v", q, err)
	}
	for _, bad := range []Request{
		{From: 10, To: 5},
		{From: 1, To: MaxSpans * 2, Span: 1},
		{LocalFrom: 9, LocalTo: 3},
		{Origin: &Origin{Region: "x"}},
	} {
		if err := bad.Normalize(); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%+v: err %v, want ErrBadRequest", bad, err)
		}
	}
}

func TestDigestIgnoresNothingItCovers(t *testing.T) {
	h := []byte("NATS/1.0\r\nA: 1\r\n\r\n")
	d := Digest(1, h, []byte("x"))
	if d == Digest(2, h, []byte("x")) || d == Digest(1, nil, []byte("x")) || d == Digest(1, h, []byte("y")) {
		t.Fatal("digest ignores the sequence, header or payload")
	}
	// Header/payload boundary is part of it.
	if Digest(1, []byte("ab"), []byte("c")) == Digest(1, []byte("a"), []byte("bc")) {
		t.Fatal("digest ignores where the header ends")
	}
}

// Property: against a naive per-message comparison, Compare+Settle finds
// exactly the missing and differing sequences, for random copies.
func TestCompareMatchesNaive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Uint64Range(1, 600).Draw(t, "n")
		ref := stream(east, 1, n)
		got := copyOf{}
		missing, differing := map[uint64]bool{}, map[uint64]bool{}
		for _, m := range ref {
			switch rapid.IntRange(0, 20).Draw(t, "op") {
			case 0:
				missing[m.seq] = true
				continue
			case 1:
				differing[m.seq] = true
				m.data += "!"
			}
			got = append(got, m)
		}
		pos := rapid.Uint64Range(0, n).Draw(t, "pos")
		span := rapid.Uint64Range(1, 200).Draw(t, "span")
		rs, gs := ref.summarize(t, Request{Span: span}), got.summarize(t, Request{Span: span})
		r, g := rs.Find(east), gs.Find(east)
		win, ok := Window(r, g, Bound(pos, g, n))
		var gotMissing, gotDiff []uint64
		if ok {
			res := Compare(r, g, win, n)
			k := 0
			d, _, err := Settle(res, r, g, east, n, ref.fetch(t, &k), got.fetch(t, &k))
			if err != nil {
				t.Fatal(err)
			}
			gotMissing, gotDiff = expand(res.MissingAtGot), expand(normalize(append(res.Differing, d...)))
		}
		var wantMissing, wantDiff []uint64
		lo := lowest(g)
		for s := uint64(1); ok && s <= win.To; s++ {
			if missing[s] && (lo == 0 || s >= lo) {
				wantMissing = append(wantMissing, s)
			}
			if differing[s] && s >= win.From {
				wantDiff = append(wantDiff, s)
			}
		}
		if !slices.Equal(gotMissing, wantMissing) || !slices.Equal(gotDiff, wantDiff) {
			t.Fatalf("missing %v want %v; differing %v want %v (window %v)", gotMissing, wantMissing, gotDiff, wantDiff, win)
		}
	})
}

func expand(rs []Range) []uint64 {
	var out []uint64
	for _, r := range rs {
		for s := r.From; s <= r.To; s++ {
			out = append(out, s)
		}
	}
	return out
}

func FuzzRequestNormalize(f *testing.F) {
	f.Add(uint64(0), uint64(0), uint64(0), uint64(0), uint64(0))
	f.Add(uint64(5), uint64(1), uint64(1), uint64(3), uint64(2))
	f.Fuzz(func(t *testing.T, from, to, span, lf, lt uint64) {
		q := Request{From: from, To: to, Span: span, LocalFrom: lf, LocalTo: lt}
		if err := q.Normalize(); err != nil {
			return
		}
		if q.From == 0 || q.Span == 0 || q.To < q.From {
			t.Fatalf("normalized request invalid: %+v", q)
		}
	})
}
