package ackset

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// Version is the binary encoding version written by MarshalBinary.
const Version byte = 1

var (
	// ErrInvalid is wrapped by every error about malformed input to
	// UnmarshalBinary or UnmarshalJSON; the message says what is wrong.
	ErrInvalid = errors.New("ackset: invalid encoding")
	// ErrVersion is returned for a binary encoding with an unknown version.
	ErrVersion = errors.New("ackset: unsupported encoding version")
)

// AppendBinary appends the binary encoding of s to b (encoding.BinaryAppender).
// The format is described in the package documentation. It never fails.
func (s *Set) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, Version)
	b = binary.AppendUvarint(b, s.md)
	b = binary.AppendUvarint(b, uint64(len(s.r)))
	prev := s.md
	for _, x := range s.r {
		b = binary.AppendUvarint(b, x.first-prev-2) // invariant: first >= prev+2
		b = binary.AppendUvarint(b, x.last-x.first)
		prev = x.last
	}
	return b, nil
}

// MarshalBinary returns the compact binary encoding of s. It never fails.
func (s *Set) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, 1+2*binary.MaxVarintLen64+4*len(s.r)))
}

// UnmarshalBinary replaces s with the set encoded in data. It accepts only
// the canonical encoding (minimal varints, no trailing bytes), so every
// accepted input re-encodes to itself. On error s is unchanged; errors
// wrap ErrInvalid or ErrVersion and name the offending field.
func (s *Set) UnmarshalBinary(data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: empty input", ErrInvalid)
	}
	if data[0] != Version {
		return fmt.Errorf("%w: %d (want %d)", ErrVersion, data[0], Version)
	}
	d := decoder{buf: data[1:]}
	md, err := d.uvarint("mark_delete", -1)
	if err != nil {
		return err
	}
	count, err := d.uvarint("range count", -1)
	if err != nil {
		return err
	}
	// Each range takes at least two bytes: bound the allocation by the input.
	if count > uint64(len(d.buf)/2) {
		return fmt.Errorf("%w: range count %d exceeds what %d remaining bytes can hold", ErrInvalid, count, len(d.buf))
	}
	t := Set{md: md}
	if count > 0 {
		t.r = make([]span, 0, count)
	}
	prev := md
	for i := range count {
		gap, err := d.uvarint("gap", int(i))
		if err != nil {
			return err
		}
		width, err := d.uvarint("width", int(i))
		if err != nil {
			return err
		}
		if prev >= math.MaxUint64-1 || gap > math.MaxUint64-prev-2 {
			return fmt.Errorf("%w: range %d starts beyond the largest sequence", ErrInvalid, i)
		}
		first := prev + 2 + gap
		if width > math.MaxUint64-first {
			return fmt.Errorf("%w: range %d ends beyond the largest sequence", ErrInvalid, i)
		}
		x := span{first, first + width}
		t.r = append(t.r, x)
		t.n += x.size()
		prev = x.last
	}
	if len(d.buf) > 0 {
		return fmt.Errorf("%w: %d trailing bytes after %d ranges", ErrInvalid, len(d.buf), count)
	}
	*s = t
	return nil
}

type decoder struct{ buf []byte }

// uvarint reads one minimally encoded uvarint: field what, of range i if
// i >= 0 (formatted only on error, to keep decoding allocation-free).
func (d *decoder) uvarint(what string, i int) (uint64, error) {
	v, n := binary.Uvarint(d.buf)
	if n > 0 && (n == 1 || d.buf[n-1] != 0) {
		d.buf = d.buf[n:]
		return v, nil
	}
	if i >= 0 {
		what = fmt.Sprintf("range %d %s", i, what)
	}
	switch {
	case n == 0:
		return 0, fmt.Errorf("%w: %s: truncated", ErrInvalid, what)
	case n < 0:
		return 0, fmt.Errorf("%w: %s: varint overflows uint64", ErrInvalid, what)
	default:
		return 0, fmt.Errorf("%w: %s: non-minimal varint", ErrInvalid, what)
	}
}

// jsonSet is the JSON shape: {"mark_delete":N,"ranges":[[a,b],…]}.
type jsonSet struct {
	MarkDelete uint64      `json:"mark_delete"`
	Ranges     [][2]uint64 `json:"ranges"`
}

// MarshalJSON returns {"mark_delete":N,"ranges":[[first,last],…]}; ranges
// is [] (never null) when empty. Numbers are exact uint64 decimals.
func (s *Set) MarshalJSON() ([]byte, error) {
	j := jsonSet{MarkDelete: s.md, Ranges: s.Ranges()}
	if j.Ranges == nil {
		j.Ranges = [][2]uint64{}
	}
	return json.Marshal(j)
}

// UnmarshalJSON replaces s with the set in data, which must have the shape
// MarshalJSON writes. Unknown fields are rejected, a missing mark_delete is
// 0, and ranges must satisfy the same invariants as Ranges (each [first,
// last] with first <= last, ascending, neither overlapping nor touching,
// the first above mark_delete+1). JSON null leaves s unchanged. On error s
// is unchanged; errors wrap ErrInvalid.
func (s *Set) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil
	}
	var raw struct {
		MarkDelete uint64     `json:"mark_delete"`
		Ranges     [][]uint64 `json:"ranges"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: trailing data after the object", ErrInvalid)
	}
	t := Set{md: raw.MarkDelete}
	if len(raw.Ranges) > 0 {
		t.r = make([]span, 0, len(raw.Ranges))
	}
	prev := raw.MarkDelete
	for i, p := range raw.Ranges {
		if len(p) != 2 {
			return fmt.Errorf("%w: range %d has %d elements, want [first,last]", ErrInvalid, i, len(p))
		}
		x := span{p[0], p[1]}
		switch {
		case x.first > x.last:
			return fmt.Errorf("%w: range %d [%d,%d] is inverted", ErrInvalid, i, x.first, x.last)
		case i == 0 && (x.first <= prev || x.first-prev < 2):
			return fmt.Errorf("%w: range 0 [%d,%d] must start above mark_delete+1 (%d)", ErrInvalid, x.first, x.last, prev)
		case i > 0 && (x.first <= prev || x.first-prev < 2):
			return fmt.Errorf("%w: range %d [%d,%d] overlaps, touches or precedes the range before it (ending %d)", ErrInvalid, i, x.first, x.last, prev)
		}
		t.r = append(t.r, x)
		t.n += x.size()
		prev = x.last
	}
	*s = t
	return nil
}
