package mledger

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func sameMessage(a, b Message) bool {
	return a.Seq == b.Seq && a.Subject == b.Subject && bytes.Equal(a.Header, b.Header) &&
		bytes.Equal(a.Data, b.Data) && a.Time.Equal(b.Time) && sameOrigin(a.Origin, b.Origin)
}

func sameOrigin(a, b Origin) bool {
	return a.Region == b.Region && a.Incarnation == b.Incarnation && a.Seq == b.Seq &&
		(a.Seq == 0 || a.Time.Equal(b.Time))
}

// encodeV1 is the version 1 (single-message) encoder used before
// batching, kept for tests of reading old data.
func encodeV1(dst []byte, m *Message) []byte {
	dst = append(dst, entryV1, 0)
	dst = binary.AppendUvarint(dst, m.Seq)
	dst = binary.AppendVarint(dst, m.Time.UnixNano())
	dst = binary.AppendUvarint(dst, uint64(len(m.Subject)))
	dst = append(dst, m.Subject...)
	dst = binary.AppendUvarint(dst, uint64(len(m.Header)))
	dst = append(dst, m.Header...)
	return append(dst, m.Data...)
}

func v1Size(m *Message) int {
	return 2 + uvarintLen(m.Seq) + varintLen(m.Time.UnixNano()) +
		uvarintLen(uint64(len(m.Subject))) + len(m.Subject) +
		uvarintLen(uint64(len(m.Header))) + len(m.Header) + len(m.Data)
}

var testMsgs = []Message{
	{Seq: 1, Subject: "a", Time: time.Unix(0, 0).UTC()},
	{Seq: 2, Subject: "t.ns.orders.eu", Header: []byte("NATS/1.0\r\nNats-Msg-Id: x\r\n\r\n"), Data: []byte("hello"), Time: time.Unix(1700000000, 123456789).UTC()},
	{Seq: 3, Subject: strings.Repeat("s", 300), Data: bytes.Repeat([]byte{0}, 1000), Time: time.Unix(-5, 0).UTC()},
	{Seq: 4, Subject: "", Header: []byte("NATS/1.0\r\n\r\n"), Time: time.Unix(1700000000, 0).UTC()},
	// With origins: a local publish (origin time = publish time), a
	// replicated one (earlier origin time), extreme times and sequences.
	{Seq: 5, Subject: "l", Header: []byte("NATS/1.0\r\nA: b\r\n\r\n"), Data: []byte("local"), Time: time.Unix(1700000001, 5).UTC(),
		Origin: Origin{Region: "us-east", Incarnation: "0b8e2f2a-6c0e-4a57-9d7e-1f1f2a3b4c5d", Seq: 1, Time: time.Unix(1700000001, 5).UTC()}},
	{Seq: 6, Subject: "r", Data: []byte("replicated"), Time: time.Unix(1700000002, 0).UTC(),
		Origin: Origin{Region: "eu-west", Incarnation: "inc", Seq: 1 << 40, Time: time.Unix(1699999999, 999).UTC()}},
	{Seq: 7, Subject: "x", Header: []byte("NATS/1.0\r\n\r\n"), Time: time.Unix(0, math.MaxInt64).UTC(),
		Origin: Origin{Region: "r", Incarnation: "i", Seq: math.MaxUint64, Time: time.Unix(0, math.MinInt64).UTC()}},
}

func TestBatchRoundTrip(t *testing.T) {
	for _, first := range []uint64{1, 1 << 40, math.MaxUint64 - uint64(len(testMsgs)) + 1} {
		for n := 1; n <= len(testMsgs); n++ {
			in := make([]Message, n)
			records := 0
			for i := range in {
				in[i] = testMsgs[i]
				in[i].Seq = first + uint64(i)
				records += EncodedSize(&in[i])
				if r := appendRecord(nil, &in[i]); len(r) != EncodedSize(&in[i]) {
					t.Fatalf("record of %d bytes, EncodedSize %d", len(r), EncodedSize(&in[i]))
				}
			}
			b := EncodeBatch([]byte("prefix"), in)[len("prefix"):]
			if len(b) != batchSize(records) || msgBytes(int64(len(b)), 1) != int64(records) {
				t.Fatalf("%d messages: %d bytes, batchSize %d", n, len(b), batchSize(records))
			}
			got, err := DecodeBatch(b)
			if err != nil {
				t.Fatalf("first %d, %d messages: %v", first, n, err)
			}
			if len(got) != n {
				t.Fatalf("decoded %d messages, want %d", len(got), n)
			}
			for i := range got {
				if !sameMessage(got[i], in[i]) {
					t.Errorf("message %d: got %+v, want %+v", i, got[i], in[i])
				}
				if got[i].Time.Location() != time.UTC {
					t.Errorf("time not UTC: %v", got[i].Time.Location())
				}
				if (got[i].Header == nil) != (len(in[i].Header) == 0) || (got[i].Data == nil) != (len(in[i].Data) == 0) {
					t.Errorf("message %d: empty fields must be nil: %+v", i, got[i])
				}
			}
		}
	}
}

// TestRecordLayout pins the record format of entry.go byte by byte: a
// record with origin fields, and one without (as written before origins,
// still decoded with the zero Origin).
func TestRecordLayout(t *testing.T) {
	pub := time.Unix(0, 1000).UTC()
	m := Message{Seq: 9, Subject: "s", Header: []byte("H"), Data: []byte("D"), Time: pub,
		Origin: Origin{Region: "eu", Incarnation: "in", Seq: 300, Time: pub.Add(-3)}}
	want := []byte{
		entryV2, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1, // version, first 9, count 1
		flagOrigin, // flags
		0xd0, 0x0f, // time 1000 (zigzag varint 2000)
		1, 's', // subject
		1, 'H', // header
		2, 'e', 'u', // origin region
		2, 'i', 'n', // incarnation
		0xac, 0x02, // origin seq 300
		5,      // origin time - publish time = -3 (zigzag 5)
		1, 'D', // data
	}
	if got := EncodeBatch(nil, []Message{m}); !bytes.Equal(got, want) {
		t.Fatalf("encoded %x, want %x", got, want)
	}
	if EncodedSize(&m) != len(want)-batchHeaderSize {
		t.Fatalf("EncodedSize %d, record %d", EncodedSize(&m), len(want)-batchHeaderSize)
	}
	got, err := DecodeBatch(want)
	if err != nil || len(got) != 1 || !sameMessage(got[0], m) || got[0].Origin.Time.Location() != time.UTC {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	// Without an origin: flags 0, no origin fields; decodes with none.
	old := []byte{entryV2, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0xd0, 0x0f, 1, 's', 1, 'H', 1, 'D'}
	m.Origin = Origin{}
	if got := EncodeBatch(nil, []Message{m}); !bytes.Equal(got, old) {
		t.Fatalf("encoded without origin %x, want %x", got, old)
	}
	if got, err := DecodeBatch(old); err != nil || len(got) != 1 || !sameMessage(got[0], m) || got[0].HasOrigin() || got[0].Origin != (Origin{}) {
		t.Fatalf("decoded without origin %+v, %v", got, err)
	}
}

// TestDecodeV1: entries written before batching decode as one message.
func TestDecodeV1(t *testing.T) {
	for _, m := range testMsgs {
		m.Origin = Origin{} // version 1 has no origin
		b := encodeV1(nil, &m)
		got, err := DecodeBatch(b)
		if err != nil || len(got) != 1 || !sameMessage(got[0], m) {
			t.Fatalf("v1 %+v: %+v, %v", m, got, err)
		}
	}
}

// TestStoredMessage: Publish's view of a message aliasing its record.
func TestStoredMessage(t *testing.T) {
	for _, m := range testMsgs {
		rec := appendRecord(nil, &m)
		got := storedMessage(rec, &m)
		if !sameMessage(got, m) || (got.Header == nil) != (len(m.Header) == 0) || (got.Data == nil) != (len(m.Data) == 0) {
			t.Fatalf("stored %+v, want %+v", got, m)
		}
		if len(m.Data) > 0 && &got.Data[0] != &rec[len(rec)-len(m.Data)] {
			t.Fatal("data does not alias the record")
		}
	}
}

func TestDecodeBatchMalformed(t *testing.T) {
	rec := func(m Message) []byte { return appendRecord(nil, &m) }
	hdr := func(first uint64, n uint32) []byte {
		b := []byte{entryV2}
		b = binary.BigEndian.AppendUint64(b, first)
		return binary.BigEndian.AppendUint32(b, n)
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	one := rec(Message{Subject: "subj", Header: []byte("NATS/1.0\r\n\r\n"), Data: []byte("d"), Time: time.Unix(1, 0)})
	good1 := encodeV1(nil, &Message{Seq: 7, Subject: "subj", Header: []byte("NATS/1.0\r\n\r\n"), Data: []byte("d"), Time: time.Unix(1, 0)})
	cases := map[string]struct {
		b    []byte
		want string
	}{
		"empty":             {nil, "empty entry"},
		"version":           {append([]byte{3}, one...), "version 3"},
		"v2 short header":   {hdr(1, 1)[:12], "shorter than its 13-byte header"},
		"v2 count 0":        {hdr(1, 0), "count 0"},
		"v2 count too big":  {cat(hdr(1, 2), one[:4]), "count 2 in 4 bytes"},
		"v2 seq 0":          {cat(hdr(0, 1), one), "sequences 0+1"},
		"v2 seq overflow":   {cat(hdr(math.MaxUint64, 2), one, one), "out of range"},
		"v2 flags":          {cat(hdr(1, 1), []byte{0x40}, one[1:]), "record flags 0x40"},
		"v2 time":           {cat(hdr(1, 1), []byte{0, 0x80, 0x80, 0x80, 0x80, 0x80}), "record time"},
		"v2 subject past":   {cat(hdr(1, 1), []byte{0, 2, 9, 'a', 0, 0}), "subject length 9"},
		"v2 header past":    {cat(hdr(1, 1), []byte{0, 2, 1, 'a', 7, 0}), "header length 7"},
		"v2 data past":      {cat(hdr(1, 1), []byte{0, 2, 0, 0, 5, 'x'}), "data length 5"},
		"v2 data bad len":   {cat(hdr(1, 1), []byte{0, 2, 0, 0, 0x80, 0x80}), "data length: bad uvarint"},
		"v2 second message": {cat(hdr(5, 2), one, []byte{0, 2, 9, 'a', 0, 0}), "message 2 of 2"},
		"v2 flags 0x02":     {cat(hdr(1, 1), []byte{0x02}, one[1:]), "record flags 0x02"},
		"v2 origin region":  {cat(hdr(1, 1), []byte{1, 2, 0, 0, 9, 'a'}), "origin region length 9"},
		"v2 origin inc":     {cat(hdr(1, 1), []byte{1, 2, 0, 0, 1, 'r', 0x80}), "origin incarnation length: bad uvarint"},
		"v2 origin seq":     {cat(hdr(1, 1), []byte{1, 2, 0, 0, 1, 'r', 1, 'i', 0x80}), "origin seq: bad uvarint"},
		"v2 origin time":    {cat(hdr(1, 1), []byte{1, 2, 0, 0, 1, 'r', 1, 'i', 1, 0x80}), "origin time: bad varint"},
		"v2 origin no data": {cat(hdr(1, 1), []byte{1, 2, 0, 0, 1, 'r', 1, 'i', 1, 0}), "data length: bad uvarint"},
		"v2 origin seq 0":   {cat(hdr(1, 1), []byte{1, 2, 0, 0, 1, 'r', 1, 'i', 0, 0, 0}), "origin seq 0"},
		"v2 empty region":   {cat(hdr(1, 1), []byte{1, 2, 0, 0, 0, 1, 'i', 1, 0, 0}), "origin region empty"},
		"v2 empty inc":      {cat(hdr(1, 1), []byte{1, 2, 0, 0, 1, 'r', 0, 1, 0, 0}), "origin incarnation empty"},
		"v2 no origin":      {cat(hdr(1, 1), []byte{1, 2, 0, 0, 0x80}), "origin region length: bad uvarint"},
		"v2 trailing":       {cat(hdr(1, 1), one, []byte{0, 0, 0, 0, 0, 0}), "6 bytes after its 1 messages"},
		"v1 short":          {[]byte{1}, "shorter than its 2-byte prefix"},
		"v1 flags":          {append([]byte{1, 0x80}, good1[2:]...), "flags"},
		"v1 origin flag":    {append([]byte{1, flagOrigin}, good1[2:]...), "flags 0x01 not known to version 1"},
		"v1 seq":            {[]byte{1, 0, 0x80}, "seq"},
		"v1 seq 0":          {[]byte{1, 0, 0, 2, 0, 0}, "seq 0"},
		"v1 time":           {[]byte{1, 0, 1, 0x80}, "time"},
		"v1 subject len":    {[]byte{1, 0, 1, 2, 0x80}, "subject length"},
		"v1 subject past":   {[]byte{1, 0, 1, 2, 5, 'a'}, "subject length 5"},
		"v1 header past":    {[]byte{1, 0, 1, 2, 1, 'a', 9}, "header length 9"},
	}
	for name, c := range cases {
		_, err := DecodeBatch(c.b)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want ErrCorrupt naming %q", name, err, c.want)
		}
	}
}

// FuzzDecodeEntry: decoding (either version) never panics, and whatever
// decodes encodes back to the same bytes in its version (the formats have
// one encoding per message, up to redundant varint bytes); messages built
// from the input round-trip through both versions.
func FuzzDecodeEntry(f *testing.F) {
	m := Message{Seq: 1, Subject: "a.b", Header: []byte("NATS/1.0\r\nA: b\r\n\r\n"), Data: []byte("x"), Time: time.Unix(5, 6)}
	f.Add(encodeV1(nil, &m))
	f.Add(EncodeBatch(nil, []Message{m, {Seq: 2, Subject: "c", Time: time.Unix(7, 0)}}))
	local := Origin{Region: "us-east", Incarnation: "6f1c2b0e-8d9a-4c3b-a1e2-f3d4c5b6a798", Seq: 1, Time: time.Unix(5, 6)}
	f.Add(EncodeBatch(nil, []Message{ // a local message, a replicated one, one without origin
		{Seq: 3, Subject: "a.b", Data: []byte("x"), Time: time.Unix(5, 6), Origin: local},
		{Seq: 4, Subject: "a.c", Header: []byte("NATS/1.0\r\n\r\n"), Time: time.Unix(5, 7), Origin: Origin{Region: "eu-west", Incarnation: "i", Seq: 1 << 33, Time: time.Unix(4, 0)}},
		{Seq: 5, Subject: "a.d", Time: time.Unix(5, 8)},
	}))
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 'r', 1, 'i', 1, 0, 0})
	f.Add([]byte{1, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 0, 0xff, 0xff, 0xff})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := DecodeBatch(b)
		if err == nil {
			if len(msgs) == 0 {
				t.Fatal("decoded no message")
			}
			for i := range msgs {
				if msgs[i].Seq != msgs[0].Seq+uint64(i) {
					t.Fatalf("message %d has seq %d after %d", i, msgs[i].Seq, msgs[0].Seq)
				}
			}
			var re []byte
			size := 0
			if b[0] == entryV1 {
				re, size = encodeV1(nil, &msgs[0]), v1Size(&msgs[0])
			} else {
				re = EncodeBatch(nil, msgs)
				size = batchHeaderSize
				for i := range msgs {
					size += EncodedSize(&msgs[i])
				}
			}
			if size == len(b) && !bytes.Equal(re, b) { // else: redundant varint bytes
				t.Fatalf("re-encoding %x gave %x", b, re)
			}
		}
		// Messages made of the input round-trip, as a batch and in v1
		// (without the origin, which version 1 does not have).
		n := len(b) / 3
		in := []Message{
			{Seq: uint64(len(b))*7919 + 1, Subject: string(b[:n]), Header: b[n : 2*n], Data: b[2*n:], Time: time.Unix(0, int64(len(b))*1e9+int64(n)).UTC()},
			{Seq: uint64(len(b))*7919 + 2, Subject: string(b[2*n:]), Data: b[:n], Time: time.Unix(0, -int64(n)).UTC(),
				Origin: Origin{Region: "r" + string(b[:n]), Incarnation: "i" + string(b[n:2*n]), Seq: uint64(len(b))<<20 + 1, Time: time.Unix(0, int64(n)<<40).UTC()}},
			{Seq: uint64(len(b))*7919 + 3, Subject: "s", Time: time.Unix(0, 0).UTC(), Origin: Origin{Region: "x", Incarnation: "y", Seq: 1, Time: time.Unix(0, -int64(len(b))<<50).UTC()}},
		}
		got, err := DecodeBatch(EncodeBatch(nil, in))
		if err != nil || len(got) != len(in) {
			t.Fatalf("round trip of %+v: %+v, %v", in, got, err)
		}
		for i := range in {
			if !sameMessage(got[i], in[i]) || EncodedSize(&in[i]) != len(appendRecord(nil, &in[i])) {
				t.Fatalf("round trip of %+v: %+v", in[i], got[i])
			}
		}
		got, err = DecodeBatch(encodeV1(nil, &in[0]))
		if err != nil || len(got) != 1 || !sameMessage(got[0], in[0]) {
			t.Fatalf("v1 round trip of %+v: %+v, %v", in[0], got, err)
		}
	})
}

// TestLedgerInfoCompat: a ledger list written before batching (no
// "msgs": one message per entry) loads with Msgs = Entries; a new one
// round-trips.
func TestLedgerInfoCompat(t *testing.T) {
	old := `{"ledgers":[{"id":3,"first_seq":1,"entries":10,"bytes":400,"first_time":"2025-01-01T00:00:00Z","last_time":"2025-01-01T00:00:09Z","state":"closed"},` +
		`{"id":4,"first_seq":11,"entries":-1,"bytes":0,"first_time":"0001-01-01T00:00:00Z","last_time":"0001-01-01T00:00:00Z","state":"open"}],"first_seq":1}`
	var tm TopicMeta
	if err := json.Unmarshal([]byte(old), &tm); err != nil {
		t.Fatal(err)
	}
	if l := tm.Ledgers[0]; l.Msgs != 10 || l.Entries != 10 || l.Bytes != 400 || l.end() != 10 || !l.LastTime.Equal(t0.Add(9*time.Second)) {
		t.Fatalf("old closed ledger: %+v", l)
	}
	if l := tm.Ledgers[1]; l.Msgs != -1 || l.Entries != -1 || l.State != LedgerOpen {
		t.Fatalf("old open ledger: %+v", l)
	}
	if _, _, err := restoreCore(&TopicMeta{FirstSeq: 1, Ledgers: tm.Ledgers[:1]}, Limits{}, 1000, testTopic.TopicID(), ""); err != nil {
		t.Fatalf("restore from an old list: %v", err)
	}
	li := LedgerInfo{ID: 5, FirstSeq: 11, Entries: 2, Msgs: 7, Bytes: 90, State: LedgerClosed}
	b, _ := json.Marshal(li)
	var back LedgerInfo
	if err := json.Unmarshal(b, &back); err != nil || back != li {
		t.Fatalf("round trip %s: %+v, %v", b, back, err)
	}
	if !strings.Contains(string(b), `"msgs":7`) {
		t.Fatalf("encoded %s", b)
	}
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
