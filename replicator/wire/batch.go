package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/tenancy"
)

// Version is the batch encoding's version byte.
const Version = 1

const (
	kindMsgs byte = 1
	kindGap  byte = 2
)

// MaxDefinition bounds a batch's topic definition, in bytes.
const MaxDefinition = 1 << 20

// AppendBatch appends b's encoding, with the topic definition def, to
// dst and returns it. b is not validated: the sender builds it.
func AppendBatch(dst []byte, b *replicator.Batch, def []byte) []byte {
	dst = append(dst, Version)
	if b.Gap {
		dst = append(dst, kindGap)
	} else {
		dst = append(dst, kindMsgs)
	}
	dst = binary.AppendUvarint(dst, b.ID)
	dst = appendString(dst, b.Stream.Region)
	dst = appendString(dst, b.Stream.Incarnation)
	dst = binary.AppendUvarint(dst, b.First)
	dst = binary.AppendUvarint(dst, b.Last)
	dst = appendString(dst, string(def))
	if b.Gap {
		return dst
	}
	for i := range b.Msgs {
		m := &b.Msgs[i]
		dst = binary.AppendVarint(dst, m.Origin.Time.UnixNano())
		dst = appendString(dst, m.Subject)
		dst = appendBytes(dst, m.Header)
		dst = appendBytes(dst, m.Data)
	}
	return dst
}

// BatchSize is the encoded size of b with a definition of defLen bytes,
// in bytes (for sizing buffers).
func BatchSize(b *replicator.Batch, defLen int) int {
	n := 2 + 5*binary.MaxVarintLen64 + len(b.Stream.Region) + len(b.Stream.Incarnation) + defLen
	for i := range b.Msgs {
		m := &b.Msgs[i]
		n += 4*binary.MaxVarintLen64 + len(m.Subject) + len(m.Header) + len(m.Data)
	}
	return n
}

// DecodeBatch decodes a batch for topic (from its subject). The returned
// batch's messages alias p (copy what outlives it); def is the topic
// definition, also aliasing p. Errors wrap replicator.ErrInvalid and
// name the field: an unknown version or kind, a truncated or overlong
// field, a message count that does not match first..last, trailing
// bytes, and any batch replicator's own checks refuse (origins that do
// not match the stream, a bad range).
func DecodeBatch(topic tenancy.Name, p []byte) (b replicator.Batch, def []byte, err error) {
	d := decoder{p: p}
	if v := d.byte("version"); d.err == nil && v != Version {
		return b, nil, fmt.Errorf("%w: batch version %d (want %d)", replicator.ErrInvalid, v, Version)
	}
	kind := d.byte("kind")
	if d.err == nil && kind != kindMsgs && kind != kindGap {
		return b, nil, fmt.Errorf("%w: batch kind %d (want 1 messages or 2 gap)", replicator.ErrInvalid, kind)
	}
	b.Gap = kind == kindGap
	b.ID = d.uvarint("id")
	b.Stream = replicator.Stream{Topic: topic, Region: string(d.bytes("region")), Incarnation: string(d.bytes("incarnation"))}
	b.First = d.uvarint("first")
	b.Last = d.uvarint("last")
	def = d.bytes("definition")
	if d.err != nil {
		return replicator.Batch{}, nil, d.err
	}
	if b.First == 0 || b.First > b.Last {
		return replicator.Batch{}, nil, fmt.Errorf("%w: batch range %d-%d", replicator.ErrInvalid, b.First, b.Last)
	}
	if !b.Gap {
		n := b.Last - b.First + 1
		// Each message takes at least 4 bytes: a count beyond that is a
		// lie, refused before allocating for it.
		if n > uint64(len(d.p))/4 {
			return replicator.Batch{}, nil, fmt.Errorf("%w: batch of %d messages in %d bytes", replicator.ErrInvalid, n, len(d.p))
		}
		b.Msgs = make([]replicator.Msg, n)
		for i := range b.Msgs {
			m := &b.Msgs[i]
			ts := d.varint("time")
			m.Subject = string(d.bytes("subject"))
			m.Header = d.bytes("header")
			m.Data = d.bytes("data")
			if d.err != nil {
				return replicator.Batch{}, nil, fmt.Errorf("message %d: %w", i, d.err)
			}
			m.Origin = replicator.Origin{Region: b.Stream.Region, Incarnation: b.Stream.Incarnation,
				Seq: b.First + uint64(i), Time: time.Unix(0, ts).UTC()}
			b.Bytes += m.Bytes()
		}
	}
	if len(d.p) != 0 {
		return replicator.Batch{}, nil, fmt.Errorf("%w: %d bytes after the batch", replicator.ErrInvalid, len(d.p))
	}
	if err := replicator.ValidateBatch(&b); err != nil {
		return replicator.Batch{}, nil, err
	}
	return b, def, nil
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// decoder reads fields from p, keeping the first error.
type decoder struct {
	p   []byte
	err error
}

var errShort = errors.New("truncated")

func (d *decoder) fail(field string, err error) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: batch field %s: %v", replicator.ErrInvalid, field, err)
	}
}

func (d *decoder) byte(field string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.p) == 0 {
		d.fail(field, errShort)
		return 0
	}
	c := d.p[0]
	d.p = d.p[1:]
	return c
}

func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.fail(field, errShort)
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) varint(field string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.p)
	if n <= 0 {
		d.fail(field, errShort)
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) bytes(field string) []byte {
	n := d.uvarint(field)
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.p)) {
		d.fail(field, fmt.Errorf("length %d beyond the %d bytes left", n, len(d.p)))
		return nil
	}
	if field == "definition" && n > MaxDefinition {
		d.fail(field, fmt.Errorf("length %d above %d", n, MaxDefinition))
		return nil
	}
	b := d.p[:n:n]
	d.p = d.p[n:]
	return b
}
