package mledger

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func sameMessage(a, b Message) bool {
	return a.Seq == b.Seq && a.Subject == b.Subject && bytes.Equal(a.Header, b.Header) &&
		bytes.Equal(a.Data, b.Data) && a.Time.Equal(b.Time)
}

func TestEntryRoundTrip(t *testing.T) {
	hdr := []byte("NATS/1.0\r\nNats-Msg-Id: x\r\n\r\n")
	for _, m := range []Message{
		{Seq: 1, Subject: "a", Time: time.Unix(0, 0).UTC()},
		{Seq: 2, Subject: "t.ns.orders.eu", Header: hdr, Data: []byte("hello"), Time: time.Unix(1700000000, 123456789).UTC()},
		{Seq: math.MaxUint64, Subject: strings.Repeat("s", 300), Data: bytes.Repeat([]byte{0}, 1000), Time: time.Unix(-5, 0).UTC()},
	} {
		b := EncodeEntry(nil, &m)
		if len(b) != EncodedSize(&m) {
			t.Errorf("seq %d: EncodedSize %d, encoded %d bytes", m.Seq, EncodedSize(&m), len(b))
		}
		got, err := DecodeEntry(b)
		if err != nil {
			t.Fatalf("seq %d: %v", m.Seq, err)
		}
		if !sameMessage(got, m) {
			t.Errorf("round trip: got %+v, want %+v", got, m)
		}
		if got.Time.Location() != time.UTC {
			t.Errorf("time not UTC: %v", got.Time.Location())
		}
	}
}

func TestDecodeEntryMalformed(t *testing.T) {
	good := EncodeEntry(nil, &Message{Seq: 7, Subject: "subj", Header: []byte("NATS/1.0\r\n\r\n"), Data: []byte("d"), Time: time.Unix(1, 0)})
	cases := map[string]struct {
		b    []byte
		want string
	}{
		"empty":        {nil, "shorter than"},
		"version":      {append([]byte{2}, good[1:]...), "version 2"},
		"flags":        {append([]byte{1, 0x80}, good[2:]...), "flags"},
		"seq":          {[]byte{1, 0, 0x80}, "seq"},
		"time":         {[]byte{1, 0, 1, 0x80}, "time"},
		"subject len":  {[]byte{1, 0, 1, 2, 0x80}, "subject length"},
		"subject past": {[]byte{1, 0, 1, 2, 5, 'a'}, "subject length 5"},
		"header past":  {[]byte{1, 0, 1, 2, 1, 'a', 9}, "header length 9"},
	}
	for name, c := range cases {
		_, err := DecodeEntry(c.b)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want ErrCorrupt naming %q", name, err, c.want)
		}
	}
}

// FuzzDecodeEntry: decoding never panics, and whatever decodes encodes
// back to the same bytes (the format has one encoding per message);
// messages built from the input round-trip.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(EncodeEntry(nil, &Message{Seq: 1, Subject: "a.b", Header: []byte("NATS/1.0\r\nA: b\r\n\r\n"), Data: []byte("x"), Time: time.Unix(5, 6)}))
	f.Add([]byte{1, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 0, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeEntry(b)
		if err == nil {
			if re := EncodeEntry(nil, &m); !bytes.Equal(re, b) && canonicalVarints(b) {
				t.Fatalf("re-encoding %x gave %x", b, re)
			}
		}
		// Any message made of the input round-trips.
		n := len(b) / 3
		in := Message{Seq: uint64(len(b)) * 7919, Subject: string(b[:n]), Header: b[n : 2*n], Data: b[2*n:], Time: time.Unix(0, int64(len(b))*1e9+int64(n)).UTC()}
		got, err := DecodeEntry(EncodeEntry(nil, &in))
		if err != nil || !sameMessage(got, in) {
			t.Fatalf("round trip of %+v: %+v, %v", in, got, err)
		}
	})
}

// canonicalVarints reports whether re-encoding can be expected to give b
// back: varints may be written with redundant continuation bytes, which
// decode fine but encode shorter.
func canonicalVarints(b []byte) bool {
	m, err := DecodeEntry(b)
	return err == nil && EncodedSize(&m) == len(b)
}

func TestNameKey(t *testing.T) {
	n := Name{Tenant: "acme", Namespace: "prod", Topic: "orders-partition-1"}
	if n.String() != "acme/prod/orders-partition-1" || n.Key() != "topics/acme/prod/orders-partition-1" {
		t.Fatalf("String %q Key %q", n.String(), n.Key())
	}
	if got, ok := ParseKey(n.Key()); !ok || got != n {
		t.Fatalf("ParseKey(%q) = %v, %v", n.Key(), got, ok)
	}
	for _, k := range []string{"topics/a/b", "topics/a/b/c/d", "ledgers/a/b/c", "topics/a/b/c.d", "topics//b/c"} {
		if _, ok := ParseKey(k); ok {
			t.Errorf("ParseKey(%q) accepted", k)
		}
	}
	if (Name{Tenant: "a", Namespace: "b", Topic: "x:y"}).Validate() == nil {
		t.Error("Validate accepted ':'")
	}
}
