package core

import (
	"fmt"
	"slices"
)

// ReadKind classifies a bookie's answer to a recovery read.
type ReadKind int

// The read answers. The driver maps: the entry → Found; CODE_NO_ENTRY or
// CODE_NO_LEDGER → Absent; anything else (timeout, unreachable,
// CODE_WRONG_INSTANCE, CODE_CORRUPT, ...) → Unknown. A wiped bookie answers
// wrong-instance, never "absent", so a lost copy is never taken as proof
// that an entry was not acknowledged.
const (
	ReadFound ReadKind = iota + 1
	ReadAbsent
	ReadUnknown
)

func (k ReadKind) String() string {
	switch k {
	case ReadFound:
		return "found"
	case ReadAbsent:
		return "absent"
	case ReadUnknown:
		return "unknown"
	}
	return fmt.Sprintf("ReadKind(%d)", int(k))
}

// ReadOutcome is one bookie's answer for one entry.
type ReadOutcome struct {
	Kind ReadKind
	// Payload (Found) is the entry as the writer gave it; a rewrite
	// sends it back unchanged.
	Payload []byte
	// Length (Found) is the ledger's length through the entry, as the
	// writer stored it with the entry (Send.Length).
	Length int64
}

// Found is the answer "the bookie has the entry".
func Found(payload []byte, length int64) ReadOutcome {
	return ReadOutcome{Kind: ReadFound, Payload: payload, Length: length}
}

// Absent is the answer "the bookie does not have the entry".
func Absent() ReadOutcome { return ReadOutcome{Kind: ReadAbsent} }

// Unknown is the answer "no usable answer" (error, timeout, other instance).
func Unknown() ReadOutcome { return ReadOutcome{Kind: ReadUnknown} }

// FenceRequest asks a bookie of the last segment to fence the ledger and
// return its LAC (bookie.v1 Fence, with the ledger's master key).
type FenceRequest struct {
	Bookie   BookieID
	Instance string
}

// ReadRequest is a recovery read of one entry (bookie.v1 Read with the
// fence flag and the master key: the bookie fences before reading).
type ReadRequest struct {
	Bookie   BookieID
	Instance string
	Entry    int64
	Fence    bool // always true: every recovery read fences
}

// RewriteRequest is a recovery add (bookie.v1 AddEntry with recovery set,
// accepted on a fenced ledger) of a recovered entry to one bookie of its
// write set.
type RewriteRequest struct {
	Bookie   BookieID
	Instance string
	Entry    int64
	LAC      int64 // below Entry: the recovery's confirmed point
	Length   int64 // as read
	Payload  []byte
}

// RecoveryReady is what the Recovery wants done now. Take it with
// Recovery.Ready, call Recovery.Advance(rd) before feeding any input, then
// carry it out; answer every request (a timeout is FenceFailed, Unknown or
// RewriteFailed).
type RecoveryReady struct {
	Fences   []FenceRequest
	Reads    []ReadRequest
	Rewrites []RewriteRequest
	// Close, when set, ends recovery: CAS it (state CLOSED, LastEntryID,
	// Length) requiring the stored version to equal Close.Version. If the
	// CAS fails the ledger was closed by another recoverer: read it again.
	Close *Metadata
	// Err, when set, ends this Recovery without a decision; it wraps
	// ErrRetry. The ledger stays IN_RECOVERY; start a new Recovery from
	// fresh metadata after a back-off.
	Err error

	nFences, nReads, nRewrites int
	closeShown, errShown       bool
}

// RecoveryConfig tunes a Recovery.
type RecoveryConfig struct {
	// ReadAhead is how many entries past the last decided one are read
	// at once (pipelining). Default 8; at least 1. More overlaps round
	// trips; entries read past the end are wasted reads.
	ReadAhead int
}

// DefaultRecoveryConfig is ReadAhead 8.
func DefaultRecoveryConfig() RecoveryConfig { return RecoveryConfig{ReadAhead: 8} }

type recoveryPhase int

const (
	phaseFencing recoveryPhase = iota
	phaseReading
	phaseDone
	phaseFailed
)

func (p recoveryPhase) String() string {
	return [...]string{"fencing", "reading", "done", "retry"}[p]
}

// entryRead gathers the answers for one entry from its write set.
type entryRead struct {
	bookies []member
	answers map[BookieID]ReadKind
	found   *ReadOutcome
	absent  int
}

func newEntryRead(ws []member) *entryRead {
	return &entryRead{bookies: ws, answers: map[BookieID]ReadKind{}}
}

// record notes b's answer; false if b is not of the write set or answered already.
func (er *entryRead) record(b BookieID, out ReadOutcome) bool {
	if _, dup := er.answers[b]; dup || !slices.ContainsFunc(er.bookies, func(m member) bool { return m.id == b }) {
		return false
	}
	er.answers[b] = out.Kind
	switch out.Kind {
	case ReadFound:
		if er.found == nil {
			o := out
			er.found = &o
		}
	case ReadAbsent:
		er.absent++
	}
	return true
}

// rewrite tracks a recovered entry's rewrites.
type rewrite struct {
	length int64
	acks   map[BookieID]bool
	fails  map[BookieID]bool
	ws     []member
}

// Recovery decides where a ledger ends when taking it over (BookKeeper's
// ledger recovery: LedgerRecoveryOp with its fencing ReadLastConfirmedOp;
// ARCHITECTURE §2 steps 2–4). It does no I/O and is not safe for
// concurrent use.
//
// Rules: only the last segment is considered. Its bookies are fenced;
// once every write set has Qw−Qa+1 fenced bookies (no Qa bookies of any
// write set can still accept the old writer's adds) it reads forward
// from base+1, base = max(highest LAC the fences reported, the segment's
// first entry − 1): entries up to base are known complete. An entry found
// on any bookie is recovered: rewritten to its whole write set and counted
// once Qa bookies acknowledged the rewrite. The first entry that, once
// every bookie of its write set answered, is found nowhere and reported
// absent by Qw−Qa+1 of them ends the ledger. Anything
// undecidable (fencing incomplete once every fence answered, an entry with
// all answers in and neither, the entry at base found nowhere, more than
// Qw−Qa rewrites of an entry failing) ends the Recovery with ErrRetry,
// never with a short close. The ledger's length is the Length stored with
// its last entry (read from entry base when nothing past it is found).
type Recovery struct {
	md        Metadata
	seg       Segment // the last segment
	cfg       RecoveryConfig
	phase     recoveryPhase
	started   bool              // reading started: base is set
	answered  map[BookieID]bool // fence answered (either way)
	fenced    map[BookieID]bool // fenced: fence or a fenced read answered
	maxLAC    int64
	base      int64      // entries ≤ base are known complete
	baseRead  *entryRead // reading entry base for its length; nil once known (or base < 0)
	baseLen   int64
	first     int64 // first undecided entry
	reads     map[int64]*entryRead
	issued    int64 // highest entry whose reads were queued
	stop      int64 // first missing entry; NoEntry until decided
	rewrites  map[int64]*rewrite
	confirmed int64 // entries ≤ confirmed are recovered and rewritten at quorum
	confLen   int64 // ledger length through confirmed (when > base)
	fences    []FenceRequest
	queuedR   []ReadRequest
	queuedW   []RewriteRequest
	result    *Metadata
	err       error
	shown     bool // result or err handed out
}

// NewRecovery starts recovering md, which must be valid and IN_RECOVERY
// (see BeginRecovery). Ready then asks to fence every bookie of the last
// segment.
func NewRecovery(md Metadata, cfg RecoveryConfig) (*Recovery, error) {
	if err := md.Validate(); err != nil {
		return nil, err
	}
	if md.State != StateInRecovery {
		return nil, fmt.Errorf("%w: recovery needs an IN_RECOVERY ledger, not %s", ErrInvalidMetadata, md.State)
	}
	if cfg.ReadAhead <= 0 {
		cfg.ReadAhead = DefaultRecoveryConfig().ReadAhead
	}
	r := &Recovery{
		md: md.Clone(), cfg: cfg, answered: map[BookieID]bool{}, fenced: map[BookieID]bool{},
		maxLAC: NoEntry, stop: NoEntry, reads: map[int64]*entryRead{}, rewrites: map[int64]*rewrite{},
	}
	r.seg = r.md.Segments[len(r.md.Segments)-1]
	for i, b := range r.seg.Ensemble {
		r.fences = append(r.fences, FenceRequest{Bookie: b, Instance: r.seg.Instance(i)})
	}
	return r, nil
}

// Fenced records that bookie b fenced the ledger and reported lac.
func (r *Recovery) Fenced(b BookieID, lac int64) {
	if r.phase > phaseReading || !slices.Contains(r.seg.Ensemble, b) || r.answered[b] {
		return
	}
	r.answered[b], r.fenced[b] = true, true
	if r.phase == phaseFencing {
		r.maxLAC = max(r.maxLAC, lac)
		r.checkFencing()
	}
}

// FenceFailed records that fencing bookie b failed (unreachable, timeout,
// other instance, ...).
func (r *Recovery) FenceFailed(b BookieID) {
	if r.phase > phaseReading || !slices.Contains(r.seg.Ensemble, b) || r.answered[b] {
		return
	}
	r.answered[b] = true
	if r.phase == phaseFencing {
		r.checkFencing()
	}
}

// fenceCovered reports whether every write set of seg has at least
// Qw−Qa+1 fenced bookies, so fewer than Qa of any write set can still
// accept the old writer's adds and it can complete no further entry
// (BookKeeper's ensemble coverage check for recovery). Requiring
// E−Qa+1 fenced bookies overall would suffice too, but asks more than
// needed when Qw < E.
func fenceCovered(seg Segment, qw, qa int, fenced map[BookieID]bool) bool {
	e := len(seg.Ensemble)
	for start := range e {
		n := 0
		for _, i := range WriteSet(int64(start), e, qw) {
			if fenced[seg.Ensemble[i]] {
				n++
			}
		}
		if n < qw-qa+1 {
			return false
		}
	}
	return true
}

func (r *Recovery) checkFencing() {
	switch {
	case fenceCovered(r.seg, r.md.WriteQuorum, r.md.AckQuorum, r.fenced):
		r.startReading()
	case len(r.answered) == len(r.seg.Ensemble):
		r.fail("fenced %d of %d bookies: every write set needs %d fenced", len(r.fenced), len(r.seg.Ensemble),
			r.md.WriteQuorum-r.md.AckQuorum+1)
	}
}

func (r *Recovery) startReading() {
	r.phase, r.started = phaseReading, true
	r.base = max(r.maxLAC, r.seg.FirstEntry-1)
	r.first, r.issued, r.confirmed = r.base+1, r.base, r.base
	if r.base >= 0 {
		ws := r.md.writeSetOf(r.md.SegmentFor(r.base), r.base)
		r.baseRead = newEntryRead(ws)
		r.queueReads(r.base, ws)
	}
	r.fill()
}

func (r *Recovery) queueReads(entry int64, ws []member) {
	for _, m := range ws {
		r.queuedR = append(r.queuedR, ReadRequest{Bookie: m.id, Instance: m.instance, Entry: entry, Fence: true})
	}
}

// fill issues reads up to ReadAhead entries from the first undecided one.
func (r *Recovery) fill() {
	for r.stop == NoEntry && r.issued < r.first+int64(r.cfg.ReadAhead)-1 {
		r.issued++
		ws := r.md.writeSetOf(r.seg, r.issued)
		r.reads[r.issued] = newEntryRead(ws)
		r.queueReads(r.issued, ws)
	}
}

// ReadResult records bookie b's answer to the recovery read of entry.
func (r *Recovery) ReadResult(b BookieID, entry int64, out ReadOutcome) {
	if r.phase != phaseReading {
		return
	}
	if out.Kind != ReadUnknown && slices.Contains(r.seg.Ensemble, b) {
		r.fenced[b] = true // a fenced read answered: b is fenced
	}
	if entry == r.base && r.baseRead != nil {
		if !r.baseRead.record(b, out) {
			return
		}
		if f := r.baseRead.found; f != nil {
			r.baseLen, r.baseRead = f.Length, nil
		} else if len(r.baseRead.answers) == len(r.baseRead.bookies) {
			r.fail("entry %d (known complete) found on no bookie of its write set", r.base)
			return
		}
		r.maybeDone()
		return
	}
	if er := r.reads[entry]; er == nil || !er.record(b, out) {
		return
	}
	r.decide()
}

// decide settles entries in order from the first undecided one.
func (r *Recovery) decide() {
	qw, qa := r.md.WriteQuorum, r.md.AckQuorum
	for r.stop == NoEntry {
		er := r.reads[r.first]
		switch {
		case er.found != nil:
			r.recover(r.first, *er.found, er.bookies)
		case len(er.answers) < len(er.bookies):
			return // a missing decision waits for every answer: a copy anywhere wins
		case er.absent >= qw-qa+1:
			r.stop = r.first
			r.reads = map[int64]*entryRead{}
			r.maybeDone()
			return
		default:
			r.fail("entry %d: %d of %d bookies absent, %d unknown; %d absent are needed to end the ledger there",
				r.first, er.absent, qw, qw-er.absent, qw-qa+1)
			return
		}
		delete(r.reads, r.first)
		r.first++
		r.fill()
	}
}

// recover queues the rewrite of a found entry to its whole write set.
func (r *Recovery) recover(entry int64, out ReadOutcome, ws []member) {
	r.rewrites[entry] = &rewrite{length: out.Length, acks: map[BookieID]bool{}, fails: map[BookieID]bool{}, ws: ws}
	for _, m := range ws {
		r.queuedW = append(r.queuedW, RewriteRequest{Bookie: m.id, Instance: m.instance, Entry: entry,
			Length: out.Length, Payload: out.Payload})
	}
}

// RewriteAcked records that bookie b stored the rewrite of entry.
func (r *Recovery) RewriteAcked(b BookieID, entry int64) {
	rw := r.rewrite(b, entry)
	if r.phase != phaseReading || rw == nil {
		return
	}
	rw.acks[b] = true
	for {
		next := r.rewrites[r.confirmed+1]
		if next == nil || len(next.acks) < r.md.AckQuorum {
			break
		}
		r.confirmed++
		r.confLen = next.length
		delete(r.rewrites, r.confirmed)
	}
	r.maybeDone()
}

// RewriteFailed records that the rewrite of entry to bookie b failed.
func (r *Recovery) RewriteFailed(b BookieID, entry int64) {
	rw := r.rewrite(b, entry)
	if r.phase != phaseReading || rw == nil {
		return
	}
	rw.fails[b] = true
	if q := r.md.WriteQuorum - r.md.AckQuorum; len(rw.fails) > q {
		r.fail("rewrite of entry %d failed on %d of its %d bookies (at most %d may)", entry, len(rw.fails), len(rw.ws), q)
	}
}

// rewrite is entry's rewrite if b is of its write set and has not answered.
func (r *Recovery) rewrite(b BookieID, entry int64) *rewrite {
	rw := r.rewrites[entry]
	if rw == nil || rw.acks[b] || rw.fails[b] || !slices.ContainsFunc(rw.ws, func(m member) bool { return m.id == b }) {
		return nil
	}
	return rw
}

func (r *Recovery) maybeDone() {
	if r.phase != phaseReading || r.stop == NoEntry || r.baseRead != nil || r.confirmed != r.stop-1 {
		return
	}
	md := r.md.Clone()
	md.State, md.LastEntryID, md.Length = StateClosed, r.stop-1, r.baseLen
	if r.stop-1 > r.base {
		md.Length = r.confLen
	}
	r.result, r.phase = &md, phaseDone
	r.clearQueues()
}

func (r *Recovery) fail(format string, args ...any) {
	r.err = fmt.Errorf("%w: ledger %d: "+format, append([]any{ErrRetry, r.md.LedgerID}, args...)...)
	r.phase = phaseFailed
	r.clearQueues()
}

func (r *Recovery) clearQueues() {
	r.fences, r.queuedR, r.queuedW = nil, nil, nil
}

// Result is the closing metadata once recovery decided (ok true).
func (r *Recovery) Result() (Metadata, bool) {
	if r.result == nil {
		return Metadata{}, false
	}
	return r.result.Clone(), true
}

// Err is the ErrRetry-wrapping error that ended the Recovery, or nil.
func (r *Recovery) Err() error { return r.err }

// HasReady reports whether Ready has anything new.
func (r *Recovery) HasReady() bool {
	return len(r.fences) > 0 || len(r.queuedR) > 0 || len(r.queuedW) > 0 ||
		((r.result != nil || r.err != nil) && !r.shown)
}

// Ready is what to do now; it changes nothing (Advance does).
func (r *Recovery) Ready() RecoveryReady {
	rd := RecoveryReady{
		Fences: slices.Clone(r.fences), Reads: slices.Clone(r.queuedR),
		nFences: len(r.fences), nReads: len(r.queuedR), nRewrites: len(r.queuedW),
	}
	for _, w := range r.queuedW {
		w.LAC = min(r.confirmed, w.Entry-1)
		rd.Rewrites = append(rd.Rewrites, w)
	}
	if !r.shown && r.result != nil {
		c := r.result.Clone()
		rd.Close, rd.closeShown = &c, true
	}
	if !r.shown && r.err != nil {
		rd.Err, rd.errShown = r.err, true
	}
	return rd
}

// Advance marks rd, from the latest Ready, as handed to the driver.
func (r *Recovery) Advance(rd RecoveryReady) {
	r.fences = r.fences[min(rd.nFences, len(r.fences)):]
	r.queuedR = r.queuedR[min(rd.nReads, len(r.queuedR)):]
	r.queuedW = r.queuedW[min(rd.nRewrites, len(r.queuedW)):]
	if rd.closeShown || rd.errShown {
		r.shown = true
	}
}
