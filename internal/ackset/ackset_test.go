package ackset

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

const maxU = math.MaxUint64

// fataler is what checkInvariants needs of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// checkInvariants fails t if s breaks a documented invariant.
func checkInvariants(t fataler, s *Set) {
	t.Helper()
	var n uint64
	prev := s.md
	for i, x := range s.r {
		if x.first > x.last {
			t.Fatalf("%v: range %d inverted", s, i)
		}
		if x.first <= prev || x.first-prev < 2 {
			t.Fatalf("%v: range %d does not start above %d+1", s, i, prev)
		}
		n += x.size()
		prev = x.last
	}
	if n != s.n {
		t.Fatalf("%v: n = %d, ranges cover %d", s, s.n, n)
	}
}

type op struct {
	kind       string // ack, range, upto
	a, b       uint64
	wantNew    int
	wantMD     uint64 // 0: unchanged
	wantRanges [][2]uint64
}

func apply(s *Set, o op) int {
	switch o.kind {
	case "ack":
		if s.Ack(o.a) {
			return 1
		}
		return 0
	case "range":
		return s.AckRange(o.a, o.b)
	case "upto":
		return s.AckUpTo(o.a)
	}
	panic("bad op " + o.kind)
}

func TestMerging(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   uint64
		ops  []op
	}{
		{"in order moves mark-delete", 0, []op{
			{kind: "ack", a: 1, wantNew: 1, wantMD: 1},
			{kind: "ack", a: 2, wantNew: 1, wantMD: 2},
			{kind: "ack", a: 2, wantNew: 0, wantMD: 2},
			{kind: "ack", a: 0, wantNew: 0, wantMD: 2},
		}},
		{"hole then adjacent extends right and left", 0, []op{
			{kind: "ack", a: 5, wantNew: 1, wantRanges: [][2]uint64{{5, 5}}},
			{kind: "ack", a: 6, wantNew: 1, wantRanges: [][2]uint64{{5, 6}}},
			{kind: "ack", a: 4, wantNew: 1, wantRanges: [][2]uint64{{4, 6}}},
			{kind: "ack", a: 8, wantNew: 1, wantRanges: [][2]uint64{{4, 6}, {8, 8}}},
			{kind: "ack", a: 7, wantNew: 1, wantRanges: [][2]uint64{{4, 8}}},
		}},
		{"filling the gap above mark-delete absorbs the range", 10, []op{
			{kind: "range", a: 13, b: 20, wantNew: 8, wantMD: 10, wantRanges: [][2]uint64{{13, 20}}},
			{kind: "ack", a: 11, wantNew: 1, wantMD: 11, wantRanges: [][2]uint64{{13, 20}}},
			{kind: "ack", a: 12, wantNew: 1, wantMD: 20},
		}},
		{"overlapping range counts only new", 0, []op{
			{kind: "range", a: 5, b: 9, wantNew: 5, wantRanges: [][2]uint64{{5, 9}}},
			{kind: "range", a: 12, b: 14, wantNew: 3, wantRanges: [][2]uint64{{5, 9}, {12, 14}}},
			{kind: "range", a: 7, b: 13, wantNew: 2, wantRanges: [][2]uint64{{5, 14}}},
			{kind: "range", a: 3, b: 20, wantNew: 8, wantRanges: [][2]uint64{{3, 20}}},
			{kind: "range", a: 4, b: 6, wantNew: 0, wantRanges: [][2]uint64{{3, 20}}},
		}},
		{"range adjacent on both sides joins three", 0, []op{
			{kind: "range", a: 3, b: 4, wantNew: 2, wantRanges: [][2]uint64{{3, 4}}},
			{kind: "range", a: 8, b: 9, wantNew: 2, wantRanges: [][2]uint64{{3, 4}, {8, 9}}},
			{kind: "range", a: 5, b: 7, wantNew: 3, wantRanges: [][2]uint64{{3, 9}}},
		}},
		{"range reaching mark-delete+1 is cumulative", 0, []op{
			{kind: "range", a: 5, b: 6, wantNew: 2, wantRanges: [][2]uint64{{5, 6}}},
			{kind: "range", a: 1, b: 3, wantNew: 3, wantMD: 3, wantRanges: [][2]uint64{{5, 6}}},
			{kind: "range", a: 2, b: 4, wantNew: 1, wantMD: 6},
		}},
		{"inverted and below-floor ranges are no-ops", 5, []op{
			{kind: "range", a: 9, b: 8, wantNew: 0, wantMD: 5},
			{kind: "range", a: 1, b: 5, wantNew: 0, wantMD: 5},
			{kind: "upto", a: 4, wantNew: 0, wantMD: 5},
		}},
		{"AckUpTo across ranges", 0, []op{
			{kind: "range", a: 3, b: 4, wantNew: 2},
			{kind: "range", a: 7, b: 9, wantNew: 3},
			{kind: "range", a: 12, b: 15, wantNew: 4},
			{kind: "range", a: 20, b: 20, wantNew: 1},
			// (0,13]: 13 seqs, 2+3+2 already acked; 12-15 straddles so md jumps to 15.
			{kind: "upto", a: 13, wantNew: 6, wantMD: 15, wantRanges: [][2]uint64{{20, 20}}},
			// touching the next range absorbs it.
			{kind: "upto", a: 19, wantNew: 4, wantMD: 20},
		}},
		{"AckUpTo ending right on a range end and just before one", 0, []op{
			{kind: "range", a: 3, b: 4, wantNew: 2},
			{kind: "range", a: 6, b: 6, wantNew: 1},
			{kind: "range", a: 9, b: 9, wantNew: 1},
			{kind: "upto", a: 4, wantNew: 2, wantMD: 4, wantRanges: [][2]uint64{{6, 6}, {9, 9}}},
			{kind: "upto", a: 7, wantNew: 2, wantMD: 7, wantRanges: [][2]uint64{{9, 9}}},
		}},
		{"top of the sequence space", maxU - 5, []op{
			{kind: "ack", a: maxU, wantNew: 1, wantMD: maxU - 5, wantRanges: [][2]uint64{{maxU, maxU}}},
			{kind: "range", a: maxU - 3, b: maxU - 1, wantNew: 3, wantMD: maxU - 5, wantRanges: [][2]uint64{{maxU - 3, maxU}}},
			{kind: "ack", a: maxU - 4, wantNew: 1, wantMD: maxU},
			{kind: "ack", a: maxU, wantNew: 0, wantMD: maxU},
		}},
		{"AckUpTo max", 0, []op{
			{kind: "range", a: 10, b: 20, wantNew: 11},
			{kind: "upto", a: maxU, wantNew: math.MaxInt, wantMD: maxU},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.md)
			for i, o := range tc.ops {
				if o.wantMD == 0 { // unset: mark-delete must not move
					o.wantMD = s.MarkDelete()
				}
				before := s.String()
				got := apply(s, o)
				checkInvariants(t, s)
				if got != o.wantNew {
					t.Errorf("op %d %s(%d,%d) on %s: new = %d, want %d", i, o.kind, o.a, o.b, before, got, o.wantNew)
				}
				if s.MarkDelete() != o.wantMD {
					t.Errorf("op %d %s(%d,%d) on %s: mark-delete = %d, want %d", i, o.kind, o.a, o.b, before, s.MarkDelete(), o.wantMD)
				}
				if o.wantRanges != nil || i == len(tc.ops)-1 {
					if !reflect.DeepEqual(s.Ranges(), o.wantRanges) {
						t.Errorf("op %d %s(%d,%d) on %s: ranges = %v, want %v", i, o.kind, o.a, o.b, before, s.Ranges(), o.wantRanges)
					}
				}
			}
		})
	}
}

func TestZeroValue(t *testing.T) {
	var s Set
	if s.MarkDelete() != 0 || s.Len() != 0 || s.Contains(0) || s.Contains(1) {
		t.Fatalf("zero value not empty: %v", &s)
	}
	if got := s.NextUnacked(0); got != 1 {
		t.Fatalf("NextUnacked(0) = %d, want 1", got)
	}
	if !s.Ack(1) || s.MarkDelete() != 1 {
		t.Fatalf("Ack(1) on zero value: %v", &s)
	}
}

func TestQueries(t *testing.T) {
	s := New(4)
	s.AckRange(7, 9)
	s.Ack(12)
	s.AckRange(20, 30)
	// acked: 1-4, 7-9, 12, 20-30
	for _, tc := range []struct {
		a, b uint64
		want int
	}{
		{0, 0, 0}, {0, 4, 4}, {1, 1, 1}, {5, 6, 0}, {3, 8, 4}, {8, 12, 3},
		{1, maxU, 4 + 3 + 1 + 11}, {5, maxU, 15}, {10, 25, 7}, {25, 24, 0},
		{31, maxU, 0}, {9, 20, 3}, {21, 29, 9},
	} {
		if got := s.Count(tc.a, tc.b); got != tc.want {
			t.Errorf("Count(%d,%d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	for after, want := range map[uint64]uint64{0: 5, 4: 5, 5: 6, 6: 10, 7: 10, 11: 13, 12: 13, 19: 31, 30: 31, 100: 101, maxU: 0} {
		if got := s.NextUnacked(after); got != want {
			t.Errorf("NextUnacked(%d) = %d, want %d", after, got, want)
		}
	}
	if got := New(maxU).NextUnacked(3); got != 0 {
		t.Errorf("NextUnacked on full set = %d, want 0", got)
	}
	if got, want := New(maxU).Count(0, maxU), math.MaxInt; got != want {
		t.Errorf("saturating Count = %d, want %d", got, want)
	}
	if got, want := s.String(), "4 [7-9 12 20-30]"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if s.Len() != 3 {
		t.Errorf("Len = %d, want 3", s.Len())
	}
}

func TestCloneIsIndependent(t *testing.T) {
	s := New(0)
	s.AckRange(3, 5)
	c := s.Clone()
	c.Ack(10)
	c.AckUpTo(2)
	if s.String() != "0 [3-5]" || c.String() != "5 [10]" {
		t.Fatalf("s = %v, c = %v", s, c)
	}
	r := s.Ranges()
	r[0][0] = 99
	if s.String() != "0 [3-5]" {
		t.Fatalf("Ranges aliased internal state: %v", s)
	}
}

func TestEncodingExamples(t *testing.T) {
	s := New(17)
	s.AckRange(19, 20)
	s.Ack(25)
	b, _ := s.MarshalBinary()
	// version, md=17, k=2, (gap 0, width 1), (gap 25-20-2=3, width 0)
	if want := []byte{1, 17, 2, 0, 1, 3, 0}; string(b) != string(want) {
		t.Fatalf("MarshalBinary = %v, want %v", b, want)
	}
	j, _ := json.Marshal(s)
	if want := `{"mark_delete":17,"ranges":[[19,20],[25,25]]}`; string(j) != want {
		t.Fatalf("MarshalJSON = %s, want %s", j, want)
	}
	j, _ = json.Marshal(New(3))
	if want := `{"mark_delete":3,"ranges":[]}`; string(j) != want {
		t.Fatalf("MarshalJSON empty = %s, want %s", j, want)
	}
	var u Set
	if err := json.Unmarshal([]byte(`{"mark_delete":17,"ranges":[[19,20],[25,25]]}`), &u); err != nil || u.String() != s.String() {
		t.Fatalf("UnmarshalJSON = %v, %v", &u, err)
	}
}

func TestUnmarshalErrors(t *testing.T) {
	for _, tc := range []struct {
		in      []byte
		wantErr error
		mention string
	}{
		{nil, ErrInvalid, "empty"},
		{[]byte{2}, ErrVersion, "2"},
		{[]byte{1}, ErrInvalid, "mark_delete: truncated"},
		{[]byte{1, 0x80, 0}, ErrInvalid, "mark_delete: non-minimal"},
		{[]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, ErrInvalid, "overflows"},
		{[]byte{1, 0, 5, 0, 0}, ErrInvalid, "range count 5"},
		{[]byte{1, 0, 1, 0}, ErrInvalid, "range count 1"},
		{[]byte{1, 0, 1, 0, 0, 9}, ErrInvalid, "trailing"},
		{[]byte{1, 0, 2, 0, 0, 0x80, 0x80}, ErrInvalid, "range 1 gap: truncated"},
		// md = MaxUint64-1 leaves no room for a range.
		{append(append([]byte{1}, uv(maxU-1)...), 1, 0, 0), ErrInvalid, "range 0 starts beyond"},
		{append(append([]byte{1, 0, 1}, uv(maxU-2)...), 1), ErrInvalid, "range 0 ends beyond"},
	} {
		s := New(42)
		err := s.UnmarshalBinary(tc.in)
		if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("UnmarshalBinary(%v) = %v, want %v mentioning %q", tc.in, err, tc.wantErr, tc.mention)
		}
		if s.String() != "42 []" {
			t.Errorf("failed UnmarshalBinary changed the set: %v", s)
		}
	}
	for _, tc := range []struct{ in, mention string }{
		{`{"mark_delete":1,"ranges":[[2,3]]}`, "range 0 [2,3] must start above"},
		{`{"mark_delete":1,"ranges":[[4,3]]}`, "inverted"},
		{`{"ranges":[[3,4],[5,6]]}`, "range 1 [5,6] overlaps, touches"},
		{`{"ranges":[[3,4],[4,6]]}`, "range 1 [4,6] overlaps"},
		{`{"ranges":[[5,6],[2,3]]}`, "precedes"},
		{`{"ranges":[[3]]}`, "1 elements"},
		{`{"ranges":[[3,4,5]]}`, "3 elements"},
		{`{"mark_delete":-1}`, "cannot unmarshal"},
		{`{"mark_delete":1,"extra":2}`, "unknown field"},
		{`{"mark_delete":1} {}`, "trailing"},
		{`{"mark_delete":18446744073709551615,"ranges":[[1,1]]}`, "must start above"},
		{`[`, "unexpected EOF"},
	} {
		s := New(42)
		err := s.UnmarshalJSON([]byte(tc.in))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("UnmarshalJSON(%s) = %v, want ErrInvalid mentioning %q", tc.in, err, tc.mention)
		}
		if s.String() != "42 []" {
			t.Errorf("failed UnmarshalJSON changed the set: %v", s)
		}
	}
}

func uv(v uint64) []byte {
	var b []byte
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
