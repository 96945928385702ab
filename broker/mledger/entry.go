package mledger

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/stratamesh/strata/replicator"
)

// Origin is a message's origin identity (ARCHITECTURE §4), as the
// replicator core defines it: origin region, topic incarnation, origin
// sequence and origin publish time.
type Origin = replicator.Origin

// Message is one stored message (one of the messages of a ledger entry).
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
	// Origin is where the message was first published: for a local
	// publish this region (Config.Region), the topic's incarnation, the
	// next local origin sequence and Time; for a replicated one, the
	// origin it was published with (PublishOptions.Origin). The zero
	// Origin (Seq 0) when none was recorded: messages written before
	// origins were, or by an ML without Config.Region.
	Origin Origin
}

// HasOrigin reports whether m carries an origin (Origin.Seq > 0).
func (m *Message) HasOrigin() bool { return m.Origin.Seq > 0 }

// Entry encoding, version 2 (a batch of messages per ledger entry):
//
//	version  byte      entryV2 (2)
//	first    8 bytes   big-endian: the sequence of the first message
//	count    4 bytes   big-endian: n ≥ 1 messages, sequences first..first+n-1
//	n records, one per message, in sequence order:
//	  flags    byte    bit 0 (flagOrigin): the origin fields follow the header
//	  time     varint  publish time, Unix nanoseconds
//	  subject  uvarint length, then the bytes
//	  header   uvarint length, then the bytes (0: no header)
//	  origin fields, only with flagOrigin:
//	    region       uvarint length, then the bytes (not empty)
//	    incarnation  uvarint length, then the bytes (not empty)
//	    seq          uvarint  origin sequence (≥ 1)
//	    time         varint   origin time minus the record's publish time,
//	                          in nanoseconds (0 for a local publish)
//	  data     uvarint length, then the bytes
//
// The entry header has a fixed size (batchHeaderSize) so that a ledger's
// message bytes follow from its length and entry count alone (msgBytes):
// a recovered ledger's totals are exact without reading it. A record's
// size does not depend on the batch it is in (times are absolute), so a
// message's size (EncodedSize, what Bytes and MaxBytes count) is known
// when it is published.
//
// The flags byte says which optional fields a record has. Bit 0
// (flagOrigin) is the message's origin (Message.Origin: ARCHITECTURE §4):
// set exactly when the message has one (Origin.Seq > 0); records written
// before origins were recorded have flags 0 and decode with the zero
// Origin. The origin time is stored relative to the publish time, so a
// local message's costs one byte; the arithmetic wraps, so any pair of
// times round-trips. Other bits are reserved for later fields, which will
// also go between the header and the data. Decoders reject any flag bit
// they do not know, since they could not find where the record ends, and
// an origin with an empty region or incarnation or sequence 0.
//
// Version 1, written before batching, held exactly one message per entry
// and is still decoded (DecodeBatch returns its one message):
//
//	version  byte     entryV1 (1)
//	flags    byte     0 (no flag is defined for version 1)
//	seq      uvarint
//	time     varint   publish time, Unix nanoseconds
//	subject  uvarint length, then the bytes
//	header   uvarint length, then the bytes (0: no header)
//	data     the rest of the entry
const (
	entryV1 = 1
	entryV2 = 2
	// batchHeaderSize is the size of a version 2 entry's header.
	batchHeaderSize = 1 + 8 + 4
	// flagOrigin: the record has origin fields.
	flagOrigin byte = 1 << 0
	// flagsKnown are the record flag bits version 2 understands.
	flagsKnown = flagOrigin
	// minRecordSize is the smallest encoded record (flags, time and three
	// zero lengths): it bounds the count a well-formed entry can claim.
	minRecordSize = 5
	// maxBatchCount is the largest count an entry may have.
	maxBatchCount = math.MaxUint32
)

// EncodedSize is the size of m's record in an entry: what m counts for
// State.Bytes, MaxBytes and the rollover by bytes. The entry holding it
// adds batchHeaderSize bytes, shared by its messages.
func EncodedSize(m *Message) int {
	return 1 + varintLen(m.Time.UnixNano()) +
		uvarintLen(uint64(len(m.Subject))) + len(m.Subject) +
		uvarintLen(uint64(len(m.Header))) + len(m.Header) +
		originSize(m) +
		uvarintLen(uint64(len(m.Data))) + len(m.Data)
}

// originSize is the size of m's origin fields (0 without an origin).
func originSize(m *Message) int {
	o := &m.Origin
	if o.Seq == 0 {
		return 0
	}
	return uvarintLen(uint64(len(o.Region))) + len(o.Region) +
		uvarintLen(uint64(len(o.Incarnation))) + len(o.Incarnation) +
		uvarintLen(o.Seq) + varintLen(originDelta(m))
}

// originDelta is m's origin time minus its publish time, in nanoseconds
// (wrapping).
func originDelta(m *Message) int64 { return m.Origin.Time.UnixNano() - m.Time.UnixNano() }

// appendRecord appends m's record (without its sequence, which the
// entry header implies) to dst.
func appendRecord(dst []byte, m *Message) []byte {
	var flags byte
	if m.Origin.Seq > 0 {
		flags |= flagOrigin
	}
	dst = append(dst, flags)
	dst = binary.AppendVarint(dst, m.Time.UnixNano())
	dst = binary.AppendUvarint(dst, uint64(len(m.Subject)))
	dst = append(dst, m.Subject...)
	dst = binary.AppendUvarint(dst, uint64(len(m.Header)))
	dst = append(dst, m.Header...)
	if flags&flagOrigin != 0 {
		o := &m.Origin
		dst = binary.AppendUvarint(dst, uint64(len(o.Region)))
		dst = append(dst, o.Region...)
		dst = binary.AppendUvarint(dst, uint64(len(o.Incarnation)))
		dst = append(dst, o.Incarnation...)
		dst = binary.AppendUvarint(dst, o.Seq)
		dst = binary.AppendVarint(dst, originDelta(m))
	}
	dst = binary.AppendUvarint(dst, uint64(len(m.Data)))
	return append(dst, m.Data...)
}

// appendBatchHeader appends a version 2 entry header for n messages from
// sequence first.
func appendBatchHeader(dst []byte, first uint64, n int) []byte {
	dst = append(dst, entryV2)
	dst = binary.BigEndian.AppendUint64(dst, first)
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

// EncodeBatch appends the version 2 entry holding msgs to dst and
// returns it. msgs must not be empty and hold consecutive sequences
// (msgs[i].Seq = msgs[0].Seq+i): only msgs[0].Seq is stored.
func EncodeBatch(dst []byte, msgs []Message) []byte {
	dst = appendBatchHeader(dst, msgs[0].Seq, len(msgs))
	for i := range msgs {
		dst = appendRecord(dst, &msgs[i])
	}
	return dst
}

// batchSize is the length of EncodeBatch's output for messages whose
// EncodedSizes sum to recordBytes.
func batchSize(recordBytes int) int { return batchHeaderSize + recordBytes }

// msgBytes is the message bytes (the sum of EncodedSize) of a ledger of
// version 2 entries, from its length (payload bytes) and entry count.
func msgBytes(length, entries int64) int64 { return length - entries*batchHeaderSize }

// DecodeBatch decodes an entry written by EncodeBatch (version 2) or by
// the single-message encoder before it (version 1) and returns its
// messages, in sequence order (at least one). Subjects are copied;
// Header and Data alias b (Header is nil when empty, Data nil when
// empty). Errors wrap ErrCorrupt and name the malformed field (and the
// message, for version 2); it never panics.
func DecodeBatch(b []byte) ([]Message, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty entry", ErrCorrupt)
	}
	switch b[0] {
	case entryV1:
		m, err := decodeV1(b)
		if err != nil {
			return nil, err
		}
		return []Message{m}, nil
	case entryV2:
		return decodeV2(b)
	default:
		return nil, fmt.Errorf("%w: entry version %d, want %d or %d", ErrCorrupt, b[0], entryV1, entryV2)
	}
}

func decodeV2(b []byte) ([]Message, error) {
	if len(b) < batchHeaderSize {
		return nil, fmt.Errorf("%w: entry of %d bytes, shorter than its %d-byte header", ErrCorrupt, len(b), batchHeaderSize)
	}
	first := binary.BigEndian.Uint64(b[1:9])
	n := uint64(binary.BigEndian.Uint32(b[9:13]))
	p := b[batchHeaderSize:]
	switch {
	case n == 0:
		return nil, fmt.Errorf("%w: entry count 0", ErrCorrupt)
	case n > uint64(len(p)/minRecordSize):
		return nil, fmt.Errorf("%w: entry count %d in %d bytes of records", ErrCorrupt, n, len(p))
	case first == 0 || first+(n-1) < first:
		return nil, fmt.Errorf("%w: entry sequences %d+%d out of range", ErrCorrupt, first, n)
	}
	msgs := make([]Message, n)
	var prev *Origin // the last origin decoded: its strings are reused
	for i := range msgs {
		m := &msgs[i]
		var err error
		if p, err = decodeRecord(p, m, prev); err != nil {
			return nil, fmt.Errorf("%w (message %d of %d)", err, i+1, n)
		}
		m.Seq = first + uint64(i)
		if m.HasOrigin() {
			prev = &m.Origin
		}
	}
	if len(p) > 0 {
		return nil, fmt.Errorf("%w: entry has %d bytes after its %d messages", ErrCorrupt, len(p), n)
	}
	return msgs, nil
}

// decodeRecord decodes one version 2 record from p into m (all but Seq)
// and returns the rest of p. prev, if not nil, is an origin decoded
// before, whose strings m's origin shares when equal.
func decodeRecord(p []byte, m *Message, prev *Origin) ([]byte, error) {
	if len(p) == 0 {
		return nil, fmt.Errorf("%w: entry record flags: no bytes left", ErrCorrupt)
	}
	flags := p[0]
	if f := flags &^ flagsKnown; f != 0 {
		return nil, fmt.Errorf("%w: entry record flags %#02x not known to version %d", ErrCorrupt, f, entryV2)
	}
	p = p[1:]
	ns, n := binary.Varint(p)
	if n <= 0 {
		return nil, fmt.Errorf("%w: entry record time: bad varint", ErrCorrupt)
	}
	p = p[n:]
	subj, p, err := lenPrefixed(p, "subject")
	if err != nil {
		return nil, err
	}
	hdr, p, err := lenPrefixed(p, "header")
	if err != nil {
		return nil, err
	}
	m.Origin = Origin{}
	if flags&flagOrigin != 0 {
		if p, err = decodeOrigin(p, ns, &m.Origin, prev); err != nil {
			return nil, err
		}
	}
	data, p, err := lenPrefixed(p, "data")
	if err != nil {
		return nil, err
	}
	m.Time = time.Unix(0, ns).UTC()
	m.Subject = string(subj)
	if len(hdr) > 0 {
		m.Header = hdr
	}
	if len(data) > 0 {
		m.Data = data
	}
	return p, nil
}

// decodeOrigin decodes a record's origin fields from p into o (ns: the
// record's publish time) and returns the rest of p. The region and
// incarnation are prev's strings when equal (a batch's messages mostly
// share them).
func decodeOrigin(p []byte, ns int64, o *Origin, prev *Origin) ([]byte, error) {
	region, p, err := lenPrefixed(p, "origin region")
	if err != nil {
		return nil, err
	}
	inc, p, err := lenPrefixed(p, "origin incarnation")
	if err != nil {
		return nil, err
	}
	seq, n := binary.Uvarint(p)
	if n <= 0 {
		return nil, fmt.Errorf("%w: entry origin seq: bad uvarint", ErrCorrupt)
	}
	p = p[n:]
	d, n := binary.Varint(p)
	if n <= 0 {
		return nil, fmt.Errorf("%w: entry origin time: bad varint", ErrCorrupt)
	}
	p = p[n:]
	switch {
	case len(region) == 0:
		return nil, fmt.Errorf("%w: entry origin region empty", ErrCorrupt)
	case len(inc) == 0:
		return nil, fmt.Errorf("%w: entry origin incarnation empty", ErrCorrupt)
	case seq == 0:
		return nil, fmt.Errorf("%w: entry origin seq 0", ErrCorrupt)
	}
	*o = Origin{Seq: seq, Time: time.Unix(0, ns+d).UTC()}
	if prev != nil && string(region) == prev.Region {
		o.Region = prev.Region
	} else {
		o.Region = string(region)
	}
	if prev != nil && string(inc) == prev.Incarnation {
		o.Incarnation = prev.Incarnation
	} else {
		o.Incarnation = string(inc)
	}
	return p, nil
}

// decodeV1 decodes a version 1 (single-message) entry.
func decodeV1(b []byte) (Message, error) {
	var m Message
	if len(b) < 2 {
		return m, fmt.Errorf("%w: version 1 entry of %d bytes, shorter than its 2-byte prefix", ErrCorrupt, len(b))
	}
	if f := b[1]; f != 0 {
		return m, fmt.Errorf("%w: entry flags %#02x not known to version %d", ErrCorrupt, f, entryV1)
	}
	p := b[2:]
	seq, n := binary.Uvarint(p)
	if n <= 0 {
		return m, fmt.Errorf("%w: entry seq: bad uvarint", ErrCorrupt)
	}
	if seq == 0 {
		return m, fmt.Errorf("%w: entry seq 0", ErrCorrupt)
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
