package replicator

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/ackset"
)

var (
	usU1 = OriginStream{Region: "us", Incarnation: "u1"}
	euE1 = OriginStream{Region: "eu", Incarnation: "e1"}
)

func org(k OriginStream, seq uint64) Origin {
	return Origin{Region: k.Region, Incarnation: k.Incarnation, Seq: seq, Time: t0}
}

func TestSubSetAck(t *testing.T) {
	s := &SubSet{} // the zero value works like NewSubSet's
	if s.Version() != 0 || s.Len() != 0 || !s.Epoch().IsZero() || s.Deleted() {
		t.Fatalf("new set: %s version %d", s, s.Version())
	}
	for seq, want := range map[uint64]bool{1: true, 3: true} {
		if got, err := s.Ack(org(usU1, seq)); err != nil || got != want {
			t.Fatalf("Ack(%d) = %v, %v", seq, got, err)
		}
	}
	if got, err := s.Ack(org(usU1, 3)); err != nil || got {
		t.Fatalf("second Ack(3) = %v, %v", got, err)
	}
	if s.Version() != 2 {
		t.Fatalf("version %d after two new acks and a repeat", s.Version())
	}
	if n, err := s.AckRange(usU1, 0, 5); err != nil || n != 3 {
		t.Fatalf("AckRange(0, 5) = %d, %v; want 3 (2, 4, 5)", n, err)
	}
	if n, err := s.AckRange(euE1, 9, 8); err != nil || n != 0 || s.Len() != 1 {
		t.Fatalf("inverted AckRange = %d, %v, %d streams", n, err, s.Len())
	}
	for seq, want := range map[uint64]bool{0: false, 1: true, 5: true, 6: false} {
		if got := s.Contains(org(usU1, seq)); got != want {
			t.Errorf("Contains(us %d) = %v", seq, got)
		}
	}
	if s.Contains(org(euE1, 1)) || s.Contains(Origin{Region: "us", Incarnation: "u2", Seq: 1}) {
		t.Errorf("another stream or incarnation is acked")
	}
	if got := s.String(); got != "epoch 0 {us/u1: 5 []}" {
		t.Errorf("String() = %q", got)
	}
	if got := s.Acked(usU1); got.MarkDelete() != 5 {
		t.Errorf("Acked = %v", got)
	}
	s.Acked(usU1).AckUpTo(100) // a copy
	if s.Contains(org(usU1, 6)) {
		t.Errorf("Acked returned the set itself")
	}

	for _, o := range []Origin{{Region: "us", Seq: 1}, {Incarnation: "u1", Seq: 1}, org(usU1, 0)} {
		if _, err := s.Ack(o); !errors.Is(err, ErrInvalid) {
			t.Errorf("Ack(%+v) = %v, want ErrInvalid", o, err)
		}
	}
}

func TestEpochNext(t *testing.T) {
	at := func(ns int64) time.Time { return time.Unix(0, ns) }
	for _, tc := range []struct {
		name string
		from Epoch
		now  time.Time
		want Epoch
	}{
		{"first", Epoch{}, at(100), Epoch{Wall: 100, Region: "eu"}},
		{"clock ahead", Epoch{Wall: 100, Logical: 7, Region: "us"}, at(101), Epoch{Wall: 101, Region: "eu"}},
		{"same wall", Epoch{Wall: 100, Logical: 7, Region: "us"}, at(100), Epoch{Wall: 100, Logical: 8, Region: "eu"}},
		{"clock behind", Epoch{Wall: 100, Logical: 7, Region: "us"}, at(5), Epoch{Wall: 100, Logical: 8, Region: "eu"}},
		{"before 1970", Epoch{}, time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), Epoch{Logical: 1, Region: "eu"}},
		{"after 2262", Epoch{}, time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), Epoch{Wall: math.MaxInt64, Region: "eu"}},
		{"logical overflow", Epoch{Wall: 100, Logical: math.MaxUint64, Region: "us"}, at(100), Epoch{Wall: 101, Region: "eu"}},
	} {
		got, err := tc.from.Next(tc.now, "eu")
		if err != nil || got != tc.want {
			t.Errorf("%s: Next = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
		if got.Compare(tc.from) <= 0 {
			t.Errorf("%s: %s is not above %s", tc.name, got, tc.from)
		}
	}
	if _, err := (Epoch{}).Next(at(1), ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty region: %v", err)
	}
	if _, err := (Epoch{Wall: math.MaxInt64, Logical: math.MaxUint64, Region: "us"}).Next(at(1), "eu"); !errors.Is(err, ErrInvalid) {
		t.Errorf("exhausted: %v", err)
	}
	// Order: wall, then logical, then region.
	order := []Epoch{{}, {Logical: 1, Region: "us"}, {Wall: 1, Region: "ap"}, {Wall: 1, Region: "eu"}, {Wall: 1, Logical: 1, Region: "ap"}, {Wall: 2, Region: "ap"}}
	for i := range order {
		for j := range order {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := order[i].Compare(order[j]); got != want {
				t.Errorf("%s vs %s: %d, want %d", order[i], order[j], got, want)
			}
		}
	}
	if got := (Epoch{Wall: 1_500_000_000, Logical: 2, Region: "eu"}).String(); got != "1970-01-01T00:00:01.5Z.2@eu" {
		t.Errorf("String() = %q", got)
	}
}

func TestSubSetResetDelete(t *testing.T) {
	s := NewSubSet()
	s.AckRange(usU1, 1, 10)
	e1, err := s.Reset(t0, "us")
	if err != nil || e1 != (Epoch{Wall: t0.UnixNano(), Region: "us"}) || s.Len() != 0 || s.Contains(org(usU1, 1)) {
		t.Fatalf("Reset: %s, %v; set %s", e1, err, s)
	}
	s.Ack(org(usU1, 1))
	e2, err := s.Delete(t0, "eu") // same wall: logical moves
	if err != nil || e2.Logical != 1 || !s.Deleted() || s.Len() != 0 {
		t.Fatalf("Delete: %s, %v; set %s", e2, err, s)
	}
	v := s.Version()
	if _, err := s.Ack(org(usU1, 2)); !errors.Is(err, ErrSubDeleted) || s.Version() != v {
		t.Fatalf("ack after delete: %v", err)
	}
	if _, err := s.Reset(t0, ""); !errors.Is(err, ErrInvalid) || s.Epoch() != e2 || s.Version() != v {
		t.Fatalf("Reset with no region: %v, epoch %s", err, s.Epoch())
	}
	e3, err := s.Reset(t0.Add(-time.Hour), "us") // re-create; the clock went back
	if err != nil || e3.Compare(e2) <= 0 || s.Deleted() {
		t.Fatalf("re-create: %s, %v, deleted %v", e3, err, s.Deleted())
	}
	if ok, err := s.Ack(org(usU1, 2)); !ok || err != nil {
		t.Fatalf("ack after re-create: %v, %v", ok, err)
	}
}

func TestSubSetMerge(t *testing.T) {
	base := NewSubSet()
	base.AckRange(usU1, 1, 5)
	base.Ack(org(euE1, 3))

	t.Run("union", func(t *testing.T) {
		s, o := base.Clone(), NewSubSet()
		o.AckRange(usU1, 4, 8)
		o.AckRange(euE1, 3, 3)
		o.Ack(org(OriginStream{"ap", "a1"}, 1))
		v := s.Version()
		res := s.Merge(o)
		if res.Outcome != MergeUnion || res.Newly != 4 || !res.Changed() || s.Version() != v+1 {
			t.Fatalf("result %+v, version %d -> %d", res, v, s.Version())
		}
		if got := fmtStreams(res.Streams); got != "ap/a1 us/u1" {
			t.Fatalf("Streams %s", got)
		}
		if got := s.String(); got != "epoch 0 {ap/a1: 1 [], eu/e1: 0 [3], us/u1: 8 []}" {
			t.Fatalf("merged %s", got)
		}
		if res := s.Merge(o); res.Outcome != MergeUnion || res.Changed() || s.Version() != v+1 {
			t.Fatalf("merging again: %+v, version %d", res, s.Version())
		}
	})
	t.Run("higher epoch replaces", func(t *testing.T) {
		s, o := base.Clone(), NewSubSet()
		o.Reset(t0, "eu")
		o.Ack(org(usU1, 2))
		res := s.Merge(o)
		if res.Outcome != MergeReplaced || !res.Changed() || fmtStreams(res.Streams) != "us/u1" || !s.Equal(o) {
			t.Fatalf("result %+v, set %s", res, s)
		}
		o.AckRange(usU1, 1, 100)
		if s.Contains(org(usU1, 1)) {
			t.Fatalf("the merged set shares its ranges with the other")
		}
	})
	t.Run("lower epoch ignored", func(t *testing.T) {
		s := base.Clone()
		s.Reset(t0, "us")
		want := s.Clone()
		if res := s.Merge(base); res.Outcome != MergeIgnored || res.Changed() || !s.Equal(want) || s.Version() != want.Version() {
			t.Fatalf("result %+v, set %s", res, s)
		}
	})
	t.Run("deletion in the same epoch", func(t *testing.T) {
		live, dead := NewSubSet(), NewSubSet()
		live.Reset(t0, "us")
		dead.Reset(t0, "us")
		live.Ack(org(usU1, 1))
		dead.deleted = true // what a Delete with exactly this epoch would hold
		if res := live.Clone().Merge(dead); res.Outcome != MergeReplaced {
			t.Errorf("live <- dead: %+v", res)
		}
		if res := dead.Clone().Merge(live); res.Outcome != MergeIgnored {
			t.Errorf("dead <- live: %+v", res)
		}
	})
}

func fmtStreams(ks []OriginStream) string {
	var parts []string
	for _, k := range ks {
		parts = append(parts, k.String())
	}
	return strings.Join(parts, " ")
}

func TestSubSetDelta(t *testing.T) {
	s := NewSubSet()
	if d := s.Delta(0); d.Version() != 0 || d.Len() != 0 {
		t.Fatalf("delta of a new set: %s", d)
	}
	s.AckRange(usU1, 1, 5) // version 1
	s.AckRange(euE1, 1, 2) // version 2
	v := s.Version()
	if d := s.Delta(0); !d.Equal(s) || d.Version() != 1 {
		t.Fatalf("Delta(0) = %s (version %d)", d, d.Version())
	}
	if d := s.Delta(v); d.Len() != 0 || d.Epoch() != s.Epoch() {
		t.Fatalf("Delta(current) = %s", d)
	}
	s.Ack(org(usU1, 6))
	if d := s.Delta(v); d.String() != "epoch 0 {us/u1: 6 []}" {
		t.Fatalf("Delta(%d) = %s", v, d)
	}
	s.Reset(t0, "us")
	s.Ack(org(euE1, 9))
	if d := s.Delta(v); !d.Equal(s) {
		t.Fatalf("Delta across a reset = %s, want %s", d, s)
	}
	d := s.Delta(0)
	d.Ack(org(euE1, 10))
	if s.Contains(org(euE1, 10)) {
		t.Fatalf("the delta shares its sets")
	}
}

// sampleSubSet is a set with two streams, a hole and a non-zero epoch.
func sampleSubSet() *SubSet {
	s := NewSubSet()
	s.Reset(time.Unix(1, 5), "eu")
	s.AckRange(usU1, 1, 10)
	s.AckRange(usU1, 12, 14)
	s.Ack(org(euE1, 3))
	return s
}

func TestSubSetEncoding(t *testing.T) {
	// The documented format, byte by byte, for a set of one prefix.
	s := NewSubSet()
	s.AckRange(usU1, 1, 10)
	got, _ := s.MarshalBinary()
	want := []byte{1, 0, 0, 0, 0, 1, 2, 'u', 's', 2, 'u', '1', 3, 1, 10, 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding %v, want %v", got, want)
	}
	deleted := NewSubSet()
	deleted.Delete(t0, "ap")
	for _, s := range []*SubSet{NewSubSet(), s, sampleSubSet(), deleted} {
		b, _ := s.MarshalBinary()
		d, err := DecodeSubSet(b)
		if err != nil || !d.Equal(s) {
			t.Fatalf("binary round trip of %s: %v, %v", s, d, err)
		}
		j, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		dj, err := DecodeSubSetJSON(j)
		if err != nil || !dj.Equal(s) {
			t.Fatalf("JSON round trip of %s via %s: %v, %v", s, j, dj, err)
		}
		if wantV := min(s.Version(), 1); d.Version() != wantV || dj.Version() != wantV {
			t.Fatalf("decoded versions %d, %d; want %d", d.Version(), dj.Version(), wantV)
		}
	}
	j, _ := json.Marshal(sampleSubSet())
	const wantJSON = `{"epoch":{"wall":"1970-01-01T00:00:01.000000005Z","logical":0,"region":"eu"},"deleted":false,` +
		`"origins":[{"region":"eu","incarnation":"e1","acked":{"mark_delete":0,"ranges":[[3,3]]}},` +
		`{"region":"us","incarnation":"u1","acked":{"mark_delete":10,"ranges":[[12,14]]}}]}`
	if string(j) != wantJSON {
		t.Fatalf("JSON %s", j)
	}
	// A SubSet works as a field of a persisted JSON state.
	var st struct{ Sub *SubSet }
	if err := json.Unmarshal([]byte(`{"Sub":`+wantJSON+`}`), &st); err != nil || !st.Sub.Equal(sampleSubSet()) {
		t.Fatalf("as a field: %v, %v", st.Sub, err)
	}
}

func TestDecodeSubSetMalformed(t *testing.T) {
	good, _ := sampleSubSet().MarshalBinary()
	prefix := func(b ...byte) []byte { return append([]byte{1, 0}, b...) }
	usSet := func(set ...byte) []byte { // zero epoch, one stream us/u1
		return prefix(append([]byte{0, 0, 0, 1, 2, 'u', 's', 2, 'u', '1', byte(len(set))}, set...)...)
	}
	two := prefix(0, 0, 0, 2,
		2, 'u', 's', 2, 'u', '1', 3, 1, 1, 0,
		2, 'e', 'u', 2, 'e', '1', 3, 1, 1, 0)
	dup := prefix(0, 0, 0, 2,
		2, 'u', 's', 2, 'u', '1', 3, 1, 1, 0,
		2, 'u', 's', 2, 'u', '1', 3, 1, 2, 0)
	named := func(n int) []byte { // a stream whose region is n bytes long
		b := binary.AppendUvarint(prefix(0, 0, 0, 1), uint64(n))
		b = append(b, bytes.Repeat([]byte{'x'}, n)...)
		return append(b, 2, 'u', '1', 3, 1, 1, 0)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "empty input"},
		{"version", []byte{2, 0}, "version 2"},
		{"no flags", []byte{1}, "flags: truncated"},
		{"flags", []byte{1, 2}, "unknown flags"},
		{"wall truncated", prefix(), "epoch wall: truncated"},
		{"wall non-minimal", prefix(0x80, 0), "epoch wall: non-minimal"},
		{"wall overflow", prefix(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f), "varint overflows"},
		{"wall beyond int64", prefix(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), "beyond MaxInt64"},
		{"epoch without region", prefix(5, 0, 0, 0), "names no region"},
		{"region at (0, 0)", prefix(0, 0, 2, 'e', 'u', 0), "not above the zero epoch"},
		{"region truncated", prefix(5, 0, 3, 'e', 'u'), "epoch region: 3 bytes, 2 left"},
		{"region not UTF-8", prefix(5, 0, 2, 0xff, 0xfe, 0), "not UTF-8"},
		{"deleted zero epoch", []byte{1, 1, 0, 0, 0, 0}, "deleted in the zero epoch"},
		{"deleted with streams", []byte{1, 1, 5, 0, 2, 'e', 'u', 1, 2, 'u', 's', 2, 'u', '1', 3, 1, 1, 0}, "in a deleted set"},
		{"count beyond input", prefix(0, 0, 0, 9, 1, 2, 3), "stream count 9 exceeds"},
		{"empty region", prefix(0, 0, 0, 1, 0, 2, 'u', '1', 3, 1, 1, 0), "stream 0 region is empty"},
		{"long name", named(256), "stream 0 region is 256 bytes (at most 255)"},
		{"empty set", usSet(1, 0, 0), "has an empty set"},
		{"bad set", usSet(1, 0x81, 0, 0), "stream 0 (us/u1) set: ackset: invalid encoding: mark_delete: non-minimal"},
		{"set version", usSet(9, 1, 0), "unsupported encoding version"},
		{"set truncated", prefix(0, 0, 0, 1, 2, 'u', 's', 2, 'u', '1', 5, 1, 1, 0), "set: 5 bytes, 3 left"},
		{"unsorted", two, "is not after stream 0"},
		{"duplicate", dup, "is not after stream 0"},
		{"trailing", append(good, 0), "1 trailing bytes"},
	} {
		s, err := DecodeSubSet(tc.in)
		if err == nil || s != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (set %v); want an ErrInvalid naming %q", tc.name, err, s, tc.want)
		}
	}
	if s, err := DecodeSubSet(named(255)); err != nil || s.Len() != 1 {
		t.Errorf("255-byte name: %v", err)
	}
	// ackset's own error stays visible.
	if _, err := DecodeSubSet(usSet(9, 1, 0)); !errors.Is(err, ackset.ErrVersion) {
		t.Errorf("ackset error not wrapped: %v", err)
	}
	// On error, UnmarshalBinary leaves the set as it was.
	s := sampleSubSet()
	if err := s.UnmarshalBinary(append(good, 0)); err == nil || !s.Equal(sampleSubSet()) {
		t.Errorf("failed UnmarshalBinary changed the set: %s", s)
	}
}

func TestDecodeSubSetJSONMalformed(t *testing.T) {
	const ep = `"epoch":{"wall":"2026-01-01T00:00:00Z","logical":0,"region":"eu"}`
	for _, tc := range []struct {
		name, in, want string
	}{
		{"null", `null`, "null"},
		{"not an object", `[]`, "cannot unmarshal"},
		{"unknown field", `{"epoch":{"wall":"1970-01-01T00:00:00Z","logical":0,"region":""},"colour":1}`, "unknown field"},
		{"trailing", `{} {}`, "trailing data"},
		{"bad wall", `{"epoch":{"wall":"yesterday","logical":0,"region":"eu"}}`, "epoch"},
		{"wall before 1970", `{"epoch":{"wall":"1960-01-01T00:00:00Z","logical":1,"region":"eu"}}`, "outside 1970..2262"},
		{"epoch field", `{"epoch":{"wall":"2026-01-01T00:00:00Z","tick":1}}`, "unknown field"},
		{"epoch without region", `{"epoch":{"wall":"2026-01-01T00:00:00Z","logical":0,"region":""}}`, "names no region"},
		{"deleted in zero epoch", `{"deleted":true}`, "deleted in the zero epoch"},
		{"deleted with origins", `{` + ep + `,"deleted":true,"origins":[{"region":"us","incarnation":"u1","acked":{"mark_delete":1}}]}`, "in a deleted set"},
		{"no acked", `{"origins":[{"region":"us","incarnation":"u1"}]}`, "no acked set"},
		{"empty acked", `{"origins":[{"region":"us","incarnation":"u1","acked":{"mark_delete":0,"ranges":[]}}]}`, "has an empty set"},
		{"bad acked", `{"origins":[{"region":"us","incarnation":"u1","acked":{"mark_delete":3,"ranges":[[4,5]]}}]}`, "must start above mark_delete+1"},
		{"no incarnation", `{"origins":[{"region":"us","acked":{"mark_delete":1}}]}`, "stream 0 incarnation is empty"},
		{"duplicate", `{"origins":[{"region":"us","incarnation":"u1","acked":{"mark_delete":1}},{"region":"us","incarnation":"u1","acked":{"mark_delete":2}}]}`, "appears twice"},
	} {
		s, err := DecodeSubSetJSON([]byte(tc.in))
		if err == nil || s != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an ErrInvalid naming %q", tc.name, err, tc.want)
		}
	}
	// Origins in any order are accepted; the encoding sorts them.
	s, err := DecodeSubSetJSON([]byte(`{"origins":[{"region":"us","incarnation":"u1","acked":{"mark_delete":1}},{"region":"eu","incarnation":"e1","acked":{"mark_delete":2}}]}`))
	if err != nil || s.String() != "epoch 0 {eu/e1: 2 [], us/u1: 1 []}" {
		t.Fatalf("unsorted origins: %v, %v", s, err)
	}
}

// FuzzDecodeSubSet: decoding never panics; an accepted input is canonical
// (re-encodes to itself), round-trips through JSON, and behaves: merging
// it with itself or with its Delta(0) changes nothing, and its Version is
// 0 only for the zero value.
func FuzzDecodeSubSet(f *testing.F) {
	deleted := NewSubSet()
	deleted.Delete(t0, "ap")
	big := sampleSubSet()
	big.AckRange(OriginStream{"ap", "a1"}, 1<<40, math.MaxUint64)
	for _, s := range []*SubSet{NewSubSet(), sampleSubSet(), deleted, big} {
		b, _ := s.MarshalBinary()
		f.Add(b)
	}
	for _, b := range [][]byte{nil, {1}, {1, 0, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 1, 0, 0, 1, 0}, {1, 1, 5, 0, 2, 'e', 'u', 0}} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSubSet(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || s != nil {
				t.Fatalf("error %v does not wrap ErrInvalid (set %v)", err, s)
			}
			return
		}
		b, _ := s.MarshalBinary()
		if !bytes.Equal(b, data) {
			t.Fatalf("not canonical: %x decoded to %s re-encodes to %x", data, s, b)
		}
		j, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		u, err := DecodeSubSetJSON(j)
		if err != nil || !u.Equal(s) {
			t.Fatalf("JSON round trip of %s via %s: %v, %v", s, j, u, err)
		}
		zero := s.Equal(NewSubSet())
		if (s.Version() == 0) != zero {
			t.Fatalf("version %d of %s", s.Version(), s)
		}
		c := s.Clone()
		if res := c.Merge(s); res.Changed() || !c.Equal(s) {
			t.Fatalf("self-merge changed %s: %+v", s, res)
		}
		if res := c.Merge(s.Delta(0)); res.Changed() || !c.Equal(s) {
			t.Fatalf("merging Delta(0) changed %s: %+v", s, res)
		}
		n := NewSubSet()
		if n.Merge(s); !n.Equal(s) {
			t.Fatalf("merging into a new set does not give %s", s)
		}
	})
}
