package jetstream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	for _, e := range []envelope{
		{},
		{Hops: 2, Origin: "solo.b1", Subject: "ord.new", Reply: "_INBOX.x.y", Topic: "demo/streams/ORD", Account: "demo", Header: []byte("NATS/1.0\r\nA: b\r\n\r\n"), Data: []byte("payload")},
		{Origin: "b2", Subject: "_INBOX.a", Reply: "$JS.ACK.S.C.1.2.3.4.5", Show: "ord.a", Data: bytes.Repeat([]byte{0}, 70000)},
	} {
		got, err := unmarshalEnvelope(e.marshal())
		if err != nil {
			t.Fatalf("%+v: %v", e, err)
		}
		if got.Hops != e.Hops || got.Origin != e.Origin || got.Subject != e.Subject || got.Reply != e.Reply || got.Show != e.Show || got.Topic != e.Topic ||
			!bytes.Equal(got.Header, e.Header) || !bytes.Equal(got.Data, e.Data) {
			t.Fatalf("round trip: got %+v, want %+v", got, e)
		}
	}
}

// TestEnvelopeVersion1: an envelope of version 1 (no Topic), from a
// broker of the previous release, still decodes.
func TestEnvelopeVersion1(t *testing.T) {
	v1 := []byte{1, 0, 2, 'b', '1', 1, 's', 1, 'r', 0, 0, 'x'}
	got, err := unmarshalEnvelope(v1)
	if err != nil || got.Origin != "b1" || got.Subject != "s" || got.Reply != "r" || got.Topic != "" || string(got.Data) != "x" {
		t.Fatalf("version 1: %+v, %v", got, err)
	}
}

func TestEnvelopeMalformed(t *testing.T) {
	good := (&envelope{Origin: "b1", Subject: "s", Reply: "r", Header: []byte("h")}).marshal()
	for name, b := range map[string][]byte{
		"empty":          nil,
		"version":        append([]byte{9}, good[1:]...),
		"truncated":      good[:4],
		"length too big": {envelopeVersion, 0, 0xff, 0xff, 0x03, 'x'},
		"bad varint":     {envelopeVersion, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	} {
		if _, err := unmarshalEnvelope(b); !errors.Is(err, errEnvelope) {
			t.Errorf("%s: err %v, want errEnvelope", name, err)
		}
	}
}

// FuzzEnvelope: decoding never panics, and whatever decodes re-encodes to
// an envelope that decodes the same.
func FuzzEnvelope(f *testing.F) {
	f.Add((&envelope{Origin: "b1", Subject: "ord.a", Reply: "_INBOX.1", Header: []byte("NATS/1.0\r\n\r\n"), Data: []byte("x")}).marshal())
	f.Add([]byte{envelopeVersion, 1, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := unmarshalEnvelope(b)
		if err != nil {
			return
		}
		again, err := unmarshalEnvelope(e.marshal())
		if err != nil {
			t.Fatalf("re-encoded envelope does not decode: %v", err)
		}
		if again.Origin != e.Origin || again.Subject != e.Subject || again.Reply != e.Reply || again.Show != e.Show ||
			!bytes.Equal(again.Header, e.Header) || !bytes.Equal(again.Data, e.Data) || again.Hops != e.Hops {
			t.Fatalf("re-encoding changed the envelope: %+v vs %+v", e, again)
		}
	})
}

// TestDeliveryBatch: a batch of deliveries splits back into its
// envelopes in order; a single envelope is one delivery; malformed
// batches are refused whole.
func TestDeliveryBatch(t *testing.T) {
	want := []envelope{
		{Origin: "b1", Subject: "_INBOX.a", Reply: "$JS.ACK.S.C.1.1.1.1.0", Show: "ord.a", Data: []byte("one")},
		{Origin: "b1", Subject: "_INBOX.a", Show: "_INBOX.a", Header: []byte("NATS/1.0 408 Request Timeout\r\n\r\n")},
		{Origin: "b1", Subject: "_INBOX.b", Reply: "$JS.ACK.S.C.1.2.2.2.0", Show: "ord.b", Data: bytes.Repeat([]byte{7}, 3000)},
	}
	var buf []byte
	buf = append(buf, dlvBatchVersion)
	for _, e := range want {
		enc := e.marshal()
		buf = binary.AppendUvarint(buf, uint64(len(enc)))
		buf = append(buf, enc...)
	}
	got, err := splitDeliveries(buf)
	if err != nil || len(got) != len(want) {
		t.Fatalf("split: %d envelopes, %v", len(got), err)
	}
	for i := range want {
		if got[i].Subject != want[i].Subject || got[i].Reply != want[i].Reply || got[i].Show != want[i].Show ||
			!bytes.Equal(got[i].Header, want[i].Header) || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("delivery %d: got %+v", i, got[i])
		}
	}
	one, err := splitDeliveries(want[0].marshal())
	if err != nil || len(one) != 1 || string(one[0].Data) != "one" {
		t.Fatalf("single: %+v, %v", one, err)
	}
	for _, bad := range [][]byte{buf[:len(buf)-1], append([]byte{dlvBatchVersion}, 0xff), {dlvBatchVersion, 3, 1, 0, 0}} {
		if _, err := splitDeliveries(bad); err == nil {
			t.Fatalf("malformed batch %x accepted", bad)
		}
	}
}

func FuzzDeliveryBatch(f *testing.F) {
	f.Add([]byte{dlvBatchVersion})
	f.Add(append([]byte{dlvBatchVersion, 12}, (&envelope{Origin: "b", Subject: "s"}).marshal()...))
	f.Fuzz(func(t *testing.T, p []byte) {
		es, err := splitDeliveries(p)
		if err != nil {
			return
		}
		for _, e := range es {
			if _, err := unmarshalEnvelope(e.marshal()); err != nil {
				t.Fatalf("a decoded delivery does not re-encode: %v", err)
			}
		}
	})
}
