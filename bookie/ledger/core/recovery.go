package core

import (
	"fmt"
	"maps"
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
	// Replace are bookies that failed rewrites an entry cannot do
	// without: ask placement for a writable bookie not in
	// Recovery.Exclude and call Recovery.Replace, or
	// Recovery.ReplacementUnavailable if there is none. Each is reported
	// once; NeedReplacement lists those still waiting.
	Replace []BookieID
	// MetadataUpdate, when set, records an ensemble change of the
	// recovery: CAS it requiring state IN_RECOVERY at
	// MetadataUpdate.Version, then call MetadataCommitted or
	// MetadataConflict. The rewrites that need the new bookies follow
	// the commit.
	MetadataUpdate *Metadata
	// Close, when set, ends recovery: CAS it (state CLOSED, LastEntryID,
	// Length) requiring the stored version to equal Close.Version. If the
	// CAS fails the ledger was closed by another recoverer: read it again.
	Close *Metadata
	// Err, when set, ends this Recovery without a decision; it wraps
	// ErrRetry. The ledger stays IN_RECOVERY; start a new Recovery from
	// fresh metadata after a back-off.
	Err error

	nFences, nReads, nRewrites, nReplace int
	proposalSeq                          int
	closeShown, errShown                 bool
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

// entryRead gathers the answers for one entry: from its write set in the
// fenced segment (fws), which alone decide whether the writer may have
// completed it, and, for entry base (read only for its length), also
// from its write set where readers look for it, in case an earlier
// recovery moved it.
type entryRead struct {
	bookies []member // asked: fws and the others, each once
	fws     []BookieID
	answers map[BookieID]ReadKind
	found   *ReadOutcome
}

func newEntryRead(fws, others []member) *entryRead {
	er := &entryRead{answers: map[BookieID]ReadKind{}}
	for _, m := range slices.Concat(fws, others) {
		if !slices.ContainsFunc(er.bookies, func(o member) bool { return o.id == m.id }) {
			er.bookies = append(er.bookies, m)
		}
	}
	for _, m := range fws {
		er.fws = append(er.fws, m.id)
	}
	return er
}

// record notes b's answer; false if b is not asked or answered already.
func (er *entryRead) record(b BookieID, out ReadOutcome) bool {
	if _, dup := er.answers[b]; dup || !slices.ContainsFunc(er.bookies, func(m member) bool { return m.id == b }) {
		return false
	}
	er.answers[b] = out.Kind
	if out.Kind == ReadFound && er.found == nil {
		o := out
		er.found = &o
	}
	return true
}

// absent is how many bookies of ws answered absent.
func (er *entryRead) absent(ws []BookieID) int {
	n := 0
	for _, b := range ws {
		if er.answers[b] == ReadAbsent {
			n++
		}
	}
	return n
}

// rewrite tracks a recovered entry's rewrites to its write set where
// readers will look for it (ws, in the current metadata).
type rewrite struct {
	length  int64
	payload []byte
	ws      []member
	held    bool              // found during an ensemble change: sent once it commits
	sent    map[BookieID]bool // rewrites handed out, per bookie of ws
	acks    map[BookieID]bool
	fails   map[BookieID]bool
}

// recChange is an ensemble change of the recovery, from the first
// rewrite failure an entry cannot do without until its CAS answers.
type recChange struct {
	failed []BookieID          // bookies of the last segment to replace, in failure order
	chosen map[BookieID]member // failed bookie → its replacement
	first  int64               // the new segment's first entry (confirmed+1), fixed with prop
	prop   *Metadata           // the update, once every failed bookie has a replacement
	seq    int
	sent   bool // prop handed out: its CAS is in flight
}

// Recovery decides where a ledger ends when taking it over (BookKeeper's
// ledger recovery: LedgerRecoveryOp with its fencing ReadLastConfirmedOp;
// ARCHITECTURE §2 steps 2–4). It does no I/O and is not safe for
// concurrent use.
//
// Rules: only the fenced segment is considered for the decision: the
// writer's last segment (Metadata.FencedSegment once a recovery changed
// the ensemble, else the last segment). Its bookies are fenced; once
// every write set has Qw−Qa+1 fenced bookies (no Qa bookies of any write
// set can still accept the old writer's adds) it reads forward from
// base+1, base = max(highest LAC the fences reported, the segment's
// first entry − 1): entries up to base are known complete. An entry found
// on any bookie is recovered: rewritten to its whole write set where
// readers will look for it and counted once Qa bookies of that write set
// acknowledged the rewrite. The first entry that, once every bookie of its
// write set in the fenced segment answered, is found nowhere and reported
// absent by Qw−Qa+1 of them ends the ledger.
//
// When more than Qw−Qa bookies of a recovered entry's write set fail its
// rewrite, the recovery changes the ensemble as the writer does: Ready
// asks to replace them; the new segment starts at the first entry not yet
// confirmed (entries below stay where they are) and is recorded by a CAS
// requiring IN_RECOVERY; only then are the rewrites sent to the new
// bookies. The new bookies are never read for the decision, so their
// emptiness never passes for "absent". Rewrites carry base as LAC, not
// recovery's confirmed point (see published): another recovery may still
// decide on the fenced segment, where entries this one moved elsewhere
// may have fewer copies, or with other bookies unreachable; no reader may
// see entries past base before the close.
//
// Anything undecidable (fencing incomplete once every fence answered, an
// entry with all answers in and neither, the entry at base found nowhere,
// no replacement available, the ensemble change's CAS refused) ends the
// Recovery with ErrRetry, never with a short close. The ledger's length
// is the Length stored with its last entry (read from entry base when
// nothing past it is found).
type Recovery struct {
	md        Metadata // as committed: Version is the known revision
	seg       Segment  // the fenced segment
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
	change    *recChange
	dropped   map[BookieID]bool // bookies this recovery replaced: never chosen again
	seq       int
	fences    []FenceRequest
	queuedR   []ReadRequest
	queuedW   []RewriteRequest
	replace   []BookieID
	result    *Metadata
	err       error
	shown     bool // result or err handed out
}

// NewRecovery starts recovering md, which must be valid and IN_RECOVERY
// (see BeginRecovery). Ready then asks to fence every bookie of the
// fenced segment.
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
		dropped: map[BookieID]bool{},
	}
	if f := r.md.FencedSegment; f != nil {
		r.seg = f.clone()
	} else {
		r.seg = r.md.Segments[len(r.md.Segments)-1].clone()
	}
	for i, b := range r.seg.Ensemble {
		r.fences = append(r.fences, FenceRequest{Bookie: b, Instance: r.seg.Instance(i)})
	}
	return r, nil
}

// Metadata is the ledger's metadata as this recovery last committed it
// (with the ensemble changes it recorded).
func (r *Recovery) Metadata() Metadata { return r.md.Clone() }

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
		// Entry base is complete where readers look for it (in the
		// fenced segment or, moved by an earlier recovery, after it);
		// any copy gives its length.
		var fws []member
		if r.base >= r.seg.FirstEntry {
			fws = r.md.writeSetOf(r.seg, r.base)
		}
		r.baseRead = newEntryRead(fws, r.md.writeSetOf(r.md.SegmentFor(r.base), r.base))
		r.queueReads(r.base, r.baseRead.bookies)
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
		er := newEntryRead(r.md.writeSetOf(r.seg, r.issued), nil)
		r.reads[r.issued] = er
		r.queueReads(r.issued, er.bookies)
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
	q := r.md.WriteQuorum - r.md.AckQuorum + 1
	for r.stop == NoEntry {
		er := r.reads[r.first]
		switch {
		case er.found != nil:
			r.recover(r.first, *er.found)
		case len(er.answers) < len(er.bookies):
			return // a missing decision waits for every answer: a copy anywhere wins
		case er.absent(er.fws) >= q:
			r.stop = r.first
			r.reads = map[int64]*entryRead{}
			r.maybeDone()
			return
		default:
			r.fail("entry %d: %d of %d bookies absent, %d unknown; %d absent are needed to end the ledger there",
				r.first, er.absent(er.fws), len(er.fws), len(er.fws)-er.absent(er.fws), q)
			return
		}
		delete(r.reads, r.first)
		r.first++
		r.fill()
	}
}

// recover starts the rewrites of a found entry (held while an ensemble
// change is under way: its write set may change).
func (r *Recovery) recover(entry int64, out ReadOutcome) {
	rw := &rewrite{length: out.Length, payload: out.Payload, sent: map[BookieID]bool{}, acks: map[BookieID]bool{},
		fails: map[BookieID]bool{}}
	r.rewrites[entry] = rw
	if r.change != nil {
		rw.held = true
		return
	}
	r.sendRewrites(entry, rw)
}

// sendRewrites sets rw's write set from the current metadata and queues
// the rewrites to the bookies of it not yet asked.
func (r *Recovery) sendRewrites(entry int64, rw *rewrite) {
	rw.held = false
	rw.ws = r.md.writeSetOf(r.md.SegmentFor(entry), entry)
	for _, m := range rw.ws {
		if rw.sent[m.id] {
			continue
		}
		rw.sent[m.id] = true
		r.queuedW = append(r.queuedW, RewriteRequest{Bookie: m.id, Instance: m.instance, Entry: entry,
			Length: rw.length, Payload: rw.payload})
	}
}

// RewriteAcked records that bookie b stored the rewrite of entry.
func (r *Recovery) RewriteAcked(b BookieID, entry int64) {
	rw := r.rewrite(b, entry)
	if r.phase != phaseReading || rw == nil {
		return
	}
	rw.acks[b] = true
	r.advance()
	r.maybeDone()
}

// advance moves confirmed over the entries rewritten at quorum; not into
// the segment of an ensemble change being recorded.
func (r *Recovery) advance() {
	for {
		if c := r.change; c != nil && c.prop != nil && r.confirmed+1 >= c.first {
			return
		}
		next := r.rewrites[r.confirmed+1]
		if next == nil || next.held || len(next.acks) < r.md.AckQuorum {
			return
		}
		r.confirmed++
		r.confLen = next.length
		delete(r.rewrites, r.confirmed)
	}
}

// RewriteFailed records that the rewrite of entry to bookie b failed.
// When more than Qw−Qa bookies of its write set failed, the entry cannot
// reach Qa: its failed bookies are to be replaced.
func (r *Recovery) RewriteFailed(b BookieID, entry int64) {
	rw := r.rewrite(b, entry)
	if r.phase != phaseReading || rw == nil {
		return
	}
	rw.fails[b] = true
	r.checkFailures(rw)
}

func (r *Recovery) checkFailures(rw *rewrite) {
	if len(rw.fails) <= r.md.WriteQuorum-r.md.AckQuorum {
		return
	}
	var bs []BookieID
	for _, m := range rw.ws { // in write-set order, for determinism
		if rw.fails[m.id] {
			bs = append(bs, m.id)
		}
	}
	r.bookiesFailed(bs)
}

// bookiesFailed begins an ensemble change replacing bs, or folds them
// into the one under way. While its CAS is in flight nothing is folded
// in: failures are looked at again once it answers.
func (r *Recovery) bookiesFailed(bs []BookieID) {
	c := r.change
	if c == nil {
		c = &recChange{chosen: map[BookieID]member{}}
		r.change = c
	}
	if c.sent {
		return
	}
	tail := r.Exclude()
	for _, b := range bs {
		if slices.Contains(c.failed, b) || !slices.Contains(tail, b) {
			continue
		}
		c.failed = append(c.failed, b)
		c.prop = nil // it must now replace b too
		r.replace = append(r.replace, b)
	}
	r.maybePropose()
}

// NeedReplacement lists the failed bookies still without a replacement
// (for a driver whose placement failed and that tries again).
func (r *Recovery) NeedReplacement() []BookieID {
	var out []BookieID
	if c := r.change; c != nil && !c.sent && r.phase == phaseReading {
		for _, b := range c.failed {
			if _, ok := c.chosen[b]; !ok {
				out = append(out, b)
			}
		}
	}
	return out
}

// Exclude lists the bookies a replacement must not be: those of the
// segments holding entries not yet confirmed (the last one, and any
// before it a resumed recovery has yet to confirm again) and those this
// recovery replaced.
func (r *Recovery) Exclude() []BookieID {
	var out []BookieID
	for _, s := range r.md.Segments[r.md.segmentIndex(r.confirmed+1):] {
		for _, b := range s.Ensemble {
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	for _, b := range slices.Sorted(maps.Keys(r.dropped)) {
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// Replace sets repl (of instance) as the replacement of the failed bookie
// old. repl must not be one Exclude lists, nor replace another bookie:
// ErrBadReplacement.
func (r *Recovery) Replace(old, repl BookieID, instance string) error {
	c := r.change
	if r.phase != phaseReading || c == nil || c.sent || !slices.Contains(c.failed, old) {
		return fmt.Errorf("%w: bookie %s is not awaiting a replacement", ErrBadReplacement, old)
	}
	if _, ok := c.chosen[old]; ok {
		return fmt.Errorf("%w: bookie %s already has a replacement", ErrBadReplacement, old)
	}
	if ex := r.Exclude(); repl == "" || slices.Contains(ex, repl) {
		return fmt.Errorf("%w: %q is one of %v (in the ensemble or replaced)", ErrBadReplacement, repl, ex)
	}
	for _, m := range c.chosen {
		if m.id == repl {
			return fmt.Errorf("%w: %s already replaces another bookie", ErrBadReplacement, repl)
		}
	}
	c.chosen[old] = member{id: repl, instance: instance}
	r.maybePropose()
	return nil
}

// ReplacementUnavailable reports that no replacement could be found for
// b: the Recovery ends with ErrRetry (it never closes short instead).
func (r *Recovery) ReplacementUnavailable(b BookieID, reason error) {
	if r.phase != phaseReading || !slices.Contains(r.NeedReplacement(), b) {
		return
	}
	r.fail("no replacement for bookie %s: %v", b, reason)
}

// maybePropose builds the metadata update once every failed bookie has a
// replacement: from the first entry not yet confirmed on, the failed
// bookies are replaced, in a segment starting there (taking the place of
// one that starts there) and in every later one; entries below keep
// their segments. The fenced segment is recorded.
func (r *Recovery) maybePropose() {
	c := r.change
	if c == nil || c.sent || c.prop != nil || len(c.chosen) < len(c.failed) {
		return
	}
	md := r.md.Clone()
	c.first = r.confirmed + 1
	i := md.segmentIndex(c.first)
	segs := md.Segments[:i:i]
	for _, s := range md.Segments[i:] {
		chosen := map[BookieID]member{}
		for b, m := range c.chosen {
			if slices.Contains(s.Ensemble, b) {
				chosen[b] = m
			}
		}
		if len(chosen) == 0 {
			segs = append(segs, s)
			continue
		}
		if s.FirstEntry < c.first {
			segs = append(segs, s)
		}
		segs = append(segs, withReplacements(s, max(s.FirstEntry, c.first), chosen))
	}
	md.Segments = segs
	if md.FencedSegment == nil {
		f := r.seg.clone()
		md.FencedSegment = &f
	}
	r.seq++
	c.prop, c.seq = &md, r.seq
}

// MetadataCommitted reports that the update handed out in a Ready was
// stored; version is the record's new etcd revision. Every entry being
// rewritten gets its write set in the new metadata: answers of bookies
// still in it keep counting, the new bookies get the rewrite.
func (r *Recovery) MetadataCommitted(version int64) error {
	c := r.change
	if r.phase != phaseReading {
		return r.err
	}
	if c == nil || !c.sent {
		return ErrNoProposal
	}
	r.md = c.prop.Clone()
	r.md.Version = version
	r.change = nil
	for _, b := range c.failed {
		r.dropped[b] = true
	}
	entries := slices.Sorted(maps.Keys(r.rewrites))
	for _, e := range entries {
		rw := r.rewrites[e]
		ws := r.md.writeSetOf(r.md.SegmentFor(e), e)
		in := func(b BookieID) bool { return slices.ContainsFunc(ws, func(m member) bool { return m.id == b }) }
		maps.DeleteFunc(rw.acks, func(b BookieID, _ bool) bool { return !in(b) })
		maps.DeleteFunc(rw.fails, func(b BookieID, _ bool) bool { return !in(b) })
		maps.DeleteFunc(rw.sent, func(b BookieID, _ bool) bool { return !in(b) })
		r.sendRewrites(e, rw)
	}
	// Failures that arrived while the CAS was in flight.
	for _, e := range entries {
		if rw := r.rewrites[e]; rw != nil && r.phase == phaseReading {
			r.checkFailures(rw)
		}
	}
	r.advance()
	r.maybeDone()
	return nil
}

// MetadataConflict reports that the CAS of the update handed out in a
// Ready failed; current is the record as now stored. Another process
// recovered, closed or changed the ledger: this Recovery ends with
// ErrRetry (also wrapping ErrLedgerClosed when current is CLOSED); the
// driver reads the metadata again.
func (r *Recovery) MetadataConflict(current Metadata) error {
	c := r.change
	if r.phase != phaseReading {
		return r.err
	}
	if c == nil || !c.sent {
		return ErrNoProposal
	}
	r.change = nil
	if current.State == StateClosed {
		r.end(fmt.Errorf("%w: %w: ledger %d: closed by another process (version %d) during an ensemble change of recovery",
			ErrRetry, ErrLedgerClosed, r.md.LedgerID, current.Version))
		return nil
	}
	r.fail("ensemble change refused: the ledger is %s at version %d, not at %d", current.State, current.Version, r.md.Version)
	return nil
}

// rewrite is entry's rewrite if b is of its write set and has not answered.
func (r *Recovery) rewrite(b BookieID, entry int64) *rewrite {
	rw := r.rewrites[entry]
	if rw == nil || rw.held || rw.acks[b] || rw.fails[b] || !rw.sent[b] {
		return nil
	}
	return rw
}

func (r *Recovery) maybeDone() {
	if r.phase != phaseReading || r.stop == NoEntry || r.baseRead != nil || r.confirmed != r.stop-1 || r.change != nil {
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
	r.end(fmt.Errorf("%w: ledger %d: "+format, append([]any{ErrRetry, r.md.LedgerID}, args...)...))
}

func (r *Recovery) end(err error) {
	r.err = err
	r.phase = phaseFailed
	r.clearQueues()
}

func (r *Recovery) clearQueues() {
	r.fences, r.queuedR, r.queuedW, r.replace, r.change = nil, nil, nil, nil, nil
}

// published is the LAC rewrites carry: base, what the fences proved
// complete, never this recovery's confirmed point. Until this recovery's
// close wins its CAS, another recoverer (concurrent, or a later one if
// this one dies) may decide the ledger ends lower — it reads only the
// fenced segment, with its own faults — so a tailing reader must not
// learn of an entry past base from a rewrite; the close publishes the
// rest. (BookKeeper's recovery adds carry more, and a concurrent
// recovery's readers can see entries its rival's close then drops.)
func (r *Recovery) published() int64 {
	return min(r.confirmed, r.base)
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
	return len(r.fences) > 0 || len(r.queuedR) > 0 || len(r.queuedW) > 0 || len(r.replace) > 0 ||
		(r.change != nil && r.change.prop != nil && !r.change.sent) ||
		((r.result != nil || r.err != nil) && !r.shown)
}

// Ready is what to do now; it changes nothing (Advance does).
func (r *Recovery) Ready() RecoveryReady {
	rd := RecoveryReady{
		Fences: slices.Clone(r.fences), Reads: slices.Clone(r.queuedR), Replace: slices.Clone(r.replace),
		nFences: len(r.fences), nReads: len(r.queuedR), nRewrites: len(r.queuedW), nReplace: len(r.replace),
	}
	lac := r.published()
	for _, w := range r.queuedW {
		w.LAC = min(lac, w.Entry-1)
		rd.Rewrites = append(rd.Rewrites, w)
	}
	if c := r.change; c != nil && c.prop != nil && !c.sent {
		p := c.prop.Clone()
		rd.MetadataUpdate, rd.proposalSeq = &p, c.seq
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
	r.replace = r.replace[min(rd.nReplace, len(r.replace)):]
	if c := r.change; c != nil && rd.MetadataUpdate != nil && c.prop != nil && rd.proposalSeq == c.seq {
		c.sent = true
	}
	if rd.closeShown || rd.errShown {
		r.shown = true
	}
}
