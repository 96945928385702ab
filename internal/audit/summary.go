package audit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"math"
	"slices"
)

// Origin names an origin stream of a topic: the region where its
// messages were first published and the topic's incarnation there.
type Origin struct {
	Region      string `json:"region"`
	Incarnation string `json:"incarnation"`
}

func (o Origin) String() string { return o.Region + "/" + o.Incarnation }

// Range is the origin sequences From..To, inclusive (From ≤ To).
type Range struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
}

// Len is the number of sequences in r.
func (r Range) Len() uint64 { return r.To - r.From + 1 }

func (r Range) String() string {
	if r.From == r.To {
		return fmt.Sprintf("%d", r.From)
	}
	return fmt.Sprintf("%d-%d", r.From, r.To)
}

// Span is one span of the grid: the origin sequences From..To, Count
// messages held among them, Sum the sum modulo 2^64 of their digests,
// and the local (topic) sequences where the first and last were found,
// a hint that lets a finer request read only that part of the ledger.
type Span struct {
	From       uint64 `json:"from"`
	To         uint64 `json:"to"`
	Count      uint64 `json:"count"`
	Sum        uint64 `json:"sum"`
	LocalFirst uint64 `json:"local_first"`
	LocalLast  uint64 `json:"local_last"`
}

// OriginSummary is what a region holds of one origin stream within a
// request's range.
type OriginSummary struct {
	Origin
	// Held is the ranges of origin sequences held, ascending, disjoint
	// and not adjacent.
	Held []Range `json:"held"`
	// Spans are the spans holding at least one message, ascending.
	Spans []Span `json:"spans"`
	// Duplicates are origin sequences found more than once (at most
	// MaxDuplicates of them): a copy stored twice.
	Duplicates []uint64 `json:"duplicates,omitempty"`
}

// Summary is a region's answer for one topic.
type Summary struct {
	Region string `json:"region"`
	// From, To, Span are the request's range and span width.
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
	Span uint64 `json:"span"`
	// Scanned is how many messages were read to make it.
	Scanned uint64          `json:"scanned"`
	Origins []OriginSummary `json:"origins"`
}

// Find returns the summary of origin o (nil when none of its messages
// are held).
func (s *Summary) Find(o Origin) *OriginSummary {
	for i := range s.Origins {
		if s.Origins[i].Origin == o {
			return &s.Origins[i]
		}
	}
	return nil
}

// Limits of a request.
const (
	// MaxSpans is the most spans one request may ask for per origin
	// ((To-From)/Span+1).
	MaxSpans = 1 << 20
	// MaxDuplicates is how many duplicate sequences a summary lists.
	MaxDuplicates = 100
	// DefaultSpan is the span width of a first request.
	DefaultSpan = 4096
)

// ErrBadRequest: a request's range or span is invalid.
var ErrBadRequest = errors.New("audit: bad request")

// Request is what a summary is asked for: origin sequences From..To
// (To 0: no upper bound) in spans of Span, of one origin stream when
// Origin is set (else all), reading local sequences LocalFrom..LocalTo
// (0: from the first, to the last).
type Request struct {
	Origin    *Origin `json:"origin,omitempty"`
	From      uint64  `json:"from"`
	To        uint64  `json:"to"`
	Span      uint64  `json:"span"`
	LocalFrom uint64  `json:"local_from,omitempty"`
	LocalTo   uint64  `json:"local_to,omitempty"`
}

// Normalize fills the defaults (From 1, To unbounded, Span
// DefaultSpan) and checks the request. Errors: ErrBadRequest naming the
// field.
func (q *Request) Normalize() error {
	if q.From == 0 {
		q.From = 1
	}
	if q.To == 0 {
		q.To = math.MaxUint64
	}
	if q.Span == 0 {
		q.Span = DefaultSpan
	}
	switch {
	case q.To < q.From:
		return fmt.Errorf("%w: to %d is below from %d", ErrBadRequest, q.To, q.From)
	case q.To != math.MaxUint64 && (q.To-q.From)/q.Span >= MaxSpans:
		return fmt.Errorf("%w: span %d makes more than %d spans of %d-%d", ErrBadRequest, q.Span, MaxSpans, q.From, q.To)
	case q.LocalTo != 0 && q.LocalTo < q.LocalFrom:
		return fmt.Errorf("%w: local_to %d is below local_from %d", ErrBadRequest, q.LocalTo, q.LocalFrom)
	case q.Origin != nil && (q.Origin.Region == "" || q.Origin.Incarnation == ""):
		return fmt.Errorf("%w: origin needs a region and an incarnation", ErrBadRequest)
	}
	return nil
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// Digest is a message's digest: CRC-64/ECMA over its origin sequence
// (8 bytes little-endian), its header block's length (8 bytes), the
// header block and the payload. Local sequence and times are not in it.
func Digest(originSeq uint64, header, data []byte) uint64 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], originSeq)
	binary.LittleEndian.PutUint64(b[8:], uint64(len(header)))
	c := crc64.Update(0, crcTable, b[:])
	c = crc64.Update(c, crcTable, header)
	return crc64.Update(c, crcTable, data)
}

// Summarizer builds a Summary from messages fed in local sequence order.
type Summarizer struct {
	q      Request
	sum    Summary
	last   map[Origin]uint64 // the highest origin sequence added per origin
	byName map[Origin]int
}

// NewSummarizer starts a summary of region for q (normalised; see
// Request.Normalize).
func NewSummarizer(region string, q Request) (*Summarizer, error) {
	if err := q.Normalize(); err != nil {
		return nil, err
	}
	return &Summarizer{q: q, sum: Summary{Region: region, From: q.From, To: q.To, Span: q.Span, Origins: []OriginSummary{}},
		last: map[Origin]uint64{}, byName: map[Origin]int{}}, nil
}

// Add counts one message read: origin o, origin sequence seq (0: no
// origin recorded, ignored), local sequence local, digest d.
func (z *Summarizer) Add(o Origin, seq, local, d uint64) {
	z.sum.Scanned++
	if seq == 0 || seq < z.q.From || seq > z.q.To || (z.q.Origin != nil && *z.q.Origin != o) {
		return
	}
	i, ok := z.byName[o]
	if !ok {
		i = len(z.sum.Origins)
		z.byName[o] = i
		z.sum.Origins = append(z.sum.Origins, OriginSummary{Origin: o, Held: []Range{}, Spans: []Span{}})
	}
	os := &z.sum.Origins[i]
	if last, seen := z.last[o]; seen && seq <= last {
		if holds(os.Held, seq) {
			if len(os.Duplicates) < MaxDuplicates {
				os.Duplicates = append(os.Duplicates, seq)
			}
			return
		}
		z.addUnordered(os, seq, local, d) // out of order: never by design, kept correct anyway
		return
	}
	z.last[o] = seq
	if n := len(os.Held); n > 0 && os.Held[n-1].To+1 == seq {
		os.Held[n-1].To = seq
	} else {
		os.Held = append(os.Held, Range{seq, seq})
	}
	from := z.q.From + (seq-z.q.From)/z.q.Span*z.q.Span
	if n := len(os.Spans); n > 0 && os.Spans[n-1].From == from {
		sp := &os.Spans[n-1]
		sp.Count++
		sp.Sum += d
		sp.LocalFirst, sp.LocalLast = min(sp.LocalFirst, local), max(sp.LocalLast, local)
		return
	}
	os.Spans = append(os.Spans, Span{From: from, To: spanEnd(from, z.q.Span, z.q.To), Count: 1, Sum: d, LocalFirst: local, LocalLast: local})
}

func spanEnd(from, span, to uint64) uint64 {
	if to-from < span {
		return to
	}
	return from + span - 1
}

// addUnordered inserts seq below the origin's highest one.
func (z *Summarizer) addUnordered(os *OriginSummary, seq, local, d uint64) {
	os.Held = append(os.Held, Range{seq, seq})
	os.Held = normalize(os.Held)
	from := z.q.From + (seq-z.q.From)/z.q.Span*z.q.Span
	i, found := slices.BinarySearchFunc(os.Spans, from, func(s Span, f uint64) int {
		switch {
		case s.From < f:
			return -1
		case s.From > f:
			return 1
		}
		return 0
	})
	if found {
		sp := &os.Spans[i]
		sp.Count++
		sp.Sum += d
		sp.LocalFirst, sp.LocalLast = min(sp.LocalFirst, local), max(sp.LocalLast, local)
		return
	}
	os.Spans = slices.Insert(os.Spans, i, Span{From: from, To: spanEnd(from, z.q.Span, z.q.To), Count: 1, Sum: d, LocalFirst: local, LocalLast: local})
}

// Summary is the summary so far.
func (z *Summarizer) Summary() Summary { return z.sum }

func holds(rs []Range, seq uint64) bool {
	i, found := slices.BinarySearchFunc(rs, seq, func(r Range, s uint64) int {
		switch {
		case r.To < s:
			return -1
		case r.From > s:
			return 1
		}
		return 0
	})
	_ = i
	return found
}

// normalize sorts rs and merges overlapping and adjacent ranges.
func normalize(rs []Range) []Range {
	slices.SortFunc(rs, func(a, b Range) int {
		switch {
		case a.From < b.From:
			return -1
		case a.From > b.From:
			return 1
		}
		return 0
	})
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && (out[n-1].To == math.MaxUint64 || r.From <= out[n-1].To+1) {
			out[n-1].To = max(out[n-1].To, r.To)
			continue
		}
		out = append(out, r)
	}
	return out
}
