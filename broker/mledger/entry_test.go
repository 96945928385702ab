package mledger

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/tenancy"
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

// testLocal is the Local of testMsgs' topic: message 5's origin stream
// (a local publish, written compact).
var testLocal = Local{Region: "us-east", Incarnation: "0b8e2f2a-6c0e-4a57-9d7e-1f1f2a3b4c5d"}

// testLocals are the Locals the round trips run with: none (every origin
// in full), testLocal, and message 7's stream (compact with a stored
// origin time).
var testLocals = []Local{{}, testLocal, {Region: "r", Incarnation: "i"}}

func TestBatchRoundTrip(t *testing.T) {
	for _, l := range testLocals {
		for _, first := range []uint64{1, 1 << 40, math.MaxUint64 - uint64(len(testMsgs)) + 1} {
			for n := 1; n <= len(testMsgs); n++ {
				in := make([]Message, n)
				records := 0
				for i := range in {
					in[i] = testMsgs[i]
					in[i].Seq = first + uint64(i)
					records += EncodedSize(&in[i], l)
					r := appendRecord(nil, &in[i], l)
					if len(r) != EncodedSize(&in[i], l) {
						t.Fatalf("record of %d bytes, EncodedSize %d", len(r), EncodedSize(&in[i], l))
					}
					if compact := r[0]&flagLocalOrigin != 0; compact != l.has(&in[i].Origin) {
						t.Fatalf("local %+v, origin %+v: flags %#x", l, in[i].Origin, r[0])
					}
				}
				b := EncodeBatch([]byte("prefix"), in, l)[len("prefix"):]
				if len(b) != batchSize(records) || msgBytes(int64(len(b)), 1) != int64(records) {
					t.Fatalf("%d messages: %d bytes, batchSize %d", n, len(b), batchSize(records))
				}
				got, err := DecodeBatch(b, l)
				if err != nil {
					t.Fatalf("local %+v, first %d, %d messages: %v", l, first, n, err)
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
}

// TestRecordLayout pins the record format of entry.go byte by byte: a
// full origin, with and without a stored origin time; a local origin
// (compact), with and without; one without an origin; and the records
// written before flagLocalOrigin and flagOriginNow (a local message's
// full origin with a zero time difference), still decoded.
func TestRecordLayout(t *testing.T) {
	pub := time.Unix(0, 1000).UTC()
	local := Local{Region: "eu", Incarnation: "in"}
	m := Message{Seq: 9, Subject: "s", Header: []byte("H"), Data: []byte("D"), Time: pub,
		Origin: Origin{Region: "eu", Incarnation: "in", Seq: 300, Time: pub.Add(-3)}}
	head := []byte{
		entryV2, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1, // version, first 9, count 1
	}
	body := []byte{
		0xd0, 0x0f, // time 1000 (zigzag varint 2000)
		1, 's', // subject
		1, 'H', // header
	}
	full := []byte{
		2, 'e', 'u', // origin region
		2, 'i', 'n', // incarnation
	}
	seq := []byte{0xac, 0x02} // origin seq 300
	delta := []byte{5}        // origin time - publish time = -3 (zigzag 5)
	data := []byte{1, 'D'}
	cat := func(flags byte, parts ...[]byte) []byte {
		b := append(slices.Clone(head), flags)
		b = append(b, body...)
		for _, p := range parts {
			b = append(b, p...)
		}
		return append(b, data...)
	}
	now := m
	now.Origin.Time = pub
	for _, c := range []struct {
		name  string
		m     Message
		local Local
		want  []byte
	}{
		{"full", m, Local{}, cat(flagOrigin, full, seq, delta)},
		{"full, other local", m, Local{Region: "eu", Incarnation: "other"}, cat(flagOrigin, full, seq, delta)},
		{"full now", now, Local{}, cat(flagOrigin|flagOriginNow, full, seq)},
		{"local", m, local, cat(flagLocalOrigin, seq, delta)},
		{"local now", now, local, cat(flagLocalOrigin|flagOriginNow, seq)},
	} {
		if got := EncodeBatch(nil, []Message{c.m}, c.local); !bytes.Equal(got, c.want) {
			t.Fatalf("%s: encoded %x, want %x", c.name, got, c.want)
		}
		if EncodedSize(&c.m, c.local) != len(c.want)-batchHeaderSize {
			t.Fatalf("%s: EncodedSize %d, record %d", c.name, EncodedSize(&c.m, c.local), len(c.want)-batchHeaderSize)
		}
		got, err := DecodeBatch(c.want, c.local)
		if err != nil || len(got) != 1 || !sameMessage(got[0], c.m) || got[0].Origin.Time.Location() != time.UTC {
			t.Fatalf("%s: decoded %+v, %v", c.name, got, err)
		}
	}
	// Written before flagLocalOrigin and flagOriginNow: a full origin with
	// its zero time difference stored. Decodes alike with any Local.
	old := cat(flagOrigin, full, seq, []byte{0})
	for _, l := range []Local{{}, local} {
		if got, err := DecodeBatch(old, l); err != nil || len(got) != 1 || !sameMessage(got[0], now) {
			t.Fatalf("old local record with %+v: %+v, %v", l, got, err)
		}
	}
	// Without an origin: flags 0, no origin fields; decodes with none.
	none := cat(0)
	m.Origin = Origin{}
	for _, l := range []Local{{}, local} {
		if got := EncodeBatch(nil, []Message{m}, l); !bytes.Equal(got, none) {
			t.Fatalf("encoded without origin %x, want %x", got, none)
		}
		if got, err := DecodeBatch(none, l); err != nil || len(got) != 1 || !sameMessage(got[0], m) || got[0].HasOrigin() || got[0].Origin != (Origin{}) {
			t.Fatalf("decoded without origin %+v, %v", got, err)
		}
	}
}

// TestRecordSizes measures what the compact local record saves on a
// 128-byte message as BenchmarkPublish publishes it (subject
// "bench.subject", no header, a UUID incarnation), against the record
// written before it (the full origin with a one-byte zero time
// difference: the full form's size plus that byte).
func TestRecordSizes(t *testing.T) {
	for _, region := range []string{"us-east", "bench-region"} {
		now := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
		l := Local{Region: region, Incarnation: "6f1c2b0e-8d9a-4c3b-a1e2-f3d4c5b6a798"}
		for _, seq := range []uint64{1, 100_000, 1 << 32} {
			m := Message{Seq: seq, Subject: "bench.subject", Data: make([]byte, 128), Time: now,
				Origin: Origin{Region: l.Region, Incarnation: l.Incarnation, Seq: seq, Time: now}}
			before := EncodedSize(&m, Local{}) + 1
			after := EncodedSize(&m, l)
			noOrigin := m
			noOrigin.Origin = Origin{}
			none := EncodedSize(&noOrigin, l)
			t.Logf("region %-12s origin seq %-10d: record %d B before, %d B compact (-%d B, -%.1f%%); %d B without an origin (origin +%d B before, +%d B now)",
				region, seq, before, after, before-after, 100*float64(before-after)/float64(before), none, before-none, after-none)
			if after-none != uvarintLen(seq) || before-after < 40 {
				t.Fatalf("compact origin costs %d B (want the seq's %d), saves %d", after-none, uvarintLen(seq), before-after)
			}
		}
	}
}

// TestDecodeV1: entries written before batching decode as one message.
func TestDecodeV1(t *testing.T) {
	for _, m := range testMsgs {
		m.Origin = Origin{} // version 1 has no origin
		b := encodeV1(nil, &m)
		for _, l := range testLocals {
			got, err := DecodeBatch(b, l)
			if err != nil || len(got) != 1 || !sameMessage(got[0], m) {
				t.Fatalf("v1 %+v: %+v, %v", m, got, err)
			}
		}
	}
}

// TestStoredMessage: Publish's view of a message aliasing its record.
func TestStoredMessage(t *testing.T) {
	for _, l := range testLocals {
		for _, m := range testMsgs {
			rec := appendRecord(nil, &m, l)
			got := storedMessage(rec, &m)
			if !sameMessage(got, m) || (got.Header == nil) != (len(m.Header) == 0) || (got.Data == nil) != (len(m.Data) == 0) {
				t.Fatalf("stored %+v, want %+v", got, m)
			}
			if len(m.Data) > 0 && &got.Data[0] != &rec[len(rec)-len(m.Data)] {
				t.Fatal("data does not alias the record")
			}
			if len(m.Header) > 0 && !bytes.Contains(rec, got.Header) {
				t.Fatal("header does not alias the record")
			}
		}
	}
}

func TestDecodeBatchMalformed(t *testing.T) {
	rec := func(m Message) []byte { return appendRecord(nil, &m, Local{}) }
	hdr := func(first uint64, n uint32) []byte {
		b := []byte{entryV2}
		b = binary.BigEndian.AppendUint64(b, first)
		return binary.BigEndian.AppendUint32(b, n)
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	one := rec(Message{Subject: "subj", Header: []byte("NATS/1.0\r\n\r\n"), Data: []byte("d"), Time: time.Unix(1, 0)})
	good1 := encodeV1(nil, &Message{Seq: 7, Subject: "subj", Header: []byte("NATS/1.0\r\n\r\n"), Data: []byte("d"), Time: time.Unix(1, 0)})
	const (
		full     = flagOrigin
		fullNow  = flagOrigin | flagOriginNow
		local    = flagLocalOrigin
		localNow = flagLocalOrigin | flagOriginNow
	)
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
		"v2 flags 0x08":     {cat(hdr(1, 1), []byte{0x08 | localNow}, one[1:]), "record flags 0x08 not known"},
		"v2 time":           {cat(hdr(1, 1), []byte{0, 0x80, 0x80, 0x80, 0x80, 0x80}), "record time"},
		"v2 subject past":   {cat(hdr(1, 1), []byte{0, 2, 9, 'a', 0, 0}), "subject length 9"},
		"v2 header past":    {cat(hdr(1, 1), []byte{0, 2, 1, 'a', 7, 0}), "header length 7"},
		"v2 data past":      {cat(hdr(1, 1), []byte{0, 2, 0, 0, 5, 'x'}), "data length 5"},
		"v2 data bad len":   {cat(hdr(1, 1), []byte{0, 2, 0, 0, 0x80, 0x80}), "data length: bad uvarint"},
		"v2 second message": {cat(hdr(5, 2), one, []byte{0, 2, 9, 'a', 0, 0}), "message 2 of 2"},
		"v2 origin region":  {cat(hdr(1, 1), []byte{full, 2, 0, 0, 9, 'a'}), "origin region length 9"},
		"v2 origin inc":     {cat(hdr(1, 1), []byte{full, 2, 0, 0, 1, 'r', 0x80}), "origin incarnation length: bad uvarint"},
		"v2 origin seq":     {cat(hdr(1, 1), []byte{full, 2, 0, 0, 1, 'r', 1, 'i', 0x80}), "origin seq: bad uvarint"},
		"v2 origin time":    {cat(hdr(1, 1), []byte{full, 2, 0, 0, 1, 'r', 1, 'i', 1, 0x80}), "origin time: bad varint"},
		"v2 origin no data": {cat(hdr(1, 1), []byte{full, 2, 0, 0, 1, 'r', 1, 'i', 1, 0}), "data length: bad uvarint"},
		"v2 origin seq 0":   {cat(hdr(1, 1), []byte{full, 2, 0, 0, 1, 'r', 1, 'i', 0, 0, 0}), "origin seq 0"},
		"v2 empty region":   {cat(hdr(1, 1), []byte{full, 2, 0, 0, 0, 1, 'i', 1, 0, 0}), "origin region empty"},
		"v2 empty inc":      {cat(hdr(1, 1), []byte{full, 2, 0, 0, 1, 'r', 0, 1, 0, 0}), "origin incarnation empty"},
		"v2 no origin":      {cat(hdr(1, 1), []byte{full, 2, 0, 0, 0x80}), "origin region length: bad uvarint"},
		"v2 full now seq 0": {cat(hdr(1, 1), []byte{fullNow, 2, 0, 0, 1, 'r', 1, 'i', 0, 0}), "origin seq 0"},
		"v2 full now data":  {cat(hdr(1, 1), []byte{fullNow, 2, 0, 0, 1, 'r', 1, 'i', 1, 0x80}), "data length: bad uvarint"},
		// Local origins (compact): decoded with testLocal.
		"v2 both origins":   {cat(hdr(1, 1), []byte{full | local, 2, 0, 0, 1, 0, 0}), "flags 0x03: both full and local origin"},
		"v2 both now":       {cat(hdr(1, 1), []byte{full | localNow, 2, 0, 0, 1, 0}), "flags 0x07: both full and local origin"},
		"v2 now, no origin": {cat(hdr(1, 1), []byte{flagOriginNow, 2, 0, 0, 0}), "flags 0x04: origin time without an origin"},
		"v2 local seq":      {cat(hdr(1, 1), []byte{local, 2, 0, 0, 0x80}), "origin seq: bad uvarint"},
		"v2 local no seq":   {cat(hdr(5, 2), one, []byte{localNow, 2, 0, 0}), "origin seq: bad uvarint (message 2 of 2)"},
		"v2 local time":     {cat(hdr(1, 1), []byte{local, 2, 0, 0, 1, 0x80}), "origin time: bad varint"},
		"v2 local no time":  {cat(hdr(1, 1), []byte{local, 2, 0, 0, 1}), "origin time: bad varint"},
		"v2 local seq 0":    {cat(hdr(1, 1), []byte{local, 2, 0, 0, 0, 0, 0}), "origin seq 0"},
		"v2 local now seq0": {cat(hdr(1, 1), []byte{localNow, 2, 0, 0, 0, 0}), "origin seq 0"},
		"v2 local no data":  {cat(hdr(1, 1), []byte{localNow, 2, 0, 0, 1}), "data length: bad uvarint"},
		"v2 local past":     {cat(hdr(1, 1), []byte{localNow, 2, 0, 0, 1, 3, 'x'}), "data length 3"},
		"v2 local 2nd":      {cat(hdr(5, 2), one, []byte{local, 2, 0, 0, 0x80}), "origin seq: bad uvarint (message 2 of 2)"},
		"v2 local trailing": {cat(hdr(1, 1), []byte{localNow, 2, 0, 0, 1, 0, 1}), "1 bytes after its 1 messages"},
		"v2 trailing":       {cat(hdr(1, 1), one, []byte{0, 0, 0, 0, 0, 0}), "6 bytes after its 1 messages"},
		"v1 short":          {[]byte{1}, "shorter than its 2-byte prefix"},
		"v1 flags":          {append([]byte{1, 0x80}, good1[2:]...), "flags"},
		"v1 origin flag":    {append([]byte{1, flagOrigin}, good1[2:]...), "flags 0x01 not known to version 1"},
		"v1 local flag":     {append([]byte{1, flagLocalOrigin}, good1[2:]...), "flags 0x02 not known to version 1"},
		"v1 seq":            {[]byte{1, 0, 0x80}, "seq"},
		"v1 seq 0":          {[]byte{1, 0, 0, 2, 0, 0}, "seq 0"},
		"v1 time":           {[]byte{1, 0, 1, 0x80}, "time"},
		"v1 subject len":    {[]byte{1, 0, 1, 2, 0x80}, "subject length"},
		"v1 subject past":   {[]byte{1, 0, 1, 2, 5, 'a'}, "subject length 5"},
		"v1 header past":    {[]byte{1, 0, 1, 2, 1, 'a', 9}, "header length 9"},
	}
	for name, c := range cases {
		_, err := DecodeBatch(c.b, testLocal)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want ErrCorrupt naming %q", name, err, c.want)
		}
	}
}

// TestDecodeLocalNeedsLocal: a compact record decodes only with a Local
// (region and incarnation): without one it fails with ErrNoLocalStream
// (and ErrCorrupt), naming the message, never with an empty region; a
// batch without compact records needs none.
func TestDecodeLocalNeedsLocal(t *testing.T) {
	now := time.Unix(1700000000, 0).UTC()
	msgs := []Message{
		{Seq: 4, Subject: "a", Time: now, Origin: Origin{Region: "eu-west", Incarnation: "E", Seq: 7, Time: now.Add(-time.Second)}},
		{Seq: 5, Subject: "b", Time: now, Origin: Origin{Region: testLocal.Region, Incarnation: testLocal.Incarnation, Seq: 1, Time: now}},
	}
	b := EncodeBatch(nil, msgs, testLocal)
	for _, l := range []Local{{}, {Region: testLocal.Region}, {Incarnation: testLocal.Incarnation}} {
		got, err := DecodeBatch(b, l)
		if !errors.Is(err, ErrNoLocalStream) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "message 2 of 2") {
			t.Fatalf("compact record decoded with %+v: %+v, %v", l, got, err)
		}
	}
	// Decoded with another topic's Local: the stored strings' absence
	// cannot be seen, so the right Local is the caller's duty
	// (TopicMeta.Local); the encoding of the others is unchanged.
	if got, err := DecodeBatch(b, testLocal); err != nil || !sameMessage(got[0], msgs[0]) || !sameMessage(got[1], msgs[1]) {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	noCompact := EncodeBatch(nil, msgs, Local{})
	if got, err := DecodeBatch(noCompact, Local{}); err != nil || !sameMessage(got[1], msgs[1]) {
		t.Fatalf("full records without a Local: %+v, %v", got, err)
	}
	if len(noCompact)-len(b) < 2+len(testLocal.Region)+len(testLocal.Incarnation) {
		t.Fatalf("compact entry %d bytes, full %d", len(b), len(noCompact))
	}
}

// fuzzLocal is the Local FuzzDecodeEntry decodes with.
var fuzzLocal = Local{Region: "us-east", Incarnation: "6f1c2b0e-8d9a-4c3b-a1e2-f3d4c5b6a798"}

// FuzzDecodeEntry: decoding (either version) never panics and never
// yields an origin with an empty region or incarnation; whatever decodes
// encodes back to the same bytes in its version, or to fewer (the
// formats have one shortest encoding per message: longer inputs have
// redundant varint bytes, a stored zero origin time difference, or a
// full origin of the Local's stream, which is written compact); without
// a Local it decodes only entries without compact records, to the same
// messages; messages built from the input round-trip through both
// versions, with and without a Local.
func FuzzDecodeEntry(f *testing.F) {
	m := Message{Seq: 1, Subject: "a.b", Header: []byte("NATS/1.0\r\nA: b\r\n\r\n"), Data: []byte("x"), Time: time.Unix(5, 6)}
	f.Add(encodeV1(nil, &m))
	f.Add(EncodeBatch(nil, []Message{m, {Seq: 2, Subject: "c", Time: time.Unix(7, 0)}}, fuzzLocal))
	local := Origin{Region: fuzzLocal.Region, Incarnation: fuzzLocal.Incarnation, Seq: 1, Time: time.Unix(5, 6)}
	batch := []Message{ // a local message, a replicated one, one without origin, a local one with another time
		{Seq: 3, Subject: "a.b", Data: []byte("x"), Time: time.Unix(5, 6), Origin: local},
		{Seq: 4, Subject: "a.c", Header: []byte("NATS/1.0\r\n\r\n"), Time: time.Unix(5, 7), Origin: Origin{Region: "eu-west", Incarnation: "i", Seq: 1 << 33, Time: time.Unix(4, 0)}},
		{Seq: 5, Subject: "a.d", Time: time.Unix(5, 8)},
		{Seq: 6, Subject: "a.e", Data: []byte("y"), Time: time.Unix(5, 9), Origin: Origin{Region: local.Region, Incarnation: local.Incarnation, Seq: 2, Time: time.Unix(5, 0)}},
	}
	f.Add(EncodeBatch(nil, batch, fuzzLocal)) // compact local records
	f.Add(EncodeBatch(nil, batch, Local{}))   // every origin in full
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 'r', 1, 'i', 1, 0, 0})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 6, 0, 0, 0, 1, 0}) // local, origin time = publish time
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 2, 0, 0, 0, 1, 3, 0})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 3, 0, 0, 0, 1, 0, 0})
	f.Add([]byte{1, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 0, 0xff, 0xff, 0xff})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := DecodeBatch(b, fuzzLocal)
		if err == nil {
			if len(msgs) == 0 {
				t.Fatal("decoded no message")
			}
			for i := range msgs {
				if msgs[i].Seq != msgs[0].Seq+uint64(i) {
					t.Fatalf("message %d has seq %d after %d", i, msgs[i].Seq, msgs[0].Seq)
				}
				if o := msgs[i].Origin; o.Seq > 0 && (o.Region == "" || o.Incarnation == "") {
					t.Fatalf("message %d: incomplete origin %+v", i, o)
				}
			}
			var re []byte
			size := 0
			if b[0] == entryV1 {
				re, size = encodeV1(nil, &msgs[0]), v1Size(&msgs[0])
			} else {
				re = EncodeBatch(nil, msgs, fuzzLocal)
				size = batchHeaderSize
				for i := range msgs {
					size += EncodedSize(&msgs[i], fuzzLocal)
				}
			}
			if len(re) != size || size > len(b) || size == len(b) && !bytes.Equal(re, b) {
				t.Fatalf("re-encoding %x gave %x (size %d)", b, re, size)
			}
		}
		// Without a Local: the same messages, or ErrNoLocalStream (a
		// compact record), or the error decoding with fuzzLocal gave.
		plain, perr := DecodeBatch(b, Local{})
		switch {
		case perr == nil && err == nil:
			if len(plain) != len(msgs) {
				t.Fatalf("%d messages without a Local, %d with", len(plain), len(msgs))
			}
			for i := range plain {
				if !sameMessage(plain[i], msgs[i]) {
					t.Fatalf("message %d: %+v without a Local, %+v with", i, plain[i], msgs[i])
				}
			}
		case perr == nil:
			t.Fatalf("decoded without a Local, not with one: %v", err)
		case errors.Is(perr, ErrNoLocalStream):
		case err == nil || perr.Error() != err.Error():
			t.Fatalf("without a Local: %v; with: %v", perr, err)
		}
		// Messages made of the input round-trip, as a batch and in v1
		// (without the origin, which version 1 does not have).
		n := len(b) / 3
		in := []Message{
			{Seq: uint64(len(b))*7919 + 1, Subject: string(b[:n]), Header: b[n : 2*n], Data: b[2*n:], Time: time.Unix(0, int64(len(b))*1e9+int64(n)).UTC()},
			{Seq: uint64(len(b))*7919 + 2, Subject: string(b[2*n:]), Data: b[:n], Time: time.Unix(0, -int64(n)).UTC(),
				Origin: Origin{Region: "r" + string(b[:n]), Incarnation: "i" + string(b[n:2*n]), Seq: uint64(len(b))<<20 + 1, Time: time.Unix(0, int64(n)<<40).UTC()}},
			{Seq: uint64(len(b))*7919 + 3, Subject: "s", Time: time.Unix(0, 0).UTC(), Origin: Origin{Region: "x", Incarnation: "y", Seq: 1, Time: time.Unix(0, -int64(len(b))<<50).UTC()}},
			{Seq: uint64(len(b))*7919 + 4, Subject: "l", Data: b[n:], Time: time.Unix(0, int64(n)).UTC(),
				Origin: Origin{Region: fuzzLocal.Region, Incarnation: fuzzLocal.Incarnation, Seq: uint64(len(b)) + 1, Time: time.Unix(0, int64(n)).UTC()}},
			{Seq: uint64(len(b))*7919 + 5, Subject: "m", Time: time.Unix(0, int64(len(b))).UTC(),
				Origin: Origin{Region: fuzzLocal.Region, Incarnation: fuzzLocal.Incarnation, Seq: uint64(n)<<30 + 1, Time: time.Unix(0, -int64(n)<<45).UTC()}},
		}
		for _, l := range []Local{fuzzLocal, {}, {Region: "r" + string(b[:n]), Incarnation: "i" + string(b[n:2*n])}} {
			got, err := DecodeBatch(EncodeBatch(nil, in, l), l)
			if err != nil || len(got) != len(in) {
				t.Fatalf("round trip of %+v with %+v: %+v, %v", in, l, got, err)
			}
			for i := range in {
				if !sameMessage(got[i], in[i]) || EncodedSize(&in[i], l) != len(appendRecord(nil, &in[i], l)) {
					t.Fatalf("round trip of %+v with %+v: %+v", in[i], l, got[i])
				}
			}
		}
		got, err := DecodeBatch(encodeV1(nil, &in[0]), fuzzLocal)
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
	if _, _, err := restoreCore(&TopicMeta{FirstSeq: 1, Ledgers: tm.Ledgers[:1]}, Limits{}, 1000, testTopic, ""); err != nil {
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
	n := tenancy.Name{Tenant: "acme", Namespace: "prod", Topic: "orders-partition-1"}
	if n.String() != "acme/prod/orders-partition-1" || TopicKey(n) != "topics/acme/prod/orders-partition-1" {
		t.Fatalf("String %q Key %q", n.String(), TopicKey(n))
	}
	if got, ok := ParseTopicKey(TopicKey(n)); !ok || got != n {
		t.Fatalf("ParseTopicKey(%q) = %v, %v", TopicKey(n), got, ok)
	}
	for _, k := range []string{"topics/a/b", "topics/a/b/c/d", "ledgers/a/b/c", "topics/a/b/c.d", "topics//b/c"} {
		if _, ok := ParseTopicKey(k); ok {
			t.Errorf("ParseTopicKey(%q) accepted", k)
		}
	}
	if (tenancy.Name{Tenant: "a", Namespace: "b", Topic: "x:y"}).Validate() == nil {
		t.Error("Validate accepted ':'")
	}
}
