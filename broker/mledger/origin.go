package mledger

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/stratamesh/strata/replicator"
)

// Origins (ARCHITECTURE §4; issue 8): the ML's side of geo-replication.
//
// Local messages get this region's origin (Config.Region, the topic's
// incarnation, the next local origin sequence, the publish time), so a
// replicator sender reads them by origin sequence: LastOriginSeq,
// ReadLocal and NextLocal. Replicated messages (PublishOptions.Origin)
// and gap records (SkipOrigin) go through the receiver rule of
// replicator.Receiver per origin stream; Origins and OriginHWM report the
// confirmed high-water marks and losses. Both are part of the state a new
// owner rebuilds: the snapshot holds the last local origin sequence and
// the marks, and the replayed messages carry their origins.

// Incarnation is the topic's incarnation (TopicMeta.Incarnation).
func (m *ML) Incarnation() string { return m.core.incarnation } // set before the ML runs

// LocalStream is the topic's local origin stream (this region and
// incarnation): what its replicator senders send. Region is "" when
// Config.Region is not set.
func (m *ML) LocalStream() replicator.Stream {
	return replicator.Stream{Topic: m.name, Region: m.cfg.Region, Incarnation: m.core.incarnation}
}

// LastOriginSeq is the last confirmed local origin sequence: local
// origin sequences 1..LastOriginSeq were published (the lowest ones may
// have been trimmed since). 0 when none was (or Config.Region is "").
func (m *ML) LastOriginSeq() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.core.conf.origin
}

// OriginHWM is the confirmed high-water mark of origin stream s (0 for a
// stream never seen, such as a new incarnation): every origin sequence
// up to it is stored here durably or was covered by a gap record.
func (m *ML) OriginHWM(s replicator.Stream) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.core.recvConf.HWM(s)
}

// Origins is every origin stream replicated into the topic, sorted, with
// its confirmed high-water mark, the sequences gap records moved it past
// (Lost) and the gap records counted: what the snapshot persists.
func (m *ML) Origins() []replicator.StreamState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.core.recvConf.State().Streams
}

// SkipOrigin applies a gap record for origin stream s (this topic's; not
// this region's), origin sequences first..last, which the origin trimmed
// before they were replicated: by the receiver rule against the
// appended high-water mark, last <= mark is a duplicate (nothing
// changes), first > mark + 1 is refused with an *OriginGapError, and
// otherwise the mark moves to last and the sequences above the old mark
// count as lost (Origins, State.OriginsLost). It returns once the record
// is applied to the confirmed marks (after every publish made before it)
// and persisted with a conditioned write, so the driver may then answer
// the sender; an error means it may or may not have been applied (answer
// Failed: a retry is a duplicate or applies it). Errors: ErrBadOrigin,
// *OriginGapError, the stop error or ErrClosed, ctx's, a failed write.
func (m *ML) SkipOrigin(ctx context.Context, s replicator.Stream, first, last uint64) (SkipResult, error) {
	m.mu.Lock()
	if err := m.refuseErr(); err != nil {
		m.mu.Unlock()
		return SkipResult{}, err
	}
	c := m.core
	err := c.checkStream(s)
	if err == nil && (first == 0 || first > last) {
		err = fmt.Errorf("%w: gap record %d-%d", ErrBadOrigin, first, last)
	}
	if err != nil {
		m.mu.Unlock()
		return SkipResult{}, err
	}
	v, hwm := c.skip(s, first, last)
	if v == replicator.VerdictGap {
		m.mu.Unlock()
		return SkipResult{}, &OriginGapError{Expected: hwm + 1}
	}
	// A duplicate waits too: the mark it is below may count messages
	// not yet confirmed.
	sk := &skipItem{stream: s, first: first, last: last}
	applied := make(chan error, 1)
	m.enqueue(&item{skip: sk, done: func(_ PubResult, err error) { applied <- err }})
	m.mu.Unlock()
	m.wakeCompleter()
	select {
	case err := <-applied:
		if err != nil {
			return SkipResult{}, err
		}
	case <-ctx.Done():
		return SkipResult{}, ctx.Err()
	}
	if err := m.flush(ctx); err != nil {
		return SkipResult{}, err
	}
	return SkipResult{Duplicate: v == replicator.VerdictDuplicate, HWM: m.OriginHWM(s), Lost: sk.lost}, nil
}

// flush writes the state now if it changed since the last write (on the
// loop, after any rollover in progress, whose write comes first).
func (m *ML) flush(ctx context.Context) error {
	return m.request(ctx, func() error {
		for {
			if err := m.finishRollover(false); err != nil {
				return err
			}
			m.mu.Lock()
			if err := m.refuseErr(); err != nil {
				m.mu.Unlock()
				return err
			}
			if m.prev != nil { // a Publish switched again
				m.mu.Unlock()
				continue
			}
			if !m.dirty {
				m.mu.Unlock()
				return nil
			}
			tm := m.buildMeta()
			m.dirty = false
			m.mu.Unlock()
			if err := m.write(m.ctx, tm); err != nil {
				m.mu.Lock()
				m.dirty = true
				m.mu.Unlock()
				return err
			}
			m.deleteTrash(m.ctx, tm.Trash)
			return nil
		}
	})
}

// ReadLocal returns the message of local origin sequence n (1 <=
// n <= LastOriginSeq): what a replicator sender loads. It finds the
// ledger holding n by the ledgers' LastOrigin, then the message within
// it: at once when the ledger holds only local messages (the common
// case), otherwise by reading forward from the lowest sequence n can have
// there. Errors: ErrNotFound above LastOriginSeq (or for 0), ErrGone when
// n was trimmed (its message is below FirstSeq), Read's errors.
func (m *ML) ReadLocal(ctx context.Context, n uint64) (Message, error) {
	for {
		m.mu.Lock()
		if err := m.stopErr; err != nil {
			m.mu.Unlock()
			return Message{}, err
		}
		c := m.core
		if n == 0 || n > c.conf.origin {
			m.mu.Unlock()
			return Message{}, fmt.Errorf("%w: local origin seq %d, last %d", ErrNotFound, n, c.conf.origin)
		}
		lo, hi, headless, err := c.localBounds(n)
		first := c.first
		m.mu.Unlock()
		if err != nil {
			return Message{}, err
		}
		if hi < first {
			return Message{}, fmt.Errorf("%w: local origin seq %d (at most seq %d, first %d)", ErrGone, n, hi, first)
		}
		raised := lo < first
		lo = max(lo, first)
		msg, err := m.scanLocal(ctx, n, lo, hi)
		switch {
		case errors.Is(err, ErrGone):
			continue // trimmed meanwhile: bounds again
		case errors.Is(err, errPassed) && (raised || headless):
			return Message{}, fmt.Errorf("%w: local origin seq %d (trimmed)", ErrGone, n)
		case errors.Is(err, errPassed):
			return Message{}, fmt.Errorf("%w: local origin seq %d not in seqs %d..%d", ErrCorrupt, n, lo, hi)
		}
		return msg, err
	}
}

// errPassed: scanLocal met a local origin sequence above the one sought.
var errPassed = errors.New("mledger: passed the local origin sequence")

// scanLocal reads seqs lo..hi for the message of local origin seq n.
func (m *ML) scanLocal(ctx context.Context, n, lo, hi uint64) (Message, error) {
	for seq := lo; seq <= hi; seq++ {
		if err := ctx.Err(); err != nil {
			return Message{}, err
		}
		msg, err := m.Read(ctx, seq)
		if err != nil {
			return Message{}, err
		}
		if !m.core.isLocal(&msg.Origin) {
			continue
		}
		switch {
		case msg.Origin.Seq == n:
			return msg, nil
		case msg.Origin.Seq > n:
			return Message{}, errPassed
		}
	}
	return Message{}, errPassed
}

// localBounds is the range of topic sequences that can hold local
// origin sequence n (confirmed): in the first ledger whose LastOrigin
// reaches n, at least as many messages precede it as local ones do, and
// at least as many follow it as local ones do. When that ledger is the
// first of the list and the local origins before it are not known (the
// ledgers before it were removed), n may also have been in a removed
// ledger: headless is then true, and n not found in lo..hi is gone.
// ErrGone when the counts show it is; ErrCorrupt when they contradict
// each other.
func (c *core) localBounds(n uint64) (lo, hi uint64, headless bool, err error) {
	i := sort.Search(len(c.ledgers), func(i int) bool { return c.ledgers[i].LastOrigin >= n })
	if i == len(c.ledgers) {
		return 0, 0, false, fmt.Errorf("%w: local origin seq %d is beyond every ledger's", ErrCorrupt, n)
	}
	l := c.ledgers[i]
	var prev uint64 // the last local origin before the ledger, if known
	headless = i == 0 && l.FirstSeq != 1
	if i > 0 {
		prev = c.ledgers[i-1].LastOrigin
	}
	var before uint64 // local messages of the ledger before n's, at least
	if !headless && n > prev {
		before = n - prev - 1
	}
	after := l.LastOrigin - n // local messages of the ledger after n's
	if l.Msgs <= 0 || before+after > l.last()-l.FirstSeq {
		if headless { // n comes before the first ledger's messages
			return 0, 0, true, fmt.Errorf("%w: local origin seq %d (before the first ledger)", ErrGone, n)
		}
		return 0, 0, false, fmt.Errorf("%w: local origin seq %d does not fit ledger %d (%d messages from seq %d, last origin %d, %d before)",
			ErrCorrupt, n, l.ID, l.Msgs, l.FirstSeq, l.LastOrigin, prev)
	}
	return l.FirstSeq + before, l.last() - after, headless, nil
}

// NextLocal returns the first confirmed message of local origin at topic
// sequence from or after (from FirstSeq when from is below it), reading
// forward and skipping the ledgers that hold no local message: how a
// replicator sender reads on, from the last message's Seq+1. ErrNotFound
// when there is none up to the last confirmed sequence.
func (m *ML) NextLocal(ctx context.Context, from uint64) (Message, error) {
	seq := from
	for {
		if err := ctx.Err(); err != nil {
			return Message{}, err
		}
		m.mu.Lock()
		if err := m.stopErr; err != nil {
			m.mu.Unlock()
			return Message{}, err
		}
		c := m.core
		seq = max(seq, c.first)
		if c.conf.origin == 0 || seq > c.conf.seq {
			m.mu.Unlock()
			return Message{}, fmt.Errorf("%w: no local message from seq %d (last %d)", ErrNotFound, from, c.conf.seq)
		}
		if i := c.ledgerIndex(seq); i > 0 && c.ledgers[i].LastOrigin == c.ledgers[i-1].LastOrigin {
			seq = c.ledgers[i].last() + 1 // no local message in it
			m.mu.Unlock()
			continue
		}
		m.mu.Unlock()
		msg, err := m.Read(ctx, seq)
		switch {
		case errors.Is(err, ErrGone):
			continue // from FirstSeq
		case err != nil:
			return Message{}, err
		case m.core.isLocal(&msg.Origin):
			return msg, nil
		}
		seq++
	}
}
