// Package ackset is the set of acknowledged stream sequences behind a
// durable cursor (shared/design/ARCHITECTURE.md §3 "Cursors";
// shared/specs/nats-wire.md §4, consumer ⇄ cursor).
// It keeps Pulsar's shape: a mark-delete position plus the individually
// acknowledged ranges above it ("individuallyDeletedMessages").
//
// # What it owns
//
//   - Set: the mark-delete position M (every sequence in [1, M] is acked;
//     JetStream's ack_floor) and sorted, disjoint, non-adjacent ranges
//     [first, last] above it, each with first > M+1. M moves up by itself
//     when the gap just above it fills.
//   - Individual acks (Ack, AckRange), cumulative acks (AckUpTo, i.e.
//     AckAll), and the queries a consumer needs: Contains, Count (for
//     num_ack_pending = delivered-above-M − Count(M+1, delivered)),
//     NextUnacked (the next redelivery candidate) and Len.
//   - Its persisted forms: a compact binary encoding and JSON for admin
//     display.
//
// Sequences are 1-based; 0 is not a sequence: it is never acked, never
// counted and never returned by NextUnacked (which returns 0 for "none").
// The whole uint64 range is handled, including MaxUint64. Counts are int
// and saturate at math.MaxInt. An inverted range (first > last) is empty.
//
// # What it must not do
//
// It does no I/O, keeps no clock, and knows nothing of delivery counts,
// redelivery, filters or persistence batching: the cursor decides what to
// ack (entries skipped by a filter are acked like any other, so they count
// toward the floor) and when to persist. It does not cap its size.
//
// # Concurrency
//
// A Set is not safe for concurrent use. It belongs to the cursor's owner
// goroutine (CONVENTIONS.md items 1 and 7); to persist or display it from
// elsewhere, the owner hands over a Clone or the bytes of MarshalBinary.
//
// # Complexity and bounds
//
// With n ranges: Contains and NextUnacked are O(log n). Ack of
// MarkDelete()+1 is O(1) amortized (it may absorb the first range), and
// Ack/AckRange at or past the end of the last range is an O(log n) search
// plus an append or an in-place extension, so in-order acking stays cheap
// no matter how many holes lie behind it. AckUpTo is O(log n) plus O(1) per range it swallows
// (amortized against the range's creation). Any other Ack/AckRange finds
// its place in O(log n) and merges neighbours in amortized O(1); when it
// creates a range in the middle, or joins two, the ranges after it move
// (a memmove of 16 bytes per range, O(n) but fast: see the benchmarks).
// Count is O(log n + min(k, n−k)) for k ranges inside the queried window,
// so the num_ack_pending query over the whole window is O(log n).
//
// Each hole above the mark-delete position can cost one range: acking
// every other sequence of a window of w gives w/2 ranges, 16 bytes each in
// memory and 2–20 bytes each encoded (typically 2–4). The set itself
// imposes no limit; bounding it is the caller's policy (JetStream's
// max_ack_pending bounds the delivered window, and Pulsar caps the ranges
// it persists with managedLedgerMaxUnackedRangesToPersist). Len reports
// the current number of ranges so the caller can enforce its policy.
//
// # Binary encoding (version 1)
//
//	byte     version = 1
//	uvarint  mark_delete
//	uvarint  number of ranges, k
//	k times:
//	  uvarint  gap   = first − prev − 2   (prev = mark_delete, then the previous last)
//	  uvarint  width = last − first
//
// The invariants (first > prev+1) make every gap non-negative, so no
// encoding can describe overlapping or touching ranges. Decoding accepts
// only the canonical form (minimal varints, no trailing bytes, no value
// past MaxUint64), so every accepted input re-encodes to the same bytes,
// and it never panics or allocates more than the input can justify. A
// decoding error wraps ErrInvalid (or ErrVersion) and names the field.
//
// # JSON
//
//	{"mark_delete":17,"ranges":[[19,20],[25,25]]}
//
// ranges is [] when empty. UnmarshalJSON enforces the same invariants and
// rejects unknown fields.
package ackset
