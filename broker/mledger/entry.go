package mledger

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Message is one stored message: one ledger entry.
type Message struct {
	// Seq is the topic's sequence (JetStream stream sequence): 1-based,
	// gap-free.
	Seq uint64
	// Subject is the subject it was published on.
	Subject string
	// Header is the raw NATS header block ("NATS/1.0\r\n…\r\n\r\n"), nil
	// when none.
	Header []byte
	// Data is the payload.
	Data []byte
	// Time is the broker's publish time, UTC (never earlier than the
	// previous message's: see Publish).
	Time time.Time
}

// Entry encoding, version 1 (one message per ledger entry):
//
//	version  byte     entryVersion (1)
//	flags    byte     0 for now; see below
//	seq      uvarint
//	time     varint   publish time, Unix nanoseconds
//	subject  uvarint length, then the bytes
//	header   uvarint length, then the bytes (0: no header)
//	[origin fields, when a flag says so: geo-replication, later]
//	data     the rest of the entry
//
// The flags byte is reserved for the origin fields geo-replication will
// add (origin region, incarnation, origin seq, origin time): each will
// get a bit, and its fields will follow the header, before the data.
// Version 1 decoders reject any flag bit they do not know, since they
// could not find where the data starts.
const (
	entryVersion = 1
	// flagsKnown are the flag bits this version understands (none yet).
	flagsKnown byte = 0
)

// EncodedSize is the length of EncodeEntry's output for m.
func EncodedSize(m *Message) int {
	return 2 + uvarintLen(m.Seq) + varintLen(m.Time.UnixNano()) +
		uvarintLen(uint64(len(m.Subject))) + len(m.Subject) +
		uvarintLen(uint64(len(m.Header))) + len(m.Header) + len(m.Data)
}

// EncodeEntry appends m's encoding (see above) to dst and returns it.
func EncodeEntry(dst []byte, m *Message) []byte {
	dst = append(dst, entryVersion, 0)
	dst = binary.AppendUvarint(dst, m.Seq)
	dst = binary.AppendVarint(dst, m.Time.UnixNano())
	dst = binary.AppendUvarint(dst, uint64(len(m.Subject)))
	dst = append(dst, m.Subject...)
	dst = binary.AppendUvarint(dst, uint64(len(m.Header)))
	dst = append(dst, m.Header...)
	return append(dst, m.Data...)
}

// DecodeEntry decodes an entry written by EncodeEntry. Header and Data
// alias b (Header is nil when empty, Data nil when empty). Errors wrap
// ErrCorrupt and name the malformed field; it never panics.
func DecodeEntry(b []byte) (Message, error) {
	var m Message
	if len(b) < 2 {
		return m, fmt.Errorf("%w: entry of %d bytes, shorter than its 2-byte prefix", ErrCorrupt, len(b))
	}
	if b[0] != entryVersion {
		return m, fmt.Errorf("%w: entry version %d, want %d", ErrCorrupt, b[0], entryVersion)
	}
	if f := b[1] &^ flagsKnown; f != 0 {
		return m, fmt.Errorf("%w: entry flags %#02x not known to version %d", ErrCorrupt, f, entryVersion)
	}
	p := b[2:]
	seq, n := binary.Uvarint(p)
	if n <= 0 {
		return m, fmt.Errorf("%w: entry seq: bad uvarint", ErrCorrupt)
	}
	p = p[n:]
	ns, n := binary.Varint(p)
	if n <= 0 {
		return m, fmt.Errorf("%w: entry time: bad varint", ErrCorrupt)
	}
	p = p[n:]
	subj, p, err := lenPrefixed(p, "subject")
	if err != nil {
		return m, err
	}
	hdr, p, err := lenPrefixed(p, "header")
	if err != nil {
		return m, err
	}
	m.Seq = seq
	m.Time = time.Unix(0, ns).UTC()
	m.Subject = string(subj)
	if len(hdr) > 0 {
		m.Header = hdr
	}
	if len(p) > 0 {
		m.Data = p
	}
	return m, nil
}

func lenPrefixed(p []byte, what string) (field, rest []byte, err error) {
	l, n := binary.Uvarint(p)
	if n <= 0 {
		return nil, nil, fmt.Errorf("%w: entry %s length: bad uvarint", ErrCorrupt, what)
	}
	p = p[n:]
	if l > uint64(len(p)) || l > math.MaxInt32 {
		return nil, nil, fmt.Errorf("%w: entry %s length %d, only %d bytes left", ErrCorrupt, what, l, len(p))
	}
	return p[:l:l], p[l:], nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func varintLen(v int64) int {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	return uvarintLen(u)
}
