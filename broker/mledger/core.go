package mledger

import (
	"fmt"
	"time"
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
}

// tip is one end of the sequence.
type tip struct {
	seq   uint64
	time  time.Time
	msgID string // its Nats-Msg-Id
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
	}
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
// (dup > 0: the original's sequence), expected last sequence, expected
// last subject sequence, expected last msg id, DiscardNew limits. It
// changes nothing but expiring old msg ids.
func (c *core) check(subject string, hdrLen, dataLen, size int, o *PublishOptions, now time.Time) (dup uint64, err error) {
	if c.lim.MaxMsgSize > 0 && hdrLen+dataLen > int(c.lim.MaxMsgSize) {
		return 0, fmt.Errorf("%w: %d bytes of header and data, max_msg_size %d", ErrMsgTooBig, hdrLen+dataLen, c.lim.MaxMsgSize)
	}
	if size > c.maxEntry {
		return 0, fmt.Errorf("%w: %d bytes encoded, at most %d (the largest entry less its header)", ErrMsgTooBig, size, c.maxEntry)
	}
	if o.MsgID != "" {
		c.dedup.expire(now)
		if seq, ok := c.dedup.lookup(o.MsgID, now); ok {
			return seq, nil
		}
	}
	if o.ExpectedLastSeq != nil && *o.ExpectedLastSeq != c.head.seq {
		return 0, &WrongLastSeqError{Actual: c.head.seq}
	}
	if o.ExpectedLastSubjectSeq != nil {
		subj := o.ExpectedLastSubjectSeqSubject
		if subj == "" {
			subj = subject
		}
		if actual := c.subjects.lastHead(subj, c.first); actual != *o.ExpectedLastSubjectSeq {
			return 0, &WrongLastSeqError{Actual: actual}
		}
	}
	if o.ExpectedLastMsgID != nil && *o.ExpectedLastMsgID != c.head.msgID {
		return 0, &WrongLastMsgIDError{Actual: c.head.msgID}
	}
	if c.lim.DiscardNew {
		n := c.head.seq + 1 - c.first
		if c.lim.MaxMsgs > 0 && n >= uint64(c.lim.MaxMsgs) {
			return 0, fmt.Errorf("%w: %d messages, max_msgs %d", ErrStoreFull, n, c.lim.MaxMsgs)
		}
		if b := c.live + c.pendingBytes + int64(size); c.lim.MaxBytes > 0 && b > c.lim.MaxBytes {
			return 0, fmt.Errorf("%w: %d bytes with this message, max_bytes %d", ErrStoreFull, b, c.lim.MaxBytes)
		}
	}
	return 0, nil
}

// assign gives the next sequence to a message that passed check, and its
// publish time: now in UTC, or the previous message's time if now is
// earlier (times never go back).
func (c *core) assign(subject, msgID string, size int64, now time.Time) (uint64, time.Time) {
	t := now.UTC()
	if t.Before(c.head.time) {
		t = c.head.time
	}
	c.head = tip{seq: c.head.seq + 1, time: t, msgID: msgID}
	c.subjects.assign(subject, c.head.seq)
	if msgID != "" {
		c.dedup.add(msgID, c.head.seq, t)
	}
	c.pendingBytes += size
	return c.head.seq, t
}

// confirm records that the next message (conf.seq+1), stored in ledger
// ledgerID, is confirmed; newEntry: it is the first message of its
// ledger entry.
func (c *core) confirm(ledgerID int64, seq uint64, subject, msgID string, t time.Time, size int64, newEntry bool) {
	c.conf = tip{seq: seq, time: t, msgID: msgID}
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
// from the ledger's metadata.
func (c *core) replay(ledgerID int64, m *Message, msgID string) {
	c.head = tip{seq: m.Seq, time: m.Time, msgID: msgID}
	c.conf = c.head
	c.subjects.assign(m.Subject, m.Seq)
	c.subjects.confirm(m.Subject, m.Seq)
	if msgID != "" {
		c.dedup.add(msgID, m.Seq, m.Time)
	}
	if l := c.ledger(ledgerID); l != nil && l.subjects != nil {
		l.subjects[m.Subject]++
	}
	if m.Seq == c.first {
		c.firstTime = m.Time
	}
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
				return l
			}
			return nil
		}
	}
	return nil
}

// addLedger appends a new open ledger whose first message is firstSeq.
func (c *core) addLedger(id int64, firstSeq uint64) {
	c.ledgers = append(c.ledgers, &ledgerState{
		LedgerInfo: LedgerInfo{ID: id, FirstSeq: firstSeq, State: LedgerOpen},
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
		Dedup: c.dedup.snapshot(c.conf.seq, now, maxDedup),
	}
}
