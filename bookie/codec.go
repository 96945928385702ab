package bookie

import (
	"bytes"
	"fmt"
	"math/bits"
	"sync"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	"github.com/stratamesh/strata/bookie/bookiepb"
	"github.com/stratamesh/strata/bookie/storage"
)

// codec is the gRPC codec of bookie.v1, on the server (ServerOptions) and
// the Client: protobuf, as gRPC's own codec, with two differences that
// matter on the Add path.
//
//   - Message buffers come from bufPool, which does not clear them. gRPC's
//     default pool clears every buffer it hands out, and rounds a 128 KiB
//     message up to a 1 MiB buffer: clearing that cost the bookie ~5% of
//     its CPU at 1 KiB entries. Every user of these buffers overwrites
//     the length it asked for (a message is marshalled or read into it).
//   - An addRequestIn (what the server's Add stream receives into) is
//     decoded by hand, each payload straight into a buffer with room for
//     the stored entry's header, which the engine then keeps
//     (storage.AddRequest.Record): one copy of each payload between the
//     socket and the journal instead of two, and no per-entry message
//     allocations.
type codec struct{}

// codecName is the content-subtype: the codec speaks standard protobuf,
// so peers using gRPC's own codec interoperate.
const codecName = "proto"

func (codec) Name() string { return codecName }

// Marshal implements encoding.CodecV2 as gRPC's proto codec does, with
// bufPool.
func (codec) Marshal(v any) (mem.BufferSlice, error) {
	m := messageOf(v)
	if m == nil {
		return nil, fmt.Errorf("bookie codec: cannot marshal %T", v)
	}
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := bufPool.Get(size)
	if _, err := opts.MarshalAppend((*buf)[:0], m); err != nil {
		bufPool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, bufPool)}, nil
}

// Unmarshal implements encoding.CodecV2.
func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	buf := data.MaterializeToBuffer(bufPool)
	defer buf.Free()
	if in, ok := v.(*addRequestIn); ok {
		return in.decode(buf.ReadOnlyData())
	}
	m := messageOf(v)
	if m == nil {
		return fmt.Errorf("bookie codec: cannot unmarshal into %T", v)
	}
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

func messageOf(v any) proto.Message {
	switch v := v.(type) {
	case protoadapt.MessageV2:
		return v
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(v)
	}
	return nil
}

var (
	_ encoding.CodecV2 = codec{}

	serverCodec = grpc.ForceServerCodecV2(codec{})
	clientCodec = grpc.ForceCodecV2(codec{})
)

// pooledBuffers is a mem.BufferPool of buffers whose capacities are
// powers of two from 2^minPoolShift to 2^maxPoolShift bytes (one sync.Pool
// each), handed out without being cleared. Larger requests are allocated
// and dropped.
type pooledBuffers struct {
	pools [maxPoolShift - minPoolShift + 1]sync.Pool
}

const (
	minPoolShift = 8
	maxPoolShift = 23 // MaxMessageSize
)

var bufPool mem.BufferPool = &pooledBuffers{}

// Get returns a buffer of length n (its contents are arbitrary).
func (p *pooledBuffers) Get(n int) *[]byte {
	shift := max(minPoolShift, bits.Len(uint(max(n, 1)-1)))
	if shift > maxPoolShift {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.pools[shift-minPoolShift].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<shift)
	return &b
}

// Put returns a buffer from Get to its pool.
func (p *pooledBuffers) Put(b *[]byte) {
	c := cap(*b)
	shift := bits.Len(uint(c)) - 1
	if c == 0 || c != 1<<shift || shift < minPoolShift || shift > maxPoolShift {
		return
	}
	p.pools[shift-minPoolShift].Put(b)
}

// addRequestIn is an AddRequest as the server's Add stream receives it.
// The codec decodes it by hand: AddRequest holds the message, and recs[i]
// is entries[i]'s storage record buffer, whose tail is that entry's
// Payload (storage.AddRequest.Record). Decoded by another codec (gRPC's
// own, on a server built without ServerOptions), only AddRequest is set
// and recs is nil.
type addRequestIn struct {
	bookiepb.AddRequest
	recs [][]byte
}

// Field numbers of AddRequest and AddEntry (bookie.proto).
const (
	fieldAddInstance = 2
	fieldAddEntries  = 9

	fieldEntryTag       = 1
	fieldEntryLedger    = 2
	fieldEntryID        = 3
	fieldEntryLAC       = 4
	fieldEntryMasterKey = 5
	fieldEntryPayload   = 6
	fieldEntryRecovery  = 7
)

// decode decodes an AddRequest from b as proto.Unmarshal would, except
// that unknown fields are dropped and a request of more than
// maxDecodedEntries entries is an error, and places each entry's payload
// in a record buffer (recs). b is not retained. Entries of a request that
// carry the same master key share one copy of it.
func (in *addRequestIn) decode(b []byte) error {
	in.AddRequest = bookiepb.AddRequest{}
	in.recs = nil
	n, err := countEntries(b)
	if err != nil {
		return err
	}
	if n > maxDecodedEntries {
		return fmt.Errorf("bookie codec: AddRequest has %d entries (at most %d per request)", n, MaxAddBatch)
	}
	var entries []bookiepb.AddEntry
	if n > 0 {
		entries = make([]bookiepb.AddEntry, n)
		in.Entries = make([]*bookiepb.AddEntry, n)
		in.recs = make([][]byte, n)
	}
	var lastKey []byte
	i := 0
	for len(b) > 0 {
		num, typ, k := consumeTag(b)
		if k < 0 {
			return protowire.ParseError(k)
		}
		b = b[k:]
		switch {
		case num == fieldAddInstance && typ == protowire.BytesType:
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return protowire.ParseError(k)
			}
			if !utf8.Valid(v) {
				return fmt.Errorf("bookie codec: AddRequest.instance is not valid UTF-8")
			}
			in.Instance = string(v)
			b = b[k:]
		case num == fieldAddEntries && typ == protowire.BytesType:
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return protowire.ParseError(k)
			}
			e := &entries[i]
			rec, err := decodeEntry(v, e, &lastKey)
			if err != nil {
				return err
			}
			in.Entries[i], in.recs[i] = e, rec
			i++
			b = b[k:]
		default:
			k := protowire.ConsumeFieldValue(num, typ, b)
			if k < 0 {
				return protowire.ParseError(k)
			}
			b = b[k:]
		}
	}
	return nil
}

// consumeTag is protowire.ConsumeTag, also refusing field numbers above
// protowire.MaxValidNumber (as proto.Unmarshal does).
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, k := protowire.ConsumeTag(b)
	if k >= 0 && num > protowire.MaxValidNumber {
		return 0, 0, -1
	}
	return num, typ, k
}

// countEntries returns the number of entries fields in an encoded
// AddRequest, checking its framing.
func countEntries(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		num, typ, k := consumeTag(b)
		if k < 0 {
			return 0, protowire.ParseError(k)
		}
		b = b[k:]
		k = protowire.ConsumeFieldValue(num, typ, b)
		if k < 0 {
			return 0, protowire.ParseError(k)
		}
		if num == fieldAddEntries && typ == protowire.BytesType {
			n++
		}
		b = b[k:]
	}
	return n, nil
}

// decodeEntry decodes an AddEntry from b into e, its payload into a new
// record buffer it returns (nil without a payload field). *lastKey is the
// master key of the request's previous entry, reused when equal.
func decodeEntry(b []byte, e *bookiepb.AddEntry, lastKey *[]byte) ([]byte, error) {
	var rec []byte
	for len(b) > 0 {
		num, typ, k := consumeTag(b)
		if k < 0 {
			return nil, protowire.ParseError(k)
		}
		b = b[k:]
		var v uint64
		var raw []byte
		switch typ {
		case protowire.VarintType:
			v, k = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			raw, k = protowire.ConsumeBytes(b)
		default:
			k = protowire.ConsumeFieldValue(num, typ, b)
		}
		if k < 0 {
			return nil, protowire.ParseError(k)
		}
		b = b[k:]
		switch {
		case typ == protowire.VarintType && num == fieldEntryTag:
			e.Tag = v
		case typ == protowire.VarintType && num == fieldEntryLedger:
			e.LedgerId = int64(v)
		case typ == protowire.VarintType && num == fieldEntryID:
			e.EntryId = int64(v)
		case typ == protowire.VarintType && num == fieldEntryLAC:
			e.Lac = int64(v)
		case typ == protowire.VarintType && num == fieldEntryRecovery:
			e.Recovery = v != 0
		case typ == protowire.BytesType && num == fieldEntryMasterKey:
			if *lastKey == nil || !bytes.Equal(*lastKey, raw) {
				*lastKey = append([]byte{}, raw...)
			}
			e.MasterKey = *lastKey
		case typ == protowire.BytesType && num == fieldEntryPayload:
			rec = storage.NewRecord(len(raw))
			copy(rec[storage.EntryHeaderSize:], raw)
			e.Payload = rec[storage.EntryHeaderSize:]
		}
	}
	return rec, nil
}
