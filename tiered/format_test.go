package tiered

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"strings"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	src := newSource(1, 40, 5000)
	var data []byte
	for id := int64(7); id <= 40; id++ {
		data = AppendFrame(data, 9, id, src.payload(id))
	}
	es, err := DecodeFrames(data, 9, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 34 {
		t.Fatalf("%d entries, want 34", len(es))
	}
	for i, e := range es {
		if want := int64(7 + i); e.ID != want || !bytes.Equal(e.Payload, src.payload(want)) {
			t.Fatalf("entry %d: id %d, %d bytes; want id %d", i, e.ID, len(e.Payload), want)
		}
	}
	if es, err := DecodeFrames(nil, 9, 0); err != nil || len(es) != 0 {
		t.Fatalf("empty input: %v, %v", es, err)
	}
}

func TestDecodeFramesMalformed(t *testing.T) {
	good := AppendFrame(AppendFrame(nil, 3, 0, []byte("hello")), 3, 1, []byte("world!"))
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	huge := mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:12], MaxEntryBytes+1); return b })
	for _, tc := range []struct {
		name      string
		data      []byte
		ledger    int64
		first     int64
		wantInErr string
	}{
		{"truncated header", good[:10], 3, 0, "shorter than a frame header"},
		{"truncated second header", good[:FrameHeaderSize+5+3], 3, 0, "shorter than a frame header"},
		{"truncated payload", good[:len(good)-1], 3, 0, "runs past"},
		{"wrong first id", good, 3, 1, "holds entry 0, want 1"},
		{"other ledger", good, 4, 0, "CRC32C"},
		{"flipped payload byte", mut(func(b []byte) []byte { b[FrameHeaderSize+1] ^= 1; return b }), 3, 0, "CRC32C"},
		{"flipped crc", mut(func(b []byte) []byte { b[13] ^= 1; return b }), 3, 0, "CRC32C"},
		{"length too large", huge, 3, 0, "exceeds"},
		{"length past the end", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:12], 1000); return b }), 3, 0, "runs past"},
		{"second id wrong", mut(func(b []byte) []byte { b[FrameHeaderSize+5+7] = 5; return b }), 3, 0, "holds entry 5, want 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, err := DecodeFrames(tc.data, tc.ledger, tc.first)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.wantInErr) {
				t.Fatalf("got %v, %v; want ErrCorrupt mentioning %q", es, err, tc.wantInErr)
			}
		})
	}
}

// testIndex is a valid index of 10 entries every 4 (points 0, 4, 8).
func testIndex() Index {
	return Index{LedgerID: 77, Entries: 10, DataBytes: 1000, Interval: 4, Offsets: []int64{0, 300, 700}}
}

// reseal recomputes the CRC of a mutated index object.
func reseal(b []byte) []byte {
	binary.BigEndian.PutUint32(b[8:12], crc32.Checksum(b[12:], castagnoli))
	return b
}

func TestIndexRoundTrip(t *testing.T) {
	for _, ix := range []Index{
		testIndex(),
		{LedgerID: 0, Entries: 1, DataBytes: 16, Interval: 64, Offsets: []int64{0}},
		{LedgerID: 5, Entries: 3, DataBytes: 48, Interval: 1, Offsets: []int64{0, 16, 32}},
		{LedgerID: math.MaxInt64, Entries: 65, DataBytes: 65 * 16, Interval: 64, Offsets: []int64{0, 64 * 16}},
	} {
		b, err := EncodeIndex(ix)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != IndexHeaderSize+IndexPointSize*len(ix.Offsets) {
			t.Fatalf("%d bytes for %d points", len(b), len(ix.Offsets))
		}
		got, err := DecodeIndex(b)
		if err != nil {
			t.Fatal(err)
		}
		if got.LedgerID != ix.LedgerID || got.Entries != ix.Entries || got.DataBytes != ix.DataBytes ||
			got.Interval != ix.Interval || !equalInt64s(got.Offsets, ix.Offsets) {
			t.Fatalf("decoded %+v, want %+v", got, ix)
		}
		if got.LastEntryID() != ix.Entries-1 || got.PayloadBytes() != ix.DataBytes-16*ix.Entries {
			t.Fatalf("LastEntryID %d PayloadBytes %d", got.LastEntryID(), got.PayloadBytes())
		}
	}
}

func equalInt64s(a, b []int64) bool {
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

func TestDecodeIndexMalformed(t *testing.T) {
	good, err := EncodeIndex(testIndex())
	if err != nil {
		t.Fatal(err)
	}
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	put64 := func(at int, v uint64) func(b []byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint64(b[at:at+8], v); return reseal(b) }
	}
	point := func(k, field int) int { return IndexHeaderSize + IndexPointSize*k + 8*field }
	cases := []struct {
		name, wantInErr string
		data            []byte
	}{
		{"empty", "shorter than", nil},
		{"short header", "shorter than", good[:IndexHeaderSize-1]},
		{"truncated points", "bytes of points", reseal(bytes.Clone(good[:len(good)-1]))},
		{"trailing byte", "bytes of points", reseal(append(bytes.Clone(good), 0))},
		{"truncated unsealed", "CRC32C", good[:len(good)-8]},
		{"bad magic", "bad magic", mut(func(b []byte) []byte { b[0] = 'X'; return b })},
		{"version", "format version 2", mut(func(b []byte) []byte { b[5] = 2; return b })},
		{"flags", "flags", mut(func(b []byte) []byte { b[7] = 1; return b })},
		{"crc", "CRC32C", mut(func(b []byte) []byte { b[8] ^= 1; return b })},
		{"flipped body", "CRC32C", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b })},
		{"interval 0", "index interval 0", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[12:16], 0); return reseal(b) })},
		{"interval huge", "index interval", mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[12:16], math.MaxUint32); return reseal(b) })},
		{"no entries", "entry count 0", mut(put64(24, 0))},
		{"negative entries", "entry count", mut(put64(24, math.MaxUint64))},
		{"last id", "last entry id", mut(put64(32, 10))},
		{"huge counts", "cannot hold", mut(func(b []byte) []byte {
			binary.BigEndian.PutUint64(b[24:32], 1<<62)
			binary.BigEndian.PutUint64(b[32:40], 1<<62-1)
			return reseal(b)
		})},
		{"huge points", "more than", mut(put64(48, 1<<40))},
		{"points disagree", "bytes of points", mut(put64(48, 4))},
		{"points for entries", "3 index points for 20 entries every 4, want 5", mut(func(b []byte) []byte {
			binary.BigEndian.PutUint64(b[24:32], 20)
			binary.BigEndian.PutUint64(b[32:40], 19)
			return reseal(b)
		})},
		{"data too short", "cannot hold", mut(put64(40, 100))},
		{"negative data length", "data length -1, want", mut(put64(40, math.MaxUint64))},
		{"data length huge", "want 0..", mut(put64(40, math.MaxInt64))},
		{"data past max entries", "more than 10 entries", mut(put64(40, 10*(16+MaxEntryBytes)+1))},
		{"first offset", "entry 0 at offset 5", mut(put64(point(0, 1), 5))},
		{"point id", "names entry 5, want 4", mut(put64(point(1, 0), 5))},
		{"offsets out of order", "not after", mut(put64(point(2, 1), 300))},
		{"offsets descending", "not after", mut(put64(point(2, 1), 200))},
		{"offset past data", "cannot fit", mut(put64(point(2, 1), 2000))},
		{"too close", "cannot fit", mut(put64(point(1, 1), 4*16-1))},
		{"tail too short", "cannot fit", mut(put64(point(2, 1), 1000-2*16+1))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ix, err := DecodeIndex(tc.data)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.wantInErr) {
				t.Fatalf("got %+v, %v; want ErrCorrupt mentioning %q", ix, err, tc.wantInErr)
			}
		})
	}
	// Every truncation fails.
	for n := range len(good) {
		if _, err := DecodeIndex(good[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
}

func TestEncodeIndexRejectsInvalid(t *testing.T) {
	for _, ix := range []Index{
		{LedgerID: -1, Entries: 1, DataBytes: 16, Interval: 1, Offsets: []int64{0}},
		{LedgerID: 1, Entries: 0, DataBytes: 0, Interval: 1},
		{LedgerID: 1, Entries: 2, DataBytes: 32, Interval: 1, Offsets: []int64{0}},
		{LedgerID: 1, Entries: 2, DataBytes: 32, Interval: 1, Offsets: []int64{0, 8}},
		{LedgerID: 1, Entries: 2, DataBytes: 32, Interval: 0, Offsets: []int64{0, 16}},
		{LedgerID: 1, Entries: 2, DataBytes: 31, Interval: 2, Offsets: []int64{0}},
	} {
		if b, err := EncodeIndex(ix); !errors.Is(err, ErrInvalid) {
			t.Fatalf("EncodeIndex(%+v) = %d bytes, %v; want ErrInvalid", ix, len(b), err)
		}
	}
}
