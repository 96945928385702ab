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
	// origins were, or by an ML without Config.Region. Always complete
	// when decoded: a compact record's region and incarnation come from
	// its topic's Local.
	Origin Origin
}

// Local is the origin stream that a topic's compact records stand for:
// the region and incarnation of its TopicMeta (TopicMeta.Local; see
// TopicMeta.Region for why not Config.Region). A record whose origin has
// exactly this region and incarnation (every local publish, normally) is
// written with flagLocalOrigin, without the two strings, and decodes
// with them. The zero Local, or one with an empty field, stands for no
// stream: nothing is written compact, and a compact record fails to
// decode with ErrNoLocalStream (never with an empty region). Whoever
// decodes a topic's entries must pass its Local: EncodedSize,
// EncodeBatch and DecodeBatch take it.
type Local struct {
	Region      string
	Incarnation string
}

// valid reports whether l names a stream.
func (l Local) valid() bool { return l.Region != "" && l.Incarnation != "" }

// has reports whether o is an origin of l's stream (written compact).
func (l Local) has(o *Origin) bool {
	return o.Seq > 0 && l.valid() && o.Region == l.Region && o.Incarnation == l.Incarnation
}

// HasOrigin reports whether m carries an origin (Origin.Seq > 0).
func (m *Message) HasOrigin() bool { return m.Origin.Seq > 0 }

// Entry encoding, version 2 (a batch of messages per ledger entry):
//
//	version  byte      entryV2 (2)
//	first    8 bytes   big-endian: the sequence of the first message
//	count    4 bytes   big-endian: n ≥ 1 messages, sequences first..first+n-1
//	n records, one per message, in sequence order:
//	  flags    byte    bit 0 (flagOrigin): full origin fields follow the header
//	                   bit 1 (flagLocalOrigin): local origin fields follow it
//	                   bit 2 (flagOriginNow): origin time = publish time
//	  time     varint  publish time, Unix nanoseconds
//	  subject  uvarint length, then the bytes
//	  header   uvarint length, then the bytes (0: no header)
//	  origin fields, only with flagOrigin or flagLocalOrigin:
//	    region       uvarint length, then the bytes (not empty); flagOrigin only
//	    incarnation  uvarint length, then the bytes (not empty); flagOrigin only
//	    seq          uvarint  origin sequence (≥ 1)
//	    time         varint   origin time minus the record's publish time,
//	                          in nanoseconds; absent with flagOriginNow
//	  data     uvarint length, then the bytes
//
// The entry header has a fixed size (batchHeaderSize) so that a ledger's
// message bytes follow from its length and entry count alone (msgBytes):
// a recovered ledger's totals are exact without reading it. A record's
// size does not depend on the batch it is in (times are absolute), so a
// message's size (EncodedSize, what Bytes and MaxBytes count) is known
// when it is published.
//
// The flags byte says which optional fields a record has; they carry the
// message's origin (Message.Origin: ARCHITECTURE §4), present exactly
// when it has one (Origin.Seq > 0). Records written before origins were
// recorded have flags 0 and decode with the zero Origin.
//
//   - flagOrigin: the full origin, region and incarnation included: a
//     replicated message's (and every origin written before
//     flagLocalOrigin was).
//   - flagLocalOrigin: an origin of the topic's Local stream (its
//     TopicMeta's Region and Incarnation): only the sequence (and time)
//     are stored, about 50 bytes less than flagOrigin with a UUID
//     incarnation, and the decoder fills in Local's region and
//     incarnation. Every local publish is written so, unless Config.Region
//     differs from TopicMeta.Region (a renamed region: see there).
//   - flagOriginNow, with either: the origin time equals the publish time
//     (every local publish's) and is not stored. Without it the time is
//     stored relative to the publish time; the arithmetic wraps, so any
//     pair of times round-trips. Records written before the flag store a
//     zero difference, which still decodes.
//
// Other bits are reserved for later fields, which will also go between
// the header and the data. Decoders reject any flag bit they do not know,
// since they could not find where the record ends; flagOrigin and
// flagLocalOrigin together, or flagOriginNow without either; an origin
// with an empty region or incarnation or sequence 0; and a
// flagLocalOrigin record when given no Local (ErrNoLocalStream).
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
	// flagOrigin: the record has full origin fields.
	flagOrigin byte = 1 << 0
	// flagLocalOrigin: the record has local origin fields (no region or
	// incarnation: its topic's Local).
	flagLocalOrigin byte = 1 << 1
	// flagOriginNow: the origin time is the publish time (not stored).
	flagOriginNow byte = 1 << 2
	// flagsKnown are the record flag bits version 2 understands.
	flagsKnown = flagOrigin | flagLocalOrigin | flagOriginNow
	// minRecordSize is the smallest encoded record (flags, time and three
	// zero lengths): it bounds the count a well-formed entry can claim.
	minRecordSize = 5
	// maxBatchCount is the largest count an entry may have.
	maxBatchCount = math.MaxUint32
)

// EncodedSize is the size of m's record in an entry of a topic whose
// Local is l: what m counts for State.Bytes, MaxBytes and the rollover by
// bytes. The entry holding it adds batchHeaderSize bytes, shared by its
// messages.
func EncodedSize(m *Message, l Local) int {
	return 1 + varintLen(m.Time.UnixNano()) +
		uvarintLen(uint64(len(m.Subject))) + len(m.Subject) +
		uvarintLen(uint64(len(m.Header))) + len(m.Header) +
		originSize(m, recordFlags(m, l)) +
		uvarintLen(uint64(len(m.Data))) + len(m.Data)
}

// recordFlags is the flags byte of m's record in a topic whose Local is l.
func recordFlags(m *Message, l Local) byte {
	if m.Origin.Seq == 0 {
		return 0
	}
	flags := flagOrigin
	if l.has(&m.Origin) {
		flags = flagLocalOrigin
	}
	if originDelta(m) == 0 {
		flags |= flagOriginNow
	}
	return flags
}

// originSize is the size of m's origin fields in a record with flags (0
// without an origin).
func originSize(m *Message, flags byte) int {
	o := &m.Origin
	if flags&(flagOrigin|flagLocalOrigin) == 0 {
		return 0
	}
	n := uvarintLen(o.Seq)
	if flags&flagOrigin != 0 {
		n += uvarintLen(uint64(len(o.Region))) + len(o.Region) +
			uvarintLen(uint64(len(o.Incarnation))) + len(o.Incarnation)
	}
	if flags&flagOriginNow == 0 {
		n += varintLen(originDelta(m))
	}
	return n
}

// originDelta is m's origin time minus its publish time, in nanoseconds
// (wrapping).
func originDelta(m *Message) int64 { return m.Origin.Time.UnixNano() - m.Time.UnixNano() }

// appendRecord appends m's record (without its sequence, which the
// entry header implies) in a topic whose Local is l to dst.
func appendRecord(dst []byte, m *Message, l Local) []byte {
	flags := recordFlags(m, l)
	dst = append(dst, flags)
	dst = binary.AppendVarint(dst, m.Time.UnixNano())
	dst = binary.AppendUvarint(dst, uint64(len(m.Subject)))
	dst = append(dst, m.Subject...)
	dst = binary.AppendUvarint(dst, uint64(len(m.Header)))
	dst = append(dst, m.Header...)
	if flags&(flagOrigin|flagLocalOrigin) != 0 {
		o := &m.Origin
		if flags&flagOrigin != 0 {
			dst = binary.AppendUvarint(dst, uint64(len(o.Region)))
			dst = append(dst, o.Region...)
			dst = binary.AppendUvarint(dst, uint64(len(o.Incarnation)))
			dst = append(dst, o.Incarnation...)
		}
		dst = binary.AppendUvarint(dst, o.Seq)
		if flags&flagOriginNow == 0 {
			dst = binary.AppendVarint(dst, originDelta(m))
		}
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

// EncodeBatch appends the version 2 entry holding msgs, of a topic whose
// Local is l, to dst and returns it. msgs must not be empty and hold
// consecutive sequences (msgs[i].Seq = msgs[0].Seq+i): only msgs[0].Seq
// is stored.
func EncodeBatch(dst []byte, msgs []Message, l Local) []byte {
	dst = appendBatchHeader(dst, msgs[0].Seq, len(msgs))
	for i := range msgs {
		dst = appendRecord(dst, &msgs[i], l)
	}
	return dst
}

// batchSize is the length of EncodeBatch's output for messages whose
// EncodedSizes sum to recordBytes.
func batchSize(recordBytes int) int { return batchHeaderSize + recordBytes }

// msgBytes is the message bytes (the sum of EncodedSize) of a ledger of
// version 2 entries, from its length (payload bytes) and entry count.
func msgBytes(length, entries int64) int64 { return length - entries*batchHeaderSize }

// DecodeBatch decodes an entry of a topic whose Local is l, written by
// EncodeBatch (version 2) or by the single-message encoder before it
// (version 1), and returns its messages, in sequence order (at least
// one), with complete origins: a compact record's region and incarnation
// are l's. Subjects are copied; Header and Data alias b (Header is nil
// when empty, Data nil when empty). Errors wrap ErrCorrupt and name the
// malformed field (and the message, for version 2); a compact record
// with no valid l also wraps ErrNoLocalStream. It never panics.
func DecodeBatch(b []byte, l Local) ([]Message, error) {
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
		return decodeV2(b, l)
	default:
		return nil, fmt.Errorf("%w: entry version %d, want %d or %d", ErrCorrupt, b[0], entryV1, entryV2)
	}
}

func decodeV2(b []byte, l Local) ([]Message, error) {
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
		if p, err = decodeRecord(p, m, prev, l); err != nil {
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

// decodeRecord decodes one version 2 record of a topic whose Local is l
// from p into m (all but Seq) and returns the rest of p. prev, if not
// nil, is an origin decoded before, whose strings m's origin shares when
// equal.
func decodeRecord(p []byte, m *Message, prev *Origin, l Local) ([]byte, error) {
	if len(p) == 0 {
		return nil, fmt.Errorf("%w: entry record flags: no bytes left", ErrCorrupt)
	}
	flags := p[0]
	if f := flags &^ flagsKnown; f != 0 {
		return nil, fmt.Errorf("%w: entry record flags %#02x not known to version %d", ErrCorrupt, f, entryV2)
	}
	switch flags & (flagOrigin | flagLocalOrigin) {
	case flagOrigin | flagLocalOrigin:
		return nil, fmt.Errorf("%w: entry record flags %#02x: both full and local origin", ErrCorrupt, flags)
	case 0:
		if flags&flagOriginNow != 0 {
			return nil, fmt.Errorf("%w: entry record flags %#02x: origin time without an origin", ErrCorrupt, flags)
		}
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
	if flags&(flagOrigin|flagLocalOrigin) != 0 {
		if p, err = decodeOrigin(p, flags, ns, &m.Origin, prev, l); err != nil {
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

// decodeOrigin decodes a record's origin fields (flags: the record's,
// with flagOrigin or flagLocalOrigin) from p into o (ns: the record's
// publish time; l: its topic's Local) and returns the rest of p. A full
// origin's region and incarnation are prev's strings when equal (a
// batch's messages mostly share them); a local one's are l's.
func decodeOrigin(p []byte, flags byte, ns int64, o *Origin, prev *Origin, l Local) ([]byte, error) {
	var region, inc []byte
	if flags&flagOrigin != 0 {
		var err error
		if region, p, err = lenPrefixed(p, "origin region"); err != nil {
			return nil, err
		}
		if inc, p, err = lenPrefixed(p, "origin incarnation"); err != nil {
			return nil, err
		}
		switch {
		case len(region) == 0:
			return nil, fmt.Errorf("%w: entry origin region empty", ErrCorrupt)
		case len(inc) == 0:
			return nil, fmt.Errorf("%w: entry origin incarnation empty", ErrCorrupt)
		}
	} else if !l.valid() {
		return nil, fmt.Errorf("%w: %w (region %q, incarnation %q)", ErrCorrupt, ErrNoLocalStream, l.Region, l.Incarnation)
	}
	seq, n := binary.Uvarint(p)
	if n <= 0 {
		return nil, fmt.Errorf("%w: entry origin seq: bad uvarint", ErrCorrupt)
	}
	p = p[n:]
	var d int64
	if flags&flagOriginNow == 0 {
		if d, n = binary.Varint(p); n <= 0 {
			return nil, fmt.Errorf("%w: entry origin time: bad varint", ErrCorrupt)
		}
		p = p[n:]
	}
	if seq == 0 {
		return nil, fmt.Errorf("%w: entry origin seq 0", ErrCorrupt)
	}
	*o = Origin{Seq: seq, Time: time.Unix(0, ns+d).UTC()}
	switch {
	case flags&flagLocalOrigin != 0:
		o.Region, o.Incarnation = l.Region, l.Incarnation
		return p, nil
	case prev != nil && string(region) == prev.Region:
		o.Region = prev.Region
	default:
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
