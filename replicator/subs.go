package replicator

// # Replicated subscriptions (this file, subs_epoch.go, subs_codec.go)
//
// SubSet is the deterministic core of issue 8 item 5 (ARCHITECTURE §4
// "Replicated subscriptions"): a durable subscription's progress stated in
// terms that mean the same in every region. For each origin stream
// (OriginStream: origin region and topic incarnation, whose origin
// sequences are gap-free) it keeps the set of origin sequences
// acknowledged, as an internal/ackset.Set (a mark-delete position plus
// ranges: usually one prefix). An Epoch (a hybrid logical clock value)
// names the life of the subscription: a Reset or Delete in any region
// moves to a higher epoch with an empty set, and the highest epoch wins
// everywhere (last-writer-wins).
//
// Merge is the CRDT join: same epoch → union of every origin's set;
// higher epoch → replace; lower → ignore. It is commutative, associative
// and idempotent, so regions that ship their sets to each other in any
// order, any number of times, converge to the same set.
//
// What it owns: the set, the epoch, a local version counter (Version,
// Delta) so the driver ships only what changed, and the encodings
// (binary for the link and for persistence, JSON for admin display).
// What it must not do: like the rest of the package it does no I/O, keeps
// no clock (the wall time of a Reset is passed in) and starts no
// goroutine. It knows nothing of local stream sequences, delivery or
// consumers: the driver maps a local ack to the message's Origin, and
// asks Contains for messages it holds or receives. A SubSet is not safe
// for concurrent use; one goroutine (the subscription's owner) owns it.
//
// # The driver's duties (broker/jetstream, per replicated subscription)
//
//   - Create: NewSubSet (zero epoch), in every region of the topic's
//     replication list, so independent creations agree. When the driver
//     still holds a deleted set (a tombstone) for the name, re-create with
//     Reset on it instead, so the new subscription outranks the deletion.
//   - Local acks: for each message the local consumer newly acks, Ack its
//     Origin (or AckRange a run of one origin stream; see AckRange for
//     mapping an ack floor and ranges).
//   - Arrivals: a message stored in this region (replicated or local) is
//     acknowledged on arrival in the local consumer if Contains(origin).
//   - Shipping: every sync interval, for each remote region, if Version()
//     > shipped[remote], send Delta(shipped[remote]) encoded with
//     MarshalBinary; on the remote's durable acknowledgement set
//     shipped[remote] to the Version at the time of sending. Start with
//     shipped[remote] = 0 for a new, restarted or rebuilt remote (a full
//     set), and after restoring this set from storage.
//   - Receiving: decode (DecodeSubSet), Merge, persist (MarshalBinary)
//     before acknowledging to the sender. No echo: if shipped[sender]
//     equalled Version() before the Merge, set it to Version() after (the
//     sender holds everything this region held, and what it sent). Then
//     apply the MergeResult to the local consumer: MergeUnion → ack every
//     held message of the Streams listed that Contains now covers;
//     MergeReplaced → the subscription was reset (or deleted): recompute
//     every held message's ack state from Contains (un-acking what is no
//     longer covered: redelivery from the start of the backlog), or delete
//     the local consumer if Deleted().
//   - Reset/Delete by an operator: Reset(now, localRegion) or
//     Delete(now, localRegion), apply locally as above, ship.
//
// Size: one entry per origin stream ever acked (a re-created topic's old
// incarnations stay until the next Reset); each entry costs what its
// ackset costs, a few bytes for a prefix. Entries cannot be removed
// without breaking the merge (a removed entry would come back from other
// regions); Len reports the number of entries.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stratamesh/strata/internal/ackset"
)

// ErrSubDeleted: an ack on a SubSet whose subscription was deleted (see
// SubSet.Delete). The driver deletes its local consumer instead.
var ErrSubDeleted = errors.New("replicator: subscription deleted")

// OriginStream is an origin stream of a topic: an origin region and its
// topic incarnation (a Stream without the topic). Origin sequences are
// 1-based and gap-free per OriginStream, so a set of them means the same
// messages in every region.
type OriginStream struct {
	Region      string `json:"region"`
	Incarnation string `json:"incarnation"`
}

// OriginStream returns the origin stream o belongs to.
func (o Origin) OriginStream() OriginStream {
	return OriginStream{Region: o.Region, Incarnation: o.Incarnation}
}

// String returns "region/incarnation".
func (s OriginStream) String() string { return s.Region + "/" + s.Incarnation }

// compare orders origin streams by region, then incarnation.
func (s OriginStream) compare(t OriginStream) int {
	if c := strings.Compare(s.Region, t.Region); c != 0 {
		return c
	}
	return strings.Compare(s.Incarnation, t.Incarnation)
}

// validate checks that both parts are named.
func (s OriginStream) validate() error {
	if s.Region == "" || s.Incarnation == "" {
		return fmt.Errorf("%w: origin stream %q: empty region or incarnation", ErrInvalid, s.String())
	}
	return nil
}

// SubSet is the replicated progress of one durable subscription: per
// origin stream, the origin sequences acknowledged, under an epoch. The
// zero value is an empty set in the zero epoch, like NewSubSet's. See the
// file comment for semantics and the driver's duties.
type SubSet struct {
	epoch   Epoch
	deleted bool
	// sets holds one non-empty ackset per origin stream acknowledged in
	// this epoch (no entry for a stream with nothing acked).
	sets map[OriginStream]*originSet
	// version counts local changes to the value (acks that acked
	// something, merges that changed something, resets, deletes); it is
	// not part of the value and not shipped.
	version uint64
	// epochVersion is the version at which epoch (or deleted) last changed.
	epochVersion uint64
}

type originSet struct {
	acked *ackset.Set
	// changed is the version at which acked last grew.
	changed uint64
}

// NewSubSet returns an empty set in the zero epoch: a subscription just
// created, with nothing acknowledged. Its Version is 0.
func NewSubSet() *SubSet { return &SubSet{sets: map[OriginStream]*originSet{}} }

// Epoch returns the set's epoch.
func (s *SubSet) Epoch() Epoch { return s.epoch }

// Deleted reports whether the subscription was deleted in the current
// epoch. A deleted set is empty and refuses acks; it is a tombstone.
func (s *SubSet) Deleted() bool { return s.deleted }

// Version is a local counter that grows by one with every change to the
// set's value (an ack that acked something, a merge that changed
// something, a reset, a delete). It is 0 for a new set and 1 for a
// decoded non-empty one. It is not part of the value: two regions with
// equal sets generally have different versions.
func (s *SubSet) Version() uint64 { return s.version }

// Len returns the number of origin streams with acknowledged sequences.
func (s *SubSet) Len() int { return len(s.sets) }

// Streams returns the origin streams with acknowledged sequences, sorted
// by region then incarnation.
func (s *SubSet) Streams() []OriginStream {
	out := make([]OriginStream, 0, len(s.sets))
	for k := range s.sets {
		out = append(out, k)
	}
	slices.SortFunc(out, OriginStream.compare)
	return out
}

// Acked returns a copy of the acknowledged origin sequences of stream (an
// empty set when none are).
func (s *SubSet) Acked(stream OriginStream) *ackset.Set {
	if e := s.sets[stream]; e != nil {
		return e.acked.Clone()
	}
	return ackset.New(0)
}

// Contains reports whether the message with origin o is acknowledged:
// o.Seq is in the set of o's origin stream. Origin.Time is not used.
// O(log n) in the number of ranges of that stream.
func (s *SubSet) Contains(o Origin) bool {
	e := s.sets[o.OriginStream()]
	return e != nil && e.acked.Contains(o.Seq)
}

// Ack acknowledges the message with origin o and reports whether it was
// newly acknowledged (which bumps Version). Errors: ErrInvalid for an
// origin without region or incarnation or with Seq 0; ErrSubDeleted when
// the subscription is deleted.
func (s *SubSet) Ack(o Origin) (bool, error) {
	if o.Seq == 0 {
		return false, fmt.Errorf("%w: ack of origin %s seq 0", ErrInvalid, o.OriginStream())
	}
	n, err := s.AckRange(o.OriginStream(), o.Seq, o.Seq)
	return n == 1, err
}

// AckRange acknowledges origin sequences first..last (inclusive) of
// stream and returns how many were newly acknowledged (saturating at
// math.MaxInt; a change bumps Version). An inverted range acks nothing;
// first 0 is read as 1. Errors as for Ack.
//
// Mapping a local consumer's acks: in any region, each origin stream's
// messages are stored in origin order without holes (except sequences
// lost to gap records, which exist nowhere), so a run of local stream
// sequences [a, b] holds, per origin stream, one run of consecutive
// origin sequences: AckRange(stream, lowest, highest) for each origin
// stream present in [a, b]. Apply it to the consumer's ack floor (as
// [previous floor+1, floor]) and to each newly acked range above it.
func (s *SubSet) AckRange(stream OriginStream, first, last uint64) (int, error) {
	if err := stream.validate(); err != nil {
		return 0, err
	}
	if s.deleted {
		return 0, fmt.Errorf("%w: ack of %s in epoch %s", ErrSubDeleted, stream, s.epoch)
	}
	first = max(first, 1)
	if first > last {
		return 0, nil
	}
	if s.sets == nil {
		s.sets = map[OriginStream]*originSet{}
	}
	e := s.sets[stream]
	if e == nil {
		e = &originSet{acked: ackset.New(0)}
	}
	n := e.acked.AckRange(first, last)
	if n > 0 {
		s.version++
		e.changed = s.version
		s.sets[stream] = e
	}
	return n, nil
}

// Reset starts a new, empty life of the subscription: the epoch moves to
// Epoch().Next(now, region) (region is the local region: the tie-break),
// every set is emptied and the deletion, if any, is lifted. It returns
// the new epoch. Errors: ErrInvalid for an empty region or an exhausted
// clock (see Epoch.Next); the set is then unchanged.
func (s *SubSet) Reset(now time.Time, region string) (Epoch, error) {
	return s.bump(now, region, false)
}

// Delete is Reset that also marks the subscription deleted: the set stays
// as a tombstone that wins over every older set and refuses acks, so no
// region resurrects the deleted progress. Re-create with Reset.
func (s *SubSet) Delete(now time.Time, region string) (Epoch, error) {
	return s.bump(now, region, true)
}

func (s *SubSet) bump(now time.Time, region string, deleted bool) (Epoch, error) {
	e, err := s.epoch.Next(now, region)
	if err != nil {
		return s.epoch, err
	}
	s.epoch, s.deleted = e, deleted
	clear(s.sets)
	s.version++
	s.epochVersion = s.version
	return e, nil
}

// MergeOutcome says what Merge did.
type MergeOutcome uint8

const (
	// MergeIgnored: the other set's epoch is lower (or the same epoch and
	// this set is deleted): nothing changed.
	MergeIgnored MergeOutcome = iota
	// MergeUnion: same epoch; every origin's set is now the union. Streams
	// lists those that grew.
	MergeUnion
	// MergeReplaced: the other set's epoch is higher (or the same epoch
	// and the other is deleted): this set now equals it. The subscription
	// was reset or deleted elsewhere.
	MergeReplaced
)

func (k MergeOutcome) String() string {
	switch k {
	case MergeIgnored:
		return "ignored"
	case MergeUnion:
		return "union"
	case MergeReplaced:
		return "replaced"
	}
	return "unknown"
}

// MergeResult tells the driver what Merge changed.
type MergeResult struct {
	Outcome MergeOutcome
	// Streams are the origin streams whose set grew (MergeUnion) or, for
	// MergeReplaced, every origin stream of the new set; sorted.
	Streams []OriginStream
	// Newly is how many origin sequences MergeUnion newly acknowledged
	// (saturating at math.MaxInt); 0 otherwise.
	Newly int
}

// Changed reports whether the merge changed the set (and bumped Version).
func (r MergeResult) Changed() bool {
	return r.Outcome == MergeReplaced || (r.Outcome == MergeUnion && r.Newly > 0)
}

// Merge joins other into s: same epoch → union of every origin stream's
// set (a deleted side wins: it is empty); higher epoch → s becomes a copy
// of other; lower → nothing. It is commutative, associative and idempotent
// on the sets' values. other is not modified and shares nothing with s
// afterwards. A change bumps Version once.
func (s *SubSet) Merge(other *SubSet) MergeResult {
	if s.sets == nil {
		s.sets = map[OriginStream]*originSet{}
	}
	c := other.epoch.Compare(s.epoch)
	switch {
	case c < 0, c == 0 && s.deleted:
		return MergeResult{Outcome: MergeIgnored}
	case c > 0, other.deleted:
		s.epoch, s.deleted = other.epoch, other.deleted
		clear(s.sets)
		s.version++
		s.epochVersion = s.version
		for k, e := range other.sets {
			s.sets[k] = &originSet{acked: e.acked.Clone(), changed: s.version}
		}
		return MergeResult{Outcome: MergeReplaced, Streams: s.Streams()}
	}
	res := MergeResult{Outcome: MergeUnion}
	next := s.version + 1
	for k, o := range other.sets {
		e := s.sets[k]
		if e == nil {
			e = &originSet{acked: ackset.New(0)}
		}
		n := union(e.acked, o.acked)
		if n == 0 {
			continue
		}
		e.changed = next
		s.sets[k] = e
		res.Streams = append(res.Streams, k)
		res.Newly = satAdd(res.Newly, n)
	}
	if len(res.Streams) > 0 {
		s.version = next
		slices.SortFunc(res.Streams, OriginStream.compare)
	}
	return res
}

// union adds every sequence of o to s and returns how many were new.
func union(s, o *ackset.Set) int {
	n := s.AckUpTo(o.MarkDelete())
	for _, r := range o.Ranges() {
		n = satAdd(n, s.AckRange(r[0], r[1]))
	}
	return n
}

func satAdd(a, b int) int {
	if a > int(^uint(0)>>1)-b {
		return int(^uint(0) >> 1)
	}
	return a + b
}

// Delta returns what a remote that has merged this set as of version since
// lacks: a set with the same epoch and deletion and only the origin
// streams that changed after since (every stream, when the epoch changed
// after since). Merging it into that remote has the same effect as
// merging the whole set. Delta(0) is the whole set. The result is
// independent of s; its Version is that of a decoded set.
func (s *SubSet) Delta(since uint64) *SubSet {
	d := &SubSet{epoch: s.epoch, deleted: s.deleted, sets: map[OriginStream]*originSet{}}
	for k, e := range s.sets {
		if e.changed > since {
			d.sets[k] = &originSet{acked: e.acked.Clone()}
		}
	}
	d.settle()
	return d
}

// Clone returns an independent copy of s, Version included.
func (s *SubSet) Clone() *SubSet {
	c := *s
	c.sets = make(map[OriginStream]*originSet, len(s.sets))
	for k, e := range s.sets {
		c.sets[k] = &originSet{acked: e.acked.Clone(), changed: e.changed}
	}
	return &c
}

// Equal reports whether s and t hold the same value: epoch, deletion and
// every origin stream's set (versions are ignored).
func (s *SubSet) Equal(t *SubSet) bool {
	if s.epoch != t.epoch || s.deleted != t.deleted || len(s.sets) != len(t.sets) {
		return false
	}
	for k, e := range s.sets {
		f := t.sets[k]
		if f == nil || e.acked.MarkDelete() != f.acked.MarkDelete() || !slices.Equal(e.acked.Ranges(), f.acked.Ranges()) {
			return false
		}
	}
	return true
}

// String formats s for logs and tests:
// "epoch 0 {us/u1: 10 [12-14], eu/e1: 0 [3]}" ("deleted" after the epoch).
func (s *SubSet) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %s", s.epoch)
	if s.deleted {
		b.WriteString(" deleted")
	}
	b.WriteString(" {")
	for i, k := range s.Streams() {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s", k, s.sets[k].acked)
	}
	b.WriteByte('}')
	return b.String()
}

// settle gives a set built from a decoded or shipped value its version:
// 0 when it is the zero value (nothing to ship), else 1 with every part
// changed at 1 (so Delta(0) is the whole set).
func (s *SubSet) settle() {
	if s.epoch == (Epoch{}) && !s.deleted && len(s.sets) == 0 {
		s.version, s.epochVersion = 0, 0
		return
	}
	s.version, s.epochVersion = 1, 1
	for _, e := range s.sets {
		e.changed = 1
	}
}
