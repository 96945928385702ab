package replicator

// Encodings of a SubSet: binary for the replication link and for
// persistence, JSON for admin display (and persisted JSON states).
//
// # Binary encoding (version 1)
//
//	byte     version = 1
//	byte     flags: bit 0 = deleted; the other bits are 0
//	uvarint  epoch wall (Unix ns, <= MaxInt64)
//	uvarint  epoch logical
//	uvarint  n, then n bytes: epoch region
//	uvarint  k: number of origin streams
//	k times, strictly ascending by (region, incarnation):
//	  uvarint  n, then n bytes: region
//	  uvarint  n, then n bytes: incarnation
//	  uvarint  n, then n bytes: the stream's ackset (internal/ackset
//	           binary encoding, a non-empty set)
//
// Names are 1 to MaxSubNameLen bytes of UTF-8. The zero epoch has an empty
// region and Wall and Logical 0; any other epoch names its region and is
// above (0, 0). A deleted set has a non-zero epoch and no streams.
// Decoding accepts only this canonical form (minimal varints, no trailing
// bytes), so every accepted input re-encodes to the same bytes; it never
// panics, and allocates no more than the input's length justifies. The
// subscription's and topic's names are not part of the encoding: the
// driver's envelope carries them.
//
// # JSON
//
//	{"epoch":{"wall":"2026-01-01T00:00:01Z","logical":0,"region":"eu"},
//	 "deleted":false,
//	 "origins":[{"region":"us","incarnation":"u1",
//	             "acked":{"mark_delete":10,"ranges":[[12,14]]}}]}
//
// origins is sorted and [] when empty. Decoding enforces the same rules
// (in any order of origins, but no duplicates) and rejects unknown fields.
//
// Every decoding error wraps ErrInvalid and says what was wrong; an
// error from the ackset decoder is wrapped as well.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
	"unicode/utf8"

	"github.com/stratamesh/strata/internal/ackset"
)

// SubSetVersion is the binary encoding version written by MarshalBinary.
const SubSetVersion byte = 1

// MaxSubNameLen is the longest region or incarnation name, in bytes, the
// encodings accept.
const MaxSubNameLen = 255

// AppendBinary appends the binary encoding of s to b. It never fails.
func (s *SubSet) AppendBinary(b []byte) ([]byte, error) {
	var flags byte
	if s.deleted {
		flags = 1
	}
	b = append(b, SubSetVersion, flags)
	b = binary.AppendUvarint(b, uint64(s.epoch.Wall))
	b = binary.AppendUvarint(b, s.epoch.Logical)
	b = appendString(b, s.epoch.Region)
	streams := s.Streams()
	b = binary.AppendUvarint(b, uint64(len(streams)))
	for _, k := range streams {
		b = appendString(b, k.Region)
		b = appendString(b, k.Incarnation)
		set, _ := s.sets[k].acked.MarshalBinary() // never fails
		b = binary.AppendUvarint(b, uint64(len(set)))
		b = append(b, set...)
	}
	return b, nil
}

// MarshalBinary returns the binary encoding of s. It never fails.
func (s *SubSet) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(nil)
}

func appendString(b []byte, v string) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// DecodeSubSet decodes the binary encoding of a SubSet. The result's
// Version is 1 (0 for the zero value). Errors wrap ErrInvalid and name the
// field.
func DecodeSubSet(data []byte) (*SubSet, error) {
	s := NewSubSet()
	if err := s.UnmarshalBinary(data); err != nil {
		return nil, err
	}
	return s, nil
}

// UnmarshalBinary replaces s with the set encoded in data (see
// DecodeSubSet). On error s is unchanged.
func (s *SubSet) UnmarshalBinary(data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: subscription set: empty input", ErrInvalid)
	}
	if data[0] != SubSetVersion {
		return fmt.Errorf("%w: subscription set: version %d (want %d)", ErrInvalid, data[0], SubSetVersion)
	}
	if len(data) < 2 {
		return fmt.Errorf("%w: subscription set: flags: truncated", ErrInvalid)
	}
	if data[1] > 1 {
		return fmt.Errorf("%w: subscription set: unknown flags %#x", ErrInvalid, data[1])
	}
	t := SubSet{deleted: data[1] == 1, sets: map[OriginStream]*originSet{}}
	d := subDecoder{buf: data[2:]}
	wall, err := d.uvarint("epoch wall")
	if err != nil {
		return err
	}
	if wall > math.MaxInt64 {
		return fmt.Errorf("%w: subscription set: epoch wall %d beyond MaxInt64", ErrInvalid, wall)
	}
	t.epoch.Wall = int64(wall)
	if t.epoch.Logical, err = d.uvarint("epoch logical"); err != nil {
		return err
	}
	if t.epoch.Region, err = d.str("epoch region", true); err != nil {
		return err
	}
	if err := t.checkEpoch(); err != nil {
		return err
	}
	k, err := d.uvarint("stream count")
	if err != nil {
		return err
	}
	// A stream takes at least 8 bytes (three lengths, two 1-byte names,
	// a 3-byte ackset): bound the work by the input.
	if k > uint64(len(d.buf)/8) {
		return fmt.Errorf("%w: subscription set: stream count %d exceeds what %d remaining bytes can hold", ErrInvalid, k, len(d.buf))
	}
	var prev OriginStream
	for i := range k {
		var st OriginStream
		if st.Region, err = d.str(fmt.Sprintf("stream %d region", i), false); err != nil {
			return err
		}
		if st.Incarnation, err = d.str(fmt.Sprintf("stream %d incarnation", i), false); err != nil {
			return err
		}
		if i > 0 && prev.compare(st) >= 0 {
			return fmt.Errorf("%w: subscription set: stream %d (%s) is not after stream %d (%s)", ErrInvalid, i, st, i-1, prev)
		}
		prev = st
		raw, err := d.bytes(fmt.Sprintf("stream %d (%s) set", i, st))
		if err != nil {
			return err
		}
		set := ackset.New(0)
		if err := set.UnmarshalBinary(raw); err != nil {
			return fmt.Errorf("%w: subscription set: stream %d (%s) set: %w", ErrInvalid, i, st, err)
		}
		if err := t.addStream(i, st, set); err != nil {
			return err
		}
	}
	if len(d.buf) > 0 {
		return fmt.Errorf("%w: subscription set: %d trailing bytes after %d streams", ErrInvalid, len(d.buf), k)
	}
	t.settle()
	*s = t
	return nil
}

// checkEpoch enforces the epoch rules shared by both decoders.
func (s *SubSet) checkEpoch() error {
	e := s.epoch
	switch {
	case e.Wall < 0:
		return fmt.Errorf("%w: subscription set: epoch wall %d is negative", ErrInvalid, e.Wall)
	case e.Region == "" && (e.Wall != 0 || e.Logical != 0):
		return fmt.Errorf("%w: subscription set: epoch (%d, %d) names no region", ErrInvalid, e.Wall, e.Logical)
	case e.Region != "" && e.Wall == 0 && e.Logical == 0:
		return fmt.Errorf("%w: subscription set: epoch of region %q at (0, 0) is not above the zero epoch", ErrInvalid, e.Region)
	case s.deleted && e.IsZero():
		return fmt.Errorf("%w: subscription set: deleted in the zero epoch", ErrInvalid)
	}
	return checkName("epoch region", e.Region, true)
}

// addStream adds a decoded stream's set, enforcing the rules shared by
// both decoders.
func (s *SubSet) addStream(i uint64, st OriginStream, set *ackset.Set) error {
	if err := checkName(fmt.Sprintf("stream %d region", i), st.Region, false); err != nil {
		return err
	}
	if err := checkName(fmt.Sprintf("stream %d incarnation", i), st.Incarnation, false); err != nil {
		return err
	}
	switch {
	case s.deleted:
		return fmt.Errorf("%w: subscription set: stream %d (%s) in a deleted set", ErrInvalid, i, st)
	case set.MarkDelete() == 0 && set.Len() == 0:
		return fmt.Errorf("%w: subscription set: stream %d (%s) has an empty set", ErrInvalid, i, st)
	case s.sets[st] != nil:
		return fmt.Errorf("%w: subscription set: stream %d (%s) appears twice", ErrInvalid, i, st)
	}
	s.sets[st] = &originSet{acked: set}
	return nil
}

func checkName(what, v string, emptyOK bool) error {
	switch {
	case v == "" && !emptyOK:
		return fmt.Errorf("%w: subscription set: %s is empty", ErrInvalid, what)
	case len(v) > MaxSubNameLen:
		return fmt.Errorf("%w: subscription set: %s is %d bytes (at most %d)", ErrInvalid, what, len(v), MaxSubNameLen)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: subscription set: %s is not UTF-8", ErrInvalid, what)
	}
	return nil
}

type subDecoder struct{ buf []byte }

// uvarint reads one minimally encoded uvarint, field what.
func (d *subDecoder) uvarint(what string) (uint64, error) {
	v, n := binary.Uvarint(d.buf)
	if n > 0 && (n == 1 || d.buf[n-1] != 0) {
		d.buf = d.buf[n:]
		return v, nil
	}
	switch {
	case n == 0:
		return 0, fmt.Errorf("%w: subscription set: %s: truncated", ErrInvalid, what)
	case n < 0:
		return 0, fmt.Errorf("%w: subscription set: %s: varint overflows uint64", ErrInvalid, what)
	default:
		return 0, fmt.Errorf("%w: subscription set: %s: non-minimal varint", ErrInvalid, what)
	}
}

// bytes reads a length-prefixed byte string, field what.
func (d *subDecoder) bytes(what string) ([]byte, error) {
	n, err := d.uvarint(what + " length")
	if err != nil {
		return nil, err
	}
	if n > uint64(len(d.buf)) {
		return nil, fmt.Errorf("%w: subscription set: %s: %d bytes, %d left", ErrInvalid, what, n, len(d.buf))
	}
	b := d.buf[:n]
	d.buf = d.buf[n:]
	return b, nil
}

// str reads a length-prefixed name, field what, checked by checkName.
func (d *subDecoder) str(what string, emptyOK bool) (string, error) {
	n, err := d.uvarint(what + " length")
	if err != nil {
		return "", err
	}
	if n > MaxSubNameLen {
		return "", fmt.Errorf("%w: subscription set: %s is %d bytes (at most %d)", ErrInvalid, what, n, MaxSubNameLen)
	}
	if n > uint64(len(d.buf)) {
		return "", fmt.Errorf("%w: subscription set: %s: %d bytes, %d left", ErrInvalid, what, n, len(d.buf))
	}
	v := string(d.buf[:n])
	d.buf = d.buf[n:]
	return v, checkName(what, v, emptyOK)
}

// jsonEpoch is Epoch's JSON shape.
type jsonEpoch struct {
	Wall    time.Time `json:"wall"`
	Logical uint64    `json:"logical"`
	Region  string    `json:"region"`
}

// MarshalJSON returns {"wall":RFC 3339 (ns, UTC),"logical":N,"region":R}.
func (e Epoch) MarshalJSON() ([]byte, error) {
	return json.Marshal(jsonEpoch{Wall: e.Time(), Logical: e.Logical, Region: e.Region})
}

// UnmarshalJSON reads what MarshalJSON writes. Errors wrap ErrInvalid:
// unknown fields, a wall before 1970 or after 2262. The rules tying the
// region to the other fields are checked by the SubSet decoder.
func (e *Epoch) UnmarshalJSON(data []byte) error {
	var j jsonEpoch
	if err := strictJSON(data, &j); err != nil {
		return fmt.Errorf("%w: subscription epoch: %w", ErrInvalid, err)
	}
	if j.Wall.Before(unixZero) || j.Wall.After(unixMax) {
		return fmt.Errorf("%w: subscription epoch: wall %s outside 1970..2262", ErrInvalid, j.Wall.Format(time.RFC3339Nano))
	}
	*e = Epoch{Wall: j.Wall.UnixNano(), Logical: j.Logical, Region: j.Region}
	return nil
}

type jsonOrigin struct {
	Region      string      `json:"region"`
	Incarnation string      `json:"incarnation"`
	Acked       *ackset.Set `json:"acked"`
}

type jsonSubSet struct {
	Epoch   Epoch        `json:"epoch"`
	Deleted bool         `json:"deleted"`
	Origins []jsonOrigin `json:"origins"`
}

// MarshalJSON returns the JSON form shown in the file comment.
func (s *SubSet) MarshalJSON() ([]byte, error) {
	j := jsonSubSet{Epoch: s.epoch, Deleted: s.deleted, Origins: []jsonOrigin{}}
	for _, k := range s.Streams() {
		j.Origins = append(j.Origins, jsonOrigin{Region: k.Region, Incarnation: k.Incarnation, Acked: s.sets[k].acked})
	}
	return json.Marshal(j)
}

// DecodeSubSetJSON decodes the JSON form of a SubSet. The result's
// Version is as for DecodeSubSet; errors wrap ErrInvalid.
func DecodeSubSetJSON(data []byte) (*SubSet, error) {
	s := NewSubSet()
	if err := s.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return s, nil
}

// UnmarshalJSON replaces s with the set in data (see DecodeSubSetJSON).
// JSON null is refused. On error s is unchanged.
func (s *SubSet) UnmarshalJSON(data []byte) error {
	var j jsonSubSet
	if err := strictJSON(data, &j); errors.Is(err, ErrInvalid) {
		return err // from Epoch.UnmarshalJSON
	} else if err != nil {
		return fmt.Errorf("%w: subscription set: %w", ErrInvalid, err)
	}
	t := SubSet{epoch: j.Epoch, deleted: j.Deleted, sets: map[OriginStream]*originSet{}}
	if err := t.checkEpoch(); err != nil {
		return err
	}
	for i, o := range j.Origins {
		st := OriginStream{Region: o.Region, Incarnation: o.Incarnation}
		if o.Acked == nil {
			return fmt.Errorf("%w: subscription set: stream %d (%s): no acked set", ErrInvalid, i, st)
		}
		if err := t.addStream(uint64(i), st, o.Acked); err != nil {
			return err
		}
	}
	t.settle()
	*s = t
	return nil
}

// strictJSON decodes one JSON object into v, refusing null, unknown
// fields and trailing data.
func strictJSON(data []byte, v any) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return fmt.Errorf("null")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after the object")
	}
	return nil
}
