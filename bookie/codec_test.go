package bookie

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/stratamesh/strata/bookie/bookiepb"
	"github.com/stratamesh/strata/bookie/storage"
)

// FuzzAddRequestDecode checks the codec's hand decoder of AddRequest
// against proto.Unmarshal (unknown fields discarded): the same messages
// are accepted, they decode to equal messages, and each entry's payload
// sits at the tail of its record buffer.
//
//	go test ./bookie -run '^$' -fuzz '^FuzzAddRequestDecode$' -fuzztime 1m
func FuzzAddRequestDecode(f *testing.F) {
	seed := func(m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(&bookiepb.AddRequest{Instance: "i", Entries: []*bookiepb.AddEntry{
		{Tag: 1, LedgerId: 1, EntryId: 5, Lac: 4, MasterKey: key, Payload: []byte("x")},
		{Tag: 2, LedgerId: 1, EntryId: 6, Lac: -1, MasterKey: key, Recovery: true},
		{Tag: 3, LedgerId: -2, EntryId: 0, Lac: -1, MasterKey: []byte("other"), Payload: make([]byte, 65)},
		{},
	}})
	seed(&bookiepb.AddRequest{})
	seed(&bookiepb.ReadRequest{Instance: "i", LedgerId: 1, FirstEntryId: 3, Fence: true, MasterKey: key})
	// Unknown fields, a field of a known number with another wire type,
	// a repeated scalar (last wins), a group.
	b := protowire.AppendTag(nil, 2, protowire.BytesType)
	b = protowire.AppendString(b, "inst")
	b = protowire.AppendTag(b, 9, protowire.VarintType)
	b = protowire.AppendVarint(b, 7)
	var e []byte
	e = protowire.AppendTag(e, 2, protowire.VarintType)
	e = protowire.AppendVarint(e, 3)
	e = protowire.AppendTag(e, 2, protowire.VarintType)
	e = protowire.AppendVarint(e, 4)
	e = protowire.AppendTag(e, 6, protowire.VarintType)
	e = protowire.AppendVarint(e, 4)
	e = protowire.AppendTag(e, 6, protowire.BytesType)
	e = protowire.AppendBytes(e, []byte("first"))
	e = protowire.AppendTag(e, 6, protowire.BytesType)
	e = protowire.AppendBytes(e, []byte("second"))
	e = protowire.AppendTag(e, 20, protowire.StartGroupType)
	e = protowire.AppendTag(e, 20, protowire.EndGroupType)
	b = protowire.AppendTag(b, 9, protowire.BytesType)
	b = protowire.AppendBytes(b, e)
	f.Add(b)
	f.Add([]byte{0x12, 0x02, 0xff, 0xfe}) // instance not UTF-8

	f.Fuzz(func(t *testing.T, data []byte) {
		var want bookiepb.AddRequest
		errP := proto.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(data, &want)
		var got addRequestIn
		errF := got.decode(data)
		if errP == nil && len(want.Entries) > maxDecodedEntries {
			if errF == nil {
				t.Fatalf("decoded a request of %d entries (at most %d)", len(want.Entries), maxDecodedEntries)
			}
			return
		}
		if (errP == nil) != (errF == nil) {
			t.Fatalf("proto.Unmarshal: %v; decode: %v", errP, errF)
		}
		if errP != nil {
			return
		}
		if !proto.Equal(&want, &got.AddRequest) {
			t.Fatalf("decoded %v, proto.Unmarshal %v", &got.AddRequest, &want)
		}
		if len(got.recs) != len(got.Entries) {
			t.Fatalf("%d records for %d entries", len(got.recs), len(got.Entries))
		}
		for i, e := range got.Entries {
			rec := got.recs[i]
			if e.Payload == nil {
				if rec != nil {
					t.Fatalf("entry %d: record without a payload", i)
				}
				continue
			}
			if len(rec) != storage.EntryHeaderSize+len(e.Payload) || !bytes.Equal(rec[storage.EntryHeaderSize:], e.Payload) {
				t.Fatalf("entry %d: record of %d bytes for a payload of %d", i, len(rec), len(e.Payload))
			}
			if len(e.Payload) > 0 && &rec[storage.EntryHeaderSize] != &e.Payload[0] {
				t.Fatalf("entry %d: payload is not the record's tail", i)
			}
		}
	})
}

// TestCodecRoundTrip: messages the codec marshals (small ones and ones
// large enough for pooled buffers) unmarshal to equal messages, with the
// codec and with proto.Unmarshal, and AddRequests into addRequestIn too.
func TestCodecRoundTrip(t *testing.T) {
	c := codec{}
	for _, n := range []int{1, 100, maxDecodedEntries} {
		req := &bookiepb.AddRequest{Instance: "inst"}
		for i := range n {
			req.Entries = append(req.Entries, &bookiepb.AddEntry{Tag: uint64(i), LedgerId: 7, EntryId: int64(i),
				Lac: int64(i) - 1, MasterKey: key, Payload: bytes.Repeat([]byte{byte(i)}, 1+i%300)})
		}
		data, err := c.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		flat := data.Materialize()
		var viaProto bookiepb.AddRequest
		if err := proto.Unmarshal(flat, &viaProto); err != nil || !proto.Equal(req, &viaProto) {
			t.Fatalf("%d entries: proto.Unmarshal: %v, equal %v", n, err, proto.Equal(req, &viaProto))
		}
		var in addRequestIn
		if err := c.Unmarshal(data, &in); err != nil || !proto.Equal(req, &in.AddRequest) {
			t.Fatalf("%d entries: decode: %v, equal %v", n, err, proto.Equal(req, &in.AddRequest))
		}
		var plain bookiepb.AddRequest
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(flat)}, &plain); err != nil || !proto.Equal(req, &plain) {
			t.Fatalf("%d entries: Unmarshal: %v", n, err)
		}
		data.Free()
	}
	if _, err := c.Marshal(42); err == nil {
		t.Fatal("marshalled an int")
	}
}

// TestDecodeRefusesTooManyEntries: a request of more than
// maxDecodedEntries entries is refused before anything is allocated for
// them (a request of empty entries, 2 bytes each on the wire, cost ~170×
// its size in memory); up to the bound it decodes (each entry past
// MaxAddBatch then gets CODE_INVALID).
func TestDecodeRefusesTooManyEntries(t *testing.T) {
	msg := protowire.AppendTag(nil, fieldAddInstance, protowire.BytesType)
	msg = protowire.AppendString(msg, "inst")
	for len(msg) < 1<<20 {
		msg = append(msg, 0x4a, 0x00) // entries (9), length 0
	}
	var in addRequestIn
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := in.decode(msg)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "entries (at most 1024 per request)") {
		t.Fatalf("decode of ~512Ki entries: %v", err)
	}
	// Decoding them all took ~80 MiB; refusing takes a few hundred bytes
	// (the bound leaves room for anything else the runtime allocates).
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("refusing a %d-byte request allocated %d bytes", len(msg), n)
	}
	ok := protowire.AppendTag(nil, fieldAddInstance, protowire.BytesType)
	ok = protowire.AppendString(ok, "inst")
	for range maxDecodedEntries {
		ok = append(ok, 0x4a, 0x00)
	}
	if err := in.decode(ok); err != nil || len(in.Entries) != maxDecodedEntries {
		t.Fatalf("decode of %d entries: %d, %v", maxDecodedEntries, len(in.Entries), err)
	}
}

// TestBufferPool: buffers have the length asked for and a power-of-two
// capacity, and come back from Put.
func TestBufferPool(t *testing.T) {
	p := &pooledBuffers{}
	for _, n := range []int{0, 1, 255, 256, 257, 128 << 10, 1 << 23, 1<<23 + 1} {
		b := p.Get(n)
		if len(*b) != n || cap(*b) < n {
			t.Fatalf("Get(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		if c := cap(*b); n <= 1<<maxPoolShift && c&(c-1) != 0 {
			t.Fatalf("Get(%d): cap %d is not a power of two", n, c)
		}
		p.Put(b)
	}
	small := make([]byte, 10)
	p.Put(&small) // not from Get: dropped
	if b := p.Get(10); cap(*b) != 1<<minPoolShift {
		t.Fatalf("Get(10) after a foreign Put: cap %d", cap(*b))
	}
}
