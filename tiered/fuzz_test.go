package tiered

import (
	"bytes"
	"testing"
)

// FuzzDecodeIndex: DecodeIndex never panics, and whatever it accepts
// encodes back to the same bytes.
func FuzzDecodeIndex(f *testing.F) {
	for _, ix := range []Index{
		testIndex(),
		{LedgerID: 1, Entries: 1, DataBytes: 16, Interval: 64, Offsets: []int64{0}},
		{LedgerID: 2, Entries: 3, DataBytes: 100, Interval: 1, Offsets: []int64{0, 16, 50}},
	} {
		b, err := EncodeIndex(ix)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-3])
	}
	f.Add([]byte("STIX"))
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(b []byte) {
			ix, err := DecodeIndex(b)
			if err != nil {
				return
			}
			again, err := EncodeIndex(ix)
			if err != nil {
				t.Fatalf("decoded %+v does not encode: %v", ix, err)
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("re-encoding differs:\n%x\n%x", b, again)
			}
		}
		check(b)
		// Random bytes rarely pass the CRC: check them again with a
		// valid one, so the structural checks get fuzzed too.
		if len(b) >= 12 {
			check(reseal(bytes.Clone(b)))
		}
	})
}

// FuzzDecodeFrames: DecodeFrames never panics, and whatever it accepts
// encodes back to the same bytes.
func FuzzDecodeFrames(f *testing.F) {
	ok := AppendFrame(AppendFrame(AppendFrame(nil, 5, 3, []byte("a")), 5, 4, nil), 5, 5, bytes.Repeat([]byte("x"), 100))
	f.Add(ok, int64(5), int64(3))
	f.Add(ok[:20], int64(5), int64(3))
	f.Add([]byte{}, int64(0), int64(0))
	f.Fuzz(func(t *testing.T, data []byte, ledgerID, firstID int64) {
		es, err := DecodeFrames(data, ledgerID, firstID)
		if err != nil {
			return
		}
		var again []byte
		for i, e := range es {
			if e.ID != firstID+int64(i) {
				t.Fatalf("entry %d has id %d, first %d", i, e.ID, firstID)
			}
			again = AppendFrame(again, ledgerID, e.ID, e.Payload)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("re-encoding differs")
		}
	})
}
