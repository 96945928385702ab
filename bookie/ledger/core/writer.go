package core

import (
	"fmt"
	"slices"
)

// FailReason classifies a failed add, as the driver maps the bookie's
// answer (or its absence).
type FailReason int

// The failure reasons. Timeout, Unavailable, WrongInstance and ReadOnly
// are bookie failures: the bookie is replaced by an ensemble change.
// Fenced, Unauthorized and Invalid end the writer.
const (
	// FailTimeout: no answer in time.
	FailTimeout FailReason = iota + 1
	// FailUnavailable: connection refused or broken, the bookie shutting
	// down or failing internally.
	FailUnavailable
	// FailWrongInstance: the bookie serves another instance than the
	// segment recorded (its disk was wiped or replaced).
	FailWrongInstance
	// FailReadOnly: the bookie refuses adds (disk full or set read-only).
	FailReadOnly
	// FailFenced: the ledger is fenced on the bookie: the writer ends with
	// ErrFenced. Never a bookie failure.
	FailFenced
	// FailUnauthorized: the bookie refused the master key: the writer ends.
	FailUnauthorized
	// FailInvalid: the bookie refused the add as malformed: the writer ends.
	FailInvalid
)

var failNames = map[FailReason]string{
	FailTimeout: "timeout", FailUnavailable: "unavailable", FailWrongInstance: "wrong-instance",
	FailReadOnly: "read-only", FailFenced: "fenced", FailUnauthorized: "unauthorized", FailInvalid: "invalid",
}

func (r FailReason) String() string {
	if n, ok := failNames[r]; ok {
		return n
	}
	return fmt.Sprintf("FailReason(%d)", int(r))
}

// Send is one add for the driver to send: entry Entry to bookie Bookie
// (naming Instance), carrying the writer's LAC. The driver answers it by
// passing it back, unchanged, to Acked or Failed.
type Send struct {
	Bookie   BookieID
	Instance string
	Entry    int64
	// LAC is the writer's LastAddConfirmed when the send was handed out;
	// always below Entry.
	LAC int64
	// Length is the ledger's length in bytes through this entry. The
	// driver stores it with the entry (in the entry's frame, as
	// BookKeeper's digest header does) and reports it back in Found, so
	// that recovery learns the ledger's length.
	Length int64
	// Epoch is the writer's ensemble epoch: 0 at creation, +1 at each
	// committed ensemble change. Answers to sends of an older epoch are
	// stale and ignored.
	Epoch int64
}

// Ready is what the Writer wants done now (etcd-io/raft's Ready). Take it
// with Writer.Ready, call Writer.Advance(rd) before feeding any input, then
// carry it out.
type Ready struct {
	// Sends to issue, in order.
	Sends []Send
	// Completed are entries now confirmed, in id order, each exactly once
	// over the writer's life: acknowledge them to the callers of Add.
	Completed []int64
	// Replace are bookies that failed: ask placement for a writable bookie
	// outside the ensemble for each, then call Writer.Replace. Each is
	// reported once; NeedReplacement lists those still without one.
	Replace []BookieID
	// MetadataUpdate, when set, is an ensemble change to record: CAS it
	// in etcd requiring the stored version to equal
	// MetadataUpdate.Version, then call MetadataCommitted or
	// MetadataConflict.
	MetadataUpdate *Metadata
	// Err, when set, says the writer has ended (reported once; Writer.Err
	// keeps it): every entry added but not in a Completed fails with it.
	Err error

	nSends       int
	proposalSeq  int
	errDelivered bool
}

// pendingEntry is an added entry not yet confirmed.
type pendingEntry struct {
	length int64      // ledger length through this entry
	acks   []BookieID // distinct bookies of its write set that acked a send of the current epoch
}

// change is an ensemble change in progress, from the first bookie failure
// until its metadata update commits. While it lasts no entry completes
// and nothing is sent.
type change struct {
	// first is the new segment's first entry: the writer's LAC+1 when the
	// change began (the LAC cannot move while the change lasts).
	first  int64
	failed []BookieID          // bookies of the committed ensemble to replace, in failure order
	chosen map[BookieID]member // failed bookie → its replacement
	prop   *Metadata           // the update, once every failed bookie has a replacement
	seq    int                 // numbers prop, so a stale Ready cannot mark a newer one handed out
	sent   bool                // prop was handed out: its CAS is in flight
	later  []BookieID          // failures while the CAS was in flight
	laterC map[BookieID]member // replacements chosen for later
}

// Writer is the quorum, LAC and ensemble-change state machine of one open
// ledger (BookKeeper's LedgerHandle write path, reduced to its decisions).
// It does no I/O and is not safe for concurrent use: one driver goroutine
// owns it.
type Writer struct {
	md     Metadata // as committed in etcd; Version is the known revision
	epoch  int64
	next   int64 // id the next Add gets
	lac    int64
	lacLen int64 // ledger length through lac
	length int64 // ledger length through next-1
	// pending holds entries lac+1 .. next-1, in order.
	pending   []pendingEntry
	queued    []Send  // sends not yet handed out (LAC filled in by Ready)
	completed []int64 // completions not yet handed out
	replace   []BookieID
	change    *change
	seq       int
	err       error
	errShown  bool
	closed    bool
}

// NewWriter starts the writer of a ledger it has just created: md must be
// valid, OPEN, and have one segment (starting at entry 0).
func NewWriter(md Metadata) (*Writer, error) {
	if err := md.Validate(); err != nil {
		return nil, err
	}
	if md.State != StateOpen || len(md.Segments) != 1 {
		return nil, fmt.Errorf("%w: a writer starts on a new OPEN ledger with one segment, not %s with %d",
			ErrInvalidMetadata, md.State, len(md.Segments))
	}
	return &Writer{md: md.Clone(), lac: NoEntry}, nil
}

// LAC is the LastAddConfirmed: the highest entry such that it and every
// entry before it completed (NoEntry if none).
func (w *Writer) LAC() int64 { return w.lac }

// LastAddPushed is the highest entry id handed out by Add (NoEntry if none).
func (w *Writer) LastAddPushed() int64 { return w.next - 1 }

// Epoch is the ensemble epoch (the number of committed ensemble changes).
func (w *Writer) Epoch() int64 { return w.epoch }

// Metadata is the metadata as last committed (a copy).
func (w *Writer) Metadata() Metadata { return w.md.Clone() }

// Err is why the writer ended, or nil.
func (w *Writer) Err() error { return w.err }

// Add assigns the next entry id to an entry of payloadLen bytes and queues
// its sends to its write set (held back while an ensemble change lasts).
// The driver keeps the payload until the entry is Completed: an ensemble
// change re-sends it.
func (w *Writer) Add(payloadLen int) (int64, error) {
	switch {
	case w.err != nil:
		return NoEntry, w.err
	case w.closed:
		return NoEntry, ErrClosed
	case payloadLen < 0:
		return NoEntry, fmt.Errorf("%w: payload length %d", ErrInvalidArgument, payloadLen)
	}
	id := w.next
	w.next++
	w.length += int64(payloadLen)
	w.pending = append(w.pending, pendingEntry{length: w.length})
	if w.change == nil {
		w.queueSends(id)
	}
	return id, nil
}

// queueSends queues entry id's sends to its write set in the committed
// ensemble, at the current epoch.
func (w *Writer) queueSends(id int64) {
	seg := w.md.Segments[len(w.md.Segments)-1]
	length := w.pending[id-w.lac-1].length
	for _, m := range w.md.writeSetOf(seg, id) {
		w.queued = append(w.queued, Send{Bookie: m.id, Instance: m.instance, Entry: id, Length: length, Epoch: w.epoch})
	}
}

// Acked records bookie s.Bookie's ack of s. It counts only if s is of the
// current epoch, no ensemble change is under way, the entry is still
// pending and the bookie is in its write set; a bookie counts once.
func (w *Writer) Acked(s Send) {
	if w.err != nil || w.closed || w.change != nil || s.Epoch != w.epoch || s.Entry <= w.lac || s.Entry >= w.next {
		return
	}
	if !slices.ContainsFunc(w.md.writeSetOf(w.lastSegment(), s.Entry), func(m member) bool { return m.id == s.Bookie }) {
		return
	}
	p := &w.pending[s.Entry-w.lac-1]
	if slices.Contains(p.acks, s.Bookie) {
		return
	}
	p.acks = append(p.acks, s.Bookie)
	for len(w.pending) > 0 && len(w.pending[0].acks) >= w.md.AckQuorum {
		w.lac++
		w.lacLen = w.pending[0].length
		w.completed = append(w.completed, w.lac)
		w.pending = w.pending[1:]
	}
}

// Failed records that s failed for reason. Fenced, Unauthorized and Invalid
// end the writer whatever the epoch. A bookie failure of the current
// epoch, by a bookie of the committed ensemble, starts an ensemble change
// or is folded into the one under way; stale ones are ignored.
func (w *Writer) Failed(s Send, reason FailReason) {
	if w.err != nil || w.closed {
		return
	}
	switch reason {
	case FailFenced:
		w.end(fmt.Errorf("%w: bookie %s refused entry %d", ErrFenced, s.Bookie, s.Entry))
		return
	case FailUnauthorized:
		w.end(fmt.Errorf("%w: by bookie %s", ErrUnauthorized, s.Bookie))
		return
	case FailInvalid:
		w.end(fmt.Errorf("%w: bookie %s, entry %d", ErrBookieRefused, s.Bookie, s.Entry))
		return
	}
	if s.Epoch != w.epoch || !slices.Contains(w.lastSegment().Ensemble, s.Bookie) {
		return
	}
	w.bookieFailed(s.Bookie)
}

func (w *Writer) lastSegment() Segment { return w.md.Segments[len(w.md.Segments)-1] }

// end ends the writer with err. Completions not yet handed out stay.
func (w *Writer) end(err error) {
	w.err = err
	w.queued, w.replace, w.change = nil, nil, nil
}

// Close ends the writer and returns the metadata that closes the ledger:
// state CLOSED, LastEntryID = LAC, Length = bytes through the LAC, Version
// the one to CAS against. It fails with ErrPending while any added entry
// is unconfirmed or an ensemble change's CAS is in flight (the driver
// waits for its adds, or gives up and leaves the ledger OPEN for the next
// owner to recover); an ensemble change that has not reached etcd yet is
// dropped, as a closed ledger needs no new ensemble. If the close CAS
// fails because the ledger is IN_RECOVERY, every confirmed entry is still
// safe: recovery never closes below the LAC.
func (w *Writer) Close() (Metadata, error) {
	switch {
	case w.err != nil:
		return Metadata{}, w.err
	case w.closed:
		return Metadata{}, ErrClosed
	case len(w.pending) > 0:
		return Metadata{}, fmt.Errorf("%w: entries %d..%d unconfirmed", ErrPending, w.lac+1, w.next-1)
	case w.change != nil && w.change.sent:
		return Metadata{}, fmt.Errorf("%w: ensemble change being recorded", ErrPending)
	}
	w.change, w.replace, w.queued = nil, nil, nil
	w.closed = true
	md := w.md.Clone()
	md.State, md.LastEntryID, md.Length = StateClosed, w.lac, w.lacLen
	return md, nil
}

// HasReady reports whether Ready has anything new.
func (w *Writer) HasReady() bool {
	c := w.change
	return len(w.queued) > 0 || len(w.completed) > 0 || len(w.replace) > 0 ||
		(c != nil && c.prop != nil && !c.sent) || (w.err != nil && !w.errShown)
}

// Ready is what to do now; it changes nothing (Advance does).
func (w *Writer) Ready() Ready {
	rd := Ready{nSends: len(w.queued)}
	for _, s := range w.queued {
		if s.Entry <= w.lac {
			continue // confirmed meanwhile: nothing to send
		}
		s.LAC = w.lac
		rd.Sends = append(rd.Sends, s)
	}
	rd.Completed = slices.Clone(w.completed)
	rd.Replace = slices.Clone(w.replace)
	if c := w.change; c != nil && c.prop != nil && !c.sent {
		p := c.prop.Clone()
		rd.MetadataUpdate, rd.proposalSeq = &p, c.seq
	}
	if w.err != nil && !w.errShown {
		rd.Err, rd.errDelivered = w.err, true
	}
	return rd
}

// Advance marks rd, from the latest Ready, as handed to the driver.
func (w *Writer) Advance(rd Ready) {
	w.queued = w.queued[min(rd.nSends, len(w.queued)):]
	w.completed = w.completed[min(len(rd.Completed), len(w.completed)):]
	w.replace = w.replace[min(len(rd.Replace), len(w.replace)):]
	if c := w.change; c != nil && rd.MetadataUpdate != nil && c.prop != nil && rd.proposalSeq == c.seq {
		c.sent = true
	}
	if rd.errDelivered {
		w.errShown = true
	}
}
