package mledger

import (
	"fmt"
	"time"

	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/tenancy"
)

// core is the managed ledger's logical state machine: sequences, the
// publish checks, the subject index, the dedup window, the ledger list
// with per-ledger totals, and the retention arithmetic. It does no I/O,
// reads no clock (callers pass now), takes no locks and starts no
// goroutines: the driver (ML) feeds it and carries out what it decides.
//
// Sequences: messages first..conf.seq are confirmed and live;
// conf.seq+1..head.seq are appended but not yet confirmed. first never
// exceeds conf.seq+1.
//
// Origins (ARCHITECTURE §4) follow the same two views. Local messages
// (when region is set) get the local origin sequences head.origin+1, …;
// conf.origin is the last confirmed one. Replicated messages go through
// the receiver rule of the replicator core against recv, the high-water
// marks counting appended messages and accepted gap records; recvConf
// counts confirmed ones (and gap records once every message before them
// is confirmed): what the snapshot persists, so a new owner rebuilds
// them from it plus the replayed messages' origins.
type core struct {
	lim Limits
	// maxEntry is the largest message (EncodedSize) an entry can hold.
	maxEntry int

	first     uint64
	firstTime time.Time // time of message first, if known (zero otherwise)
	head      tip       // last appended (confirmed or not)
	conf      tip       // last confirmed

	pendingBytes int64 // sizes of appended, unconfirmed messages
	live         int64 // sizes of confirmed messages ≥ first (estimate: see trim)

	subjects subjectIndex
	dedup    dedupWindow
	// counted: the subject counts cover the messages from counted on;
	// counted ≤ first, and the messages in between are still to be
	// subtracted (forget*).
	counted uint64

	ledgers []*ledgerState

	// topic, region and incarnation identify local messages' origin
	// (region "": local messages get none).
	topic       tenancy.Name
	region      string
	incarnation string
	recv        *replicator.Receiver
	recvConf    *replicator.Receiver
	// recvSeq: per stream, the topic sequence of the message at recv's
	// mark, when it is a stored message (a duplicate's answer).
	recvSeq map[replicator.Stream]uint64
	// lost is the sum of recvConf's Lost over every stream.
	lost uint64
	// tierTrash are the tier copies (OffloadInfo.Base) of ledgers taken
	// out of the list, to delete (TopicMeta.TierTrash).
	tierTrash []string
}

// tip is one end of the sequence.
type tip struct {
	seq   uint64
	time  time.Time
	msgID string // its Nats-Msg-Id
	// origin is the last local origin sequence up to seq.
	origin uint64
}

// ledgerState is one ledger of the list. For the open ledger, Entries,
// Msgs, Bytes and the times count its confirmed entries and messages so
// far.
type ledgerState struct {
	LedgerInfo
	// trimmed is the (estimated) bytes of its messages below first:
	// exact once the whole ledger is below first.
	trimmed int64
	// subjects counts its confirmed messages ≥ counted per subject; nil
	// when unknown (a ledger written before this ownership, or replayed
	// from its middle).
	subjects map[string]uint64
}

func (l *ledgerState) last() uint64 { return l.FirstSeq + uint64(l.Msgs) - 1 }

// avg is its average message size.
func (l *ledgerState) avg() int64 {
	if l.Msgs <= 0 {
		return 0
	}
	return l.Bytes / l.Msgs
}

// msgInfo is what the core may learn about single messages: those from
// From() up (the driver's cache) have exact sizes and times.
type msgInfo interface {
	From() uint64
	Info(seq uint64) (size int64, t time.Time)
}

// noInfo knows no message.
type noInfo struct{}

func (noInfo) From() uint64                   { return ^uint64(0) }
func (noInfo) Info(uint64) (int64, time.Time) { return 0, time.Time{} }

func newCore(lim Limits, maxEntry int, first uint64) *core {
	lim = lim.withDefaults()
	first = max(first, 1)
	return &core{
		lim: lim, maxEntry: maxEntry, first: first,
		head: tip{seq: first - 1}, conf: tip{seq: first - 1},
		subjects: newSubjectIndex(), dedup: newDedupWindow(lim.DuplicateWindow),
		counted: first,
		recv:    newReceiver(), recvConf: newReceiver(), recvSeq: map[replicator.Stream]uint64{},
	}
}

func newReceiver() *replicator.Receiver {
	r, err := replicator.NewReceiver(replicator.ReceiverState{})
	if err != nil {
		panic(err) // the zero state is always valid
	}
	return r
}

// setOrigin names the topic and the local origin: region ("" for none)
// and the topic's incarnation.
func (c *core) setOrigin(topic tenancy.Name, region, incarnation string) {
	c.topic, c.region, c.incarnation = topic, region, incarnation
}

// isLocal reports whether o is a local message's origin.
func (c *core) isLocal(o *Origin) bool {
	return o.Seq > 0 && c.region != "" && o.Region == c.region && o.Incarnation == c.incarnation
}

// localOrigin is the origin the next local message published at t gets
// (the zero Origin when region is not set).
func (c *core) localOrigin(t time.Time) Origin {
	if c.region == "" {
		return Origin{}
	}
	return Origin{Region: c.region, Incarnation: c.incarnation, Seq: c.head.origin + 1, Time: t}
}

// checkStream checks an origin stream named by a replicated publish or a
// gap record: fully named, this topic's, not this region's. Errors wrap
// ErrBadOrigin.
func (c *core) checkStream(s replicator.Stream) error {
	switch {
	case s.Region == "":
		return fmt.Errorf("%w: empty origin region", ErrBadOrigin)
	case s.Incarnation == "":
		return fmt.Errorf("%w: empty origin incarnation", ErrBadOrigin)
	case s.Topic != c.topic:
		return fmt.Errorf("%w: stream of topic %s, not %s", ErrBadOrigin, s.Topic, c.topic)
	case c.region != "" && s.Region == c.region:
		return fmt.Errorf("%w: origin region %s is this region", ErrBadOrigin, s.Region)
	}
	return nil
}

// checkOrigin checks a replicated publish's origin (checkStream, and a
// sequence ≥ 1 and a time in Unix nanoseconds' range).
func (c *core) checkOrigin(o *Origin) error {
	if err := c.checkStream(o.Stream(c.topic)); err != nil {
		return err
	}
	if o.Seq == 0 {
		return fmt.Errorf("%w: origin seq 0", ErrBadOrigin)
	}
	if ns := o.Time.UnixNano(); !time.Unix(0, ns).Equal(o.Time) {
		return fmt.Errorf("%w: origin time %v out of range", ErrBadOrigin, o.Time)
	}
	return nil
}

func (c *core) setLimits(l Limits) {
	c.lim = l.withDefaults()
	c.dedup.window = c.lim.DuplicateWindow
}

// msgs is the number of confirmed live messages.
func (c *core) msgs() uint64 {
	if c.conf.seq+1 < c.first {
		return 0
	}
	return c.conf.seq + 1 - c.first
}

// check runs Publish's checks, in this order: size, Nats-Msg-Id duplicate
// (dup: the original's sequence), expected last sequence, expected last
// subject sequence, expected last msg id, DiscardNew limits. For a
// replicated publish (o.Origin set): the entry size, the origin
// (ErrBadOrigin), the receiver rule against the appended high-water mark
// (duplicate: dup is the stored message's sequence when known, else 0; a
// gap: *OriginGapError), DiscardNew limits. It changes nothing but
// expiring old msg ids.
func (c *core) check(subject string, hdrLen, dataLen, size int, o *PublishOptions, now time.Time) (dup uint64, isDup bool, err error) {
	if o.Origin == nil && c.lim.MaxMsgSize > 0 && hdrLen+dataLen > int(c.lim.MaxMsgSize) {
		return 0, false, fmt.Errorf("%w: %d bytes of header and data, max_msg_size %d", ErrMsgTooBig, hdrLen+dataLen, c.lim.MaxMsgSize)
	}
	if size > c.maxEntry {
		return 0, false, fmt.Errorf("%w: %d bytes encoded, at most %d (the largest entry less its header)", ErrMsgTooBig, size, c.maxEntry)
	}
	if org := o.Origin; org != nil {
		if err := c.checkOrigin(org); err != nil {
			return 0, false, err
		}
		s := org.Stream(c.topic)
		switch h := c.recv.HWM(s); {
		case org.Seq <= h:
			if org.Seq == h {
				dup = c.recvSeq[s]
			}
			return dup, true, nil
		case org.Seq > h+1:
			return 0, false, &OriginGapError{Expected: h + 1}
		}
		return 0, false, c.checkFull(size)
	}
	if o.MsgID != "" {
		c.dedup.expire(now)
		if seq, ok := c.dedup.lookup(o.MsgID, now); ok {
			return seq, true, nil
		}
	}
	if o.ExpectedLastSeq != nil && *o.ExpectedLastSeq != c.head.seq {
		return 0, false, &WrongLastSeqError{Actual: c.head.seq}
	}
	if o.ExpectedLastSubjectSeq != nil {
		subj := o.ExpectedLastSubjectSeqSubject
		if subj == "" {
			subj = subject
		}
		if actual := c.subjects.lastHead(subj, c.first); actual != *o.ExpectedLastSubjectSeq {
			return 0, false, &WrongLastSeqError{Actual: actual}
		}
	}
	if o.ExpectedLastMsgID != nil && *o.ExpectedLastMsgID != c.head.msgID {
		return 0, false, &WrongLastMsgIDError{Actual: c.head.msgID}
	}
	return 0, false, c.checkFull(size)
}

// checkFull applies the DiscardNew limits to a message of size bytes.
func (c *core) checkFull(size int) error {
	if !c.lim.DiscardNew {
		return nil
	}
	n := c.head.seq + 1 - c.first
	if c.lim.MaxMsgs > 0 && n >= uint64(c.lim.MaxMsgs) {
		return fmt.Errorf("%w: %d messages, max_msgs %d", ErrStoreFull, n, c.lim.MaxMsgs)
	}
	if b := c.live + c.pendingBytes + int64(size); c.lim.MaxBytes > 0 && b > c.lim.MaxBytes {
		return fmt.Errorf("%w: %d bytes with this message, max_bytes %d", ErrStoreFull, b, c.lim.MaxBytes)
	}
	return nil
}

// publishTime is the publish time of a message published at now: now in
// UTC, or the previous message's time if now is earlier (times never go
// back).
func (c *core) publishTime(now time.Time) time.Time {
	t := now.UTC()
	if t.Before(c.head.time) {
		t = c.head.time
	}
	return t
}

// assign gives the next sequence to a message that passed check, and its
// publish time (publishTime). A local message (from nil) takes the next
// local origin sequence when region is set (localOrigin was its origin)
// and its msgID is remembered for dedup; a replicated one (from: its
// origin) moves its stream's appended high-water mark, and its msgID is
// only the last message's id.
func (c *core) assign(subject, msgID string, size int64, now time.Time, from *Origin) (uint64, time.Time) {
	t := c.publishTime(now)
	origin := c.head.origin
	if from == nil && c.region != "" {
		origin++
	}
	c.head = tip{seq: c.head.seq + 1, time: t, msgID: msgID, origin: origin}
	c.subjects.assign(subject, c.head.seq)
	switch {
	case from != nil:
		c.recv.Offer(c.topic, *from) // VerdictStore: check passed
		c.recvSeq[from.Stream(c.topic)] = c.head.seq
	case msgID != "":
		c.dedup.add(msgID, c.head.seq, t)
	}
	c.pendingBytes += size
	return c.head.seq, t
}

// advance moves r's mark of o's stream to o.Seq when it is above it; a
// jump past mark+1 (only a gap record accepted before o was appended can
// cause one: the receiver rule stores nothing else above mark+1) counts
// as a gap record. It returns the sequences so counted as lost, and
// false if o.Seq was at or below the mark (never in the ML's own flow).
func (c *core) advance(r *replicator.Receiver, o *Origin) (lost uint64, ok bool) {
	s := o.Stream(c.topic)
	h := r.HWM(s)
	if o.Seq <= h {
		return 0, false
	}
	if o.Seq > h+1 {
		_, _, lost = r.OfferGap(s, h+1, o.Seq-1)
	}
	r.Offer(c.topic, *o)
	return lost, true
}

// skip decides on a gap record of stream s (checkStream'ed) for origin
// sequences first..last against the appended marks: VerdictDuplicate
// when last <= the mark, VerdictGap when first > the mark + 1, and
// otherwise VerdictStore: the appended mark moves to last, and
// confirmSkip must follow once every message appended before is
// confirmed. It returns the mark after.
func (c *core) skip(s replicator.Stream, first, last uint64) (replicator.Verdict, uint64) {
	v, hwm, _ := c.recv.OfferGap(s, first, last)
	if v == replicator.VerdictStore {
		delete(c.recvSeq, s)
	}
	return v, hwm
}

// confirmSkip applies a gap record skip accepted to the confirmed marks
// and returns the sequences it moved past (0 if a later confirmed
// message of the stream already did: advance counted them).
func (c *core) confirmSkip(s replicator.Stream, first, last uint64) uint64 {
	h := c.recvConf.HWM(s)
	if last <= h {
		return 0
	}
	_, _, lost := c.recvConf.OfferGap(s, min(first, h+1), last)
	c.lost += lost
	return lost
}

// confirm records that the next message m (conf.seq+1), stored in ledger
// ledgerID, is confirmed; newEntry: it is the first message of its
// ledger entry.
func (c *core) confirm(ledgerID int64, m *Message, msgID string, size int64, newEntry bool) {
	seq, subject, t := m.Seq, m.Subject, m.Time
	origin := c.conf.origin
	switch {
	case c.isLocal(&m.Origin):
		origin = m.Origin.Seq
	case m.HasOrigin():
		lost, _ := c.advance(c.recvConf, &m.Origin)
		c.lost += lost
	}
	c.conf = tip{seq: seq, time: t, msgID: msgID, origin: origin}
	c.subjects.confirm(subject, seq)
	c.pendingBytes -= size
	c.live += size
	if l := c.ledger(ledgerID); l != nil {
		if l.Msgs == 0 {
			l.FirstTime = t
		}
		if newEntry {
			l.Entries++
		}
		l.Msgs++
		l.Bytes += size
		l.LastTime = t
		l.LastOrigin = origin
		if l.subjects != nil {
			l.subjects[subject]++
		}
	}
	if seq == c.first {
		c.firstTime = t
	}
}

// replay applies a message read back from the ledgers at takeover
// (after the snapshot): like assign+confirm, but the ledger totals come
// from the ledger's metadata. A local origin sets the last local origin
// sequence, a replicated one moves its stream's marks (a jump counts as
// a gap record's loss: one accepted after the snapshot). It returns false
// when the origin does not follow (a local sequence other than the next,
// a replicated one at or below its mark): never in the ML's own flow; it
// is applied all the same (the highest sequence wins).
func (c *core) replay(ledgerID int64, m *Message, msgID string) (regular bool) {
	origin, regular := c.conf.origin, true
	switch {
	case c.isLocal(&m.Origin):
		regular = m.Origin.Seq == origin+1
		origin = max(origin, m.Origin.Seq)
	case m.HasOrigin():
		c.advance(c.recv, &m.Origin)
		lost, ok := c.advance(c.recvConf, &m.Origin)
		c.lost += lost
		regular = ok
		if ok {
			c.recvSeq[m.Origin.Stream(c.topic)] = m.Seq
		}
	}
	c.head = tip{seq: m.Seq, time: m.Time, msgID: msgID, origin: origin}
	c.conf = c.head
	c.subjects.assign(m.Subject, m.Seq)
	c.subjects.confirm(m.Subject, m.Seq)
	if msgID != "" && !(m.HasOrigin() && !c.isLocal(&m.Origin)) {
		c.dedup.add(msgID, m.Seq, m.Time)
	}
	if l := c.ledger(ledgerID); l != nil {
		l.LastOrigin = origin
		if l.subjects != nil {
			l.subjects[m.Subject]++
		}
	}
	if m.Seq == c.first {
		c.firstTime = m.Time
	}
	return regular
}

// ledger returns the ledger with id (nil if not in the list).
func (c *core) ledger(id int64) *ledgerState {
	for i := len(c.ledgers) - 1; i >= 0; i-- {
		if c.ledgers[i].ID == id {
			return c.ledgers[i]
		}
	}
	return nil
}

// ledgerFor returns the ledger holding seq (confirmed), nil if none.
func (c *core) ledgerFor(seq uint64) *ledgerState {
	if i := c.ledgerIndex(seq); i >= 0 {
		return c.ledgers[i]
	}
	return nil
}

// ledgerIndex is the index in the list of the ledger holding seq
// (confirmed), -1 if none.
func (c *core) ledgerIndex(seq uint64) int {
	lo, hi := 0, len(c.ledgers)
	for lo < hi { // first ledger with FirstSeq > seq
		mid := (lo + hi) / 2
		if c.ledgers[mid].FirstSeq > seq {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	for i := lo - 1; i >= 0; i-- {
		if l := c.ledgers[i]; l.Msgs > 0 {
			if seq <= l.last() {
				return i
			}
			return -1
		}
	}
	return -1
}

// addLedger appends a new open ledger whose first message is firstSeq
// (head.seq+1).
func (c *core) addLedger(id int64, firstSeq uint64) {
	c.ledgers = append(c.ledgers, &ledgerState{
		LedgerInfo: LedgerInfo{ID: id, FirstSeq: firstSeq, State: LedgerOpen, LastOrigin: c.head.origin},
		subjects:   map[string]uint64{},
	})
}

// closeLedger marks ledger id closed with the entries and message bytes
// its metadata says; they must be what was confirmed in it.
func (c *core) closeLedger(id, entries, bytes int64) error {
	l := c.ledger(id)
	if l == nil {
		return fmt.Errorf("%w: ledger %d not in the list", ErrCorrupt, id)
	}
	if l.Entries != entries || l.Bytes != bytes {
		return fmt.Errorf("%w: ledger %d closed with %d entries / %d message bytes, %d / %d confirmed in it",
			ErrCorrupt, id, entries, bytes, l.Entries, l.Bytes)
	}
	l.State = LedgerClosed
	return nil
}

// ledgerInfos is the list as persisted (open ledgers: Entries and Msgs
// -1, no totals).
func (c *core) ledgerInfos() []LedgerInfo {
	out := make([]LedgerInfo, 0, len(c.ledgers))
	for _, l := range c.ledgers {
		li := l.LedgerInfo
		if li.State == LedgerOpen {
			li = LedgerInfo{ID: li.ID, FirstSeq: li.FirstSeq, Entries: -1, Msgs: -1, State: LedgerOpen}
		}
		out = append(out, li)
	}
	return out
}

// snapshot is the confirmed state, for TopicMeta.Snapshot.
func (c *core) snapshot(now time.Time, maxDedup int) *Snapshot {
	subj := make(map[string]SubjectState, c.subjects.numConf)
	for k, s := range c.subjects.m {
		if s.cCount > 0 {
			subj[k] = SubjectState{Last: s.cLast, Count: s.cCount}
		}
	}
	return &Snapshot{
		LastSeq: c.conf.seq, LastTime: c.conf.time, LastMsgID: c.conf.msgID,
		Bytes: uint64(max(c.live, 0)), Msgs: c.msgs(),
		Subjects: subj, SubjectsFrom: c.counted,
		Dedup:         c.dedup.snapshot(c.conf.seq, now, maxDedup),
		LastOriginSeq: c.conf.origin,
		Origins:       c.recvConf.State().Streams,
	}
}
