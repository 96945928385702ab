package core

import (
	"errors"
	"fmt"
	"slices"
)

// BookieID names a bookie as the topology and etcd do ("k1"); ensembles
// never name addresses.
type BookieID string

// NoEntry is the id of "no entry": the LAC of a ledger without a confirmed
// entry and the LastEntryID of an empty or unclosed ledger (BookKeeper's
// -1; the bookie's storage.NoEntry).
const NoEntry int64 = -1

// State is the ledger's lifecycle state in its metadata.
type State int

// The ledger states (ARCHITECTURE §2). Only the writer writes an OPEN
// ledger; recovery moves it OPEN → IN_RECOVERY → CLOSED; Writer.Close
// moves it OPEN → CLOSED.
const (
	StateOpen State = iota + 1
	StateInRecovery
	StateClosed
)

var stateNames = map[State]string{StateOpen: "OPEN", StateInRecovery: "IN_RECOVERY", StateClosed: "CLOSED"}

func (s State) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// MarshalText writes the state as in etcd: OPEN, IN_RECOVERY, CLOSED.
func (s State) MarshalText() ([]byte, error) {
	if _, ok := stateNames[s]; !ok {
		return nil, fmt.Errorf("%w: state %d", ErrInvalidMetadata, int(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads OPEN, IN_RECOVERY or CLOSED.
func (s *State) UnmarshalText(b []byte) error {
	for st, n := range stateNames {
		if n == string(b) {
			*s = st
			return nil
		}
	}
	return fmt.Errorf("%w: state %q", ErrInvalidMetadata, b)
}

// Segment is one ensemble of the ledger: entries from FirstEntry up to the
// next segment's FirstEntry are striped over Ensemble (BookKeeper's
// ensembles map, keyed by first entry).
type Segment struct {
	FirstEntry int64      `json:"first_entry"`
	Ensemble   []BookieID `json:"ensemble"`
	// Instances[i] is the instance UUID of Ensemble[i] when it joined the
	// segment (from its cookie), so that a bookie whose disk was wiped is
	// recognised as another instance (requests name it; it answers
	// wrong-instance). Empty, or exactly one per ensemble member.
	Instances []string `json:"instances,omitempty"`
}

// Instance is the recorded instance of Ensemble[i] ("" if none recorded).
func (s Segment) Instance(i int) string {
	if i < len(s.Instances) {
		return s.Instances[i]
	}
	return ""
}

func (s Segment) clone() Segment {
	s.Ensemble = slices.Clone(s.Ensemble)
	if len(s.Instances) == 0 {
		s.Instances = nil
	} else {
		s.Instances = slices.Clone(s.Instances)
	}
	return s
}

func (s Segment) equal(o Segment) bool {
	if s.FirstEntry != o.FirstEntry || !slices.Equal(s.Ensemble, o.Ensemble) {
		return false
	}
	for i := range max(len(s.Instances), len(o.Instances)) {
		if s.Instance(i) != o.Instance(i) {
			return false
		}
	}
	return true
}

// Metadata is a ledger's record as the driver stores it in etcd (JSON,
// snake_case), plus the etcd version the holder last saw.
type Metadata struct {
	LedgerID int64 `json:"ledger_id"`
	// EnsembleSize E, WriteQuorum Qw, AckQuorum Qa: E ≥ Qw ≥ Qa ≥ 1.
	EnsembleSize int   `json:"ensemble_size"`
	WriteQuorum  int   `json:"write_quorum"`
	AckQuorum    int   `json:"ack_quorum"`
	State        State `json:"state"`
	// LastEntryID is the last entry of a CLOSED ledger (NoEntry if empty);
	// NoEntry while OPEN or IN_RECOVERY.
	LastEntryID int64 `json:"last_entry_id"`
	// Length is the payload bytes of entries 0..LastEntryID once CLOSED;
	// 0 before.
	Length int64 `json:"length"`
	// DigestType names the entry checksum the driver frames entries with
	// (e.g. "crc32c"); the core does not interpret it.
	DigestType string `json:"digest_type,omitempty"`
	// MasterKey authorises adds and fences on the bookies (required:
	// the bookie protocol refuses an empty key).
	MasterKey []byte `json:"master_key"`
	// Segments, by increasing FirstEntry; the first starts at entry 0.
	Segments []Segment `json:"segments"`
	// FencedSegment is set by recovery when it changes the ensemble (a
	// rewrite could not reach Qa bookies): the writer's last segment as
	// it was when the ledger went IN_RECOVERY. Recovery fences and reads
	// it to decide where the ledger ends, whatever segments it appended
	// (or put in its place) for its rewrites; readers use Segments only.
	// Nil until then; never set on an OPEN ledger.
	FencedSegment *Segment `json:"fenced_segment,omitempty"`
	// Version is the etcd mod revision of the record as last read or
	// written by its holder: every CAS compares it. Not part of the value.
	Version int64 `json:"-"`
}

// Clone is a deep copy.
func (m Metadata) Clone() Metadata {
	m.MasterKey = slices.Clone(m.MasterKey)
	segs := make([]Segment, len(m.Segments))
	for i, s := range m.Segments {
		segs[i] = s.clone()
	}
	m.Segments = segs
	if m.FencedSegment != nil {
		f := m.FencedSegment.clone()
		m.FencedSegment = &f
	}
	return m
}

// sameRecord reports whether m and o hold the same value, Version aside.
func (m *Metadata) sameRecord(o *Metadata) bool {
	if m.LedgerID != o.LedgerID || m.EnsembleSize != o.EnsembleSize || m.WriteQuorum != o.WriteQuorum ||
		m.AckQuorum != o.AckQuorum || m.State != o.State || m.LastEntryID != o.LastEntryID ||
		m.Length != o.Length || m.DigestType != o.DigestType || string(m.MasterKey) != string(o.MasterKey) ||
		len(m.Segments) != len(o.Segments) || (m.FencedSegment == nil) != (o.FencedSegment == nil) ||
		(m.FencedSegment != nil && !m.FencedSegment.equal(*o.FencedSegment)) {
		return false
	}
	for i := range m.Segments {
		if !m.Segments[i].equal(o.Segments[i]) {
			return false
		}
	}
	return true
}

// Validate returns every problem found (joined), each wrapping
// ErrInvalidMetadata; nil if m is well formed.
func (m *Metadata) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidMetadata}, args...)...))
	}
	if m.LedgerID < 0 {
		bad("ledger id %d is negative", m.LedgerID)
	}
	if !(m.EnsembleSize >= m.WriteQuorum && m.WriteQuorum >= m.AckQuorum && m.AckQuorum >= 1) {
		bad("need E ≥ Qw ≥ Qa ≥ 1, have E=%d Qw=%d Qa=%d", m.EnsembleSize, m.WriteQuorum, m.AckQuorum)
	}
	if _, ok := stateNames[m.State]; !ok {
		bad("unknown state %d", int(m.State))
	}
	switch {
	case m.LastEntryID < NoEntry:
		bad("last entry id %d below %d", m.LastEntryID, NoEntry)
	case m.State != StateClosed && (m.LastEntryID != NoEntry || m.Length != 0):
		bad("%s ledger with last entry %d and length %d (only a closed ledger has them)", m.State, m.LastEntryID, m.Length)
	}
	if m.Length < 0 {
		bad("length %d is negative", m.Length)
	}
	if len(m.MasterKey) == 0 {
		bad("empty master key")
	}
	if len(m.Segments) == 0 {
		bad("no segments")
	}
	checkSegment := func(name string, s Segment) {
		if len(s.Ensemble) != m.EnsembleSize {
			bad("%s has %d bookies, want %d", name, len(s.Ensemble), m.EnsembleSize)
		}
		if len(s.Instances) != 0 && len(s.Instances) != len(s.Ensemble) {
			bad("%s has %d instances for %d bookies", name, len(s.Instances), len(s.Ensemble))
		}
		for j, b := range s.Ensemble {
			if b == "" {
				bad("%s names an empty bookie id", name)
			} else if slices.Contains(s.Ensemble[:j], b) {
				bad("%s names bookie %s twice", name, b)
			}
		}
	}
	for i, s := range m.Segments {
		switch {
		case i == 0 && s.FirstEntry != 0:
			bad("first segment starts at entry %d, not 0", s.FirstEntry)
		case i > 0 && s.FirstEntry <= m.Segments[i-1].FirstEntry:
			bad("segment %d starts at entry %d, not after %d", i, s.FirstEntry, m.Segments[i-1].FirstEntry)
		}
		checkSegment(fmt.Sprintf("segment %d", i), s)
	}
	if f := m.FencedSegment; f != nil {
		switch {
		case m.State == StateOpen:
			bad("OPEN ledger with a fenced segment (only recovery sets one)")
		case f.FirstEntry < 0 || (len(m.Segments) > 0 && f.FirstEntry > m.Segments[len(m.Segments)-1].FirstEntry):
			bad("fenced segment starts at entry %d, outside the segments", f.FirstEntry)
		}
		checkSegment("fenced segment", *f)
	}
	return errors.Join(errs...)
}

// ConfirmedFloor is the last entry the metadata alone proves confirmed
// (NoEntry if none), what a reader may read without asking the bookies:
// LastEntryID when CLOSED; otherwise the entry before the last segment
// the writer made (the writer starts a segment after its LAC), which for
// a ledger recovery has changed the ensemble of (FencedSegment set) is
// the entry before the first segment, from the fenced one's first entry
// on, that differs from it. Entries recovery confirmed before that are on
// Qa bookies of the fenced write sets, where every later recovery finds
// them; entries it moved to its own segments may still be dropped by a
// later recovery that decides on the fenced segment alone.
func (m Metadata) ConfirmedFloor() int64 {
	if m.State == StateClosed {
		return m.LastEntryID
	}
	if len(m.Segments) == 0 {
		return NoEntry
	}
	if f := m.FencedSegment; f != nil {
		for _, s := range m.Segments {
			if s.FirstEntry >= f.FirstEntry && !s.equal(*f) {
				return s.FirstEntry - 1
			}
		}
		return f.FirstEntry - 1
	}
	return m.Segments[len(m.Segments)-1].FirstEntry - 1
}

// withReplacements is last with the bookies of chosen (failed bookie →
// replacement) replaced, as a segment starting at first. Instances are
// recorded when last or a replacement has one.
func withReplacements(last Segment, first int64, chosen map[BookieID]member) Segment {
	seg := Segment{FirstEntry: first, Ensemble: slices.Clone(last.Ensemble)}
	withInstances := len(last.Instances) > 0
	for _, m := range chosen {
		withInstances = withInstances || m.instance != ""
	}
	if withInstances {
		seg.Instances = make([]string, len(seg.Ensemble))
		for i := range seg.Instances {
			seg.Instances[i] = last.Instance(i)
		}
	}
	for b, m := range chosen {
		i := slices.Index(seg.Ensemble, b)
		seg.Ensemble[i] = m.id
		if withInstances {
			seg.Instances[i] = m.instance
		}
	}
	return seg
}

// setLastSegment appends seg, or replaces the last segment when it
// starts at the same entry (BookKeeper's first-entry-keyed ensembles).
func (m *Metadata) setLastSegment(seg Segment) {
	if last := &m.Segments[len(m.Segments)-1]; last.FirstEntry == seg.FirstEntry {
		*last = seg
	} else {
		m.Segments = append(m.Segments, seg)
	}
}

// WriteSet is the ensemble indexes entry is written to: (entry+k) mod
// ensembleSize for k = 0..writeQuorum-1 (BookKeeper's round-robin
// distribution schedule). Nil for arguments that break
// ensembleSize ≥ writeQuorum ≥ 1 or entry ≥ 0.
func WriteSet(entry int64, ensembleSize, writeQuorum int) []int {
	if entry < 0 || writeQuorum < 1 || ensembleSize < writeQuorum {
		return nil
	}
	ws := make([]int, writeQuorum)
	first := int(entry % int64(ensembleSize))
	for k := range ws {
		ws[k] = (first + k) % ensembleSize
	}
	return ws
}

// segmentIndex is the index of the segment holding entry (the last one
// starting at or before it); 0 for entries before every segment.
func (m *Metadata) segmentIndex(entry int64) int {
	i, found := slices.BinarySearchFunc(m.Segments, entry, func(s Segment, e int64) int {
		switch {
		case s.FirstEntry < e:
			return -1
		case s.FirstEntry > e:
			return 1
		}
		return 0
	})
	if found {
		return i
	}
	return max(i-1, 0)
}

// SegmentFor is the segment holding entry: the last one whose FirstEntry
// ≤ entry. The zero Segment if m has none.
func (m *Metadata) SegmentFor(entry int64) Segment {
	if len(m.Segments) == 0 {
		return Segment{}
	}
	return m.Segments[m.segmentIndex(entry)]
}

// writeSetOf is entry's write set in seg as bookies and their instances.
func (m *Metadata) writeSetOf(seg Segment, entry int64) []member {
	var out []member
	for _, i := range WriteSet(entry, m.EnsembleSize, m.WriteQuorum) {
		out = append(out, member{id: seg.Ensemble[i], instance: seg.Instance(i)})
	}
	return out
}

// member is one bookie of an ensemble with its recorded instance.
type member struct {
	id       BookieID
	instance string
}

// BeginRecovery is the first step of taking a ledger over (BookKeeper's
// ledger recovery, ARCHITECTURE §2 step 1): for an OPEN ledger it returns
// the metadata with state IN_RECOVERY, which the driver must CAS at
// md.Version (the CAS also stops any ensemble change of the old writer);
// for a ledger already IN_RECOVERY (an earlier recoverer stopped or is
// still running) it returns md unchanged and no CAS is needed: recovering
// again is safe, as the close CAS lets one recoverer decide. A CLOSED
// ledger needs no recovery: ErrLedgerClosed.
func BeginRecovery(md Metadata) (Metadata, error) {
	if err := md.Validate(); err != nil {
		return Metadata{}, err
	}
	md = md.Clone()
	switch md.State {
	case StateClosed:
		return Metadata{}, fmt.Errorf("%w: ledger %d ends at entry %d", ErrLedgerClosed, md.LedgerID, md.LastEntryID)
	case StateOpen:
		md.State = StateInRecovery
	}
	return md, nil
}
