package ackset

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzUnmarshalBinary checks that decoding never panics, that every
// accepted input is canonical (re-encodes to itself) and yields a set that
// keeps the invariants, and that the JSON form of that set round-trips.
func FuzzUnmarshalBinary(f *testing.F) {
	seeds := []*Set{New(0), New(5), New(maxU), New(maxU - 2)}
	s := New(17)
	s.AckRange(19, 20)
	s.Ack(25)
	s.AckRange(1<<40, 1<<41)
	s.Ack(maxU)
	seeds = append(seeds, s)
	for _, s := range seeds {
		b, _ := s.MarshalBinary()
		f.Add(b)
	}
	for _, b := range [][]byte{nil, {0}, {2}, {1}, {1, 0x80, 0}, {1, 0, 1, 0}, {1, 0, 2, 0, 0, 0x80, 0x80}} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Set
		if err := s.UnmarshalBinary(data); err != nil {
			if s.md != 0 || s.r != nil || s.n != 0 {
				t.Fatalf("failed decode changed the set: %v", &s)
			}
			return
		}
		checkInvariants(t, &s)
		b, err := s.MarshalBinary()
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("not canonical: %x decoded to %v re-encodes to %x (%v)", data, &s, b, err)
		}
		j, err := json.Marshal(&s)
		if err != nil {
			t.Fatal(err)
		}
		var u Set
		if err := json.Unmarshal(j, &u); err != nil {
			t.Fatalf("UnmarshalJSON(%s): %v", j, err)
		}
		if u.md != s.md || u.n != s.n || !reflect.DeepEqual(u.Ranges(), s.Ranges()) {
			t.Fatalf("JSON round trip: %v became %v", &s, &u)
		}
		// The decoded set must behave: ack its whole span and land on a floor.
		if md := s.MarkDelete(); s.Len() > 0 {
			last := s.r[len(s.r)-1].last
			s.AckUpTo(last)
			if s.MarkDelete() != last || s.Len() != 0 || md > last {
				t.Fatalf("AckUpTo(%d) left %v", last, &s)
			}
		}
	})
}
