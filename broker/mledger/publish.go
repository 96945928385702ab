package mledger

import (
	"fmt"
	"time"

	"github.com/stratamesh/strata/bookie/ledger"
)

// Publish stores a message published on subject, with its raw NATS
// header block (nil when none) and data, and calls done once with the
// result (JetStream: the PubAck). hdr and data may be reused when
// Publish returns.
//
// The checks run at call time, in this order, against a state that
// includes appended but unconfirmed messages: the size (ErrMsgTooBig;
// JetStream max_msg_size), a Nats-Msg-Id seen within the duplicate window
// (the original's sequence with Duplicate set; nothing is stored), the
// expected last sequence and last subject sequence (*WrongLastSeqError),
// the expected last msg id (*WrongLastMsgIDError), and DiscardNew limits
// (ErrStoreFull). A replicated publish (o.Origin set) is checked for the
// entry size, its origin (ErrBadOrigin), the receiver rule of its origin
// stream (a duplicate, nothing stored; above the high-water mark + 1,
// *OriginGapError) and DiscardNew limits; see PublishOptions.Origin. A
// local publish is stored with this region's origin and the next local
// origin sequence (Config.Region; none when it is ""), a replicated one
// with its own. A message that passes gets the next sequence and is
// queued for the open ledger, which receives it in the next entry the
// batching policy lets go (see batcher: at once when fewer than
// Config.MaxInflightEntries entries are in flight). Publish blocks only
// while Config.MaxQueuedBytes of messages wait for the ledger
// (back-pressure).
//
// done is called by one goroutine at a time (the ML's completer, or the
// ledger writer's callback goroutine when the completer is idle), in the
// order of the Publish calls; it must not block, nor call Publish (which
// may wait for room that only confirmations, delayed by done, make). It
// is called for a stored message once its entry is confirmed at the ack
// quorum and its ledger is recorded in etcd; for a duplicate
// after its original; for a refused one after the calls before it. If
// the ML stops first, pending calls fail with its stop error (ErrNotOwner
// when ownership was lost: the message may or may not be stored; the
// next owner's answer is final). After the ML closed or stopped, done is
// called before Publish returns, with ErrClosed or the stop error.
func (m *ML) Publish(subject string, hdr, data []byte, o PublishOptions, done func(PubResult, error)) {
	if done == nil {
		done = func(PubResult, error) {}
	}
	m.mu.Lock()
	m.waitRoomLocked()
	if err := m.refuseErr(); err != nil {
		m.mu.Unlock()
		done(PubResult{}, err)
		return
	}
	now := m.cfg.Now()
	roll := m.rolloverDue(now)
	if roll && m.prev == nil && m.spare != nil && m.spareSaved {
		m.switchLocked(now, false) // the loop finishes the rollover
	}
	c := m.core
	t := c.publishTime(now)
	msg := Message{Seq: c.head.seq + 1, Subject: subject, Header: hdr, Data: data, Time: t}
	msgID := o.MsgID
	if o.Origin != nil {
		msg.Origin = *o.Origin
		msg.Origin.Time = msg.Origin.Time.UTC()
		o.Origin = &msg.Origin
		msgID = msgIDOf(hdr) // the last message's id, not remembered for dedup
	} else {
		msg.Origin = c.localOrigin(t)
	}
	size := EncodedSize(&msg, m.local)
	dup, isDup, err := c.check(subject, len(hdr), len(data), size, &o, now)
	if err != nil || isDup {
		m.enqueue(&item{done: done, seq: dup, dup: isDup, err: err})
		m.mu.Unlock()
		m.wakeCompleter()
		if roll {
			m.kick()
		}
		return
	}
	seq, _ := c.assign(subject, msgID, int64(size), now, o.Origin)
	msg.Seq = seq
	rec := appendRecord(make([]byte, 0, size), &msg, m.local)
	led := m.cur
	it := &item{done: done, seq: seq, led: led, rec: rec, msg: storedMessage(rec, &msg), msgID: msgID, size: int64(size)}
	m.enqueue(it)
	m.batch.push(it)
	m.lingerLocked()
	led.appended++
	led.bytes += int64(size)
	roll = roll || m.rolloverDue(now)
	m.mu.Unlock()
	m.send()
	if roll {
		m.kick()
	}
}

// storedMessage is m as stored: its header and data alias rec (m's
// record); the subject and origin are m's (strings are immutable).
func storedMessage(rec []byte, m *Message) Message {
	out := Message{Seq: m.Seq, Subject: m.Subject, Time: m.Time, Origin: m.Origin}
	if n := len(m.Data); n > 0 {
		out.Data = rec[len(rec)-n : len(rec) : len(rec)]
	}
	if n := len(m.Header); n > 0 {
		// flags, time, subject, header length
		off := 1 + varintLen(m.Time.UnixNano()) + uvarintLen(uint64(len(m.Subject))) + len(m.Subject) + uvarintLen(uint64(n))
		out.Header = rec[off : off+n : off+n]
	}
	return out
}

// lingerLocked applies Config.Linger after a message was queued (mu
// held): it starts lingering when no entry is in flight and this is the
// only queued message, notes the time of the latest message while
// lingering, and ends the linger once a full entry is queued.
func (m *ML) lingerLocked() {
	if m.cfg.Linger <= 0 {
		return
	}
	switch {
	case m.lingering:
		m.lastPush = time.Now()
		if m.batch.full() {
			m.lingering = false
		}
	case m.batch.inflight == 0 && m.batch.queued() == 1 && !m.sending:
		m.lingering = true
		m.lingerStart = time.Now()
		m.lastPush = m.lingerStart
		if m.lingerTimer == nil {
			m.lingerTimer = time.AfterFunc(m.cfg.LingerGap, m.lingerDue)
		} else {
			m.lingerTimer.Reset(m.cfg.LingerGap)
		}
	}
}

// lingerDue runs when a linger's timer fires: it waits again while
// messages keep coming (the last one within LingerGap, and Linger not
// used up), else ends the linger and sends.
func (m *ML) lingerDue() {
	m.mu.Lock()
	if !m.lingering {
		m.mu.Unlock()
		return
	}
	now := time.Now()
	quiet, used := now.Sub(m.lastPush), now.Sub(m.lingerStart)
	if m.stopErr == nil && quiet < m.cfg.LingerGap && used < m.cfg.Linger {
		m.lingerTimer.Reset(min(m.cfg.LingerGap-quiet, m.cfg.Linger-used))
		m.mu.Unlock()
		return
	}
	m.lingering = false
	m.mu.Unlock()
	m.send()
}

func (m *ML) enqueue(it *item) {
	m.queue = append(m.queue, it)
}

// waitRoomLocked waits (mu held, released meanwhile) while
// MaxQueuedBytes of messages wait for the ledger, unless the ML closes or
// stops.
func (m *ML) waitRoomLocked() {
	for m.batch.bytes >= int64(m.cfg.MaxQueuedBytes) && m.refuseErr() == nil {
		if m.room == nil {
			m.room = make(chan struct{})
		}
		ch := m.room
		m.mu.Unlock()
		<-ch
		m.mu.Lock()
	}
}

// wakeRoomLocked wakes the Publishes waiting for room (mu held).
func (m *ML) wakeRoomLocked() {
	if m.room != nil {
		close(m.room)
		m.room = nil
	}
}

// sentEntry is one entry appended to a ledger writer.
type sentEntry struct {
	led   *openLedger
	id    int64   // its entry id: the writer numbers entries in append order
	items []*item // its messages
}

// send appends the entries the batching policy lets go now. The first
// caller to find no send in progress becomes the sender (sending) and
// loops until the policy lets nothing more go; a caller that finds a
// send in progress leaves its work to it (the sender looks again before
// it stops). So only one goroutine appends at a time, in the policy's
// order, which is sequence order, and no caller waits for another.
// Called after a Publish queued a message and after an entry was
// confirmed (from the writer's callback goroutine; AppendAsync never
// waits for a callback to run, and a done it runs inline finds the send
// in progress).
func (m *ML) send() {
	m.mu.Lock()
	if m.sending {
		m.mu.Unlock()
		return
	}
	m.sending = true
	for m.stopErr == nil && !m.lingering {
		items := m.batch.next()
		if items == nil {
			break
		}
		first := items[0]
		led := first.led
		e := &sentEntry{led: led, id: led.entries, items: items}
		led.entries++
		first.entryFirst = true
		m.index.add(led.id, e.id, first.seq, len(items))
		m.wakeRoomLocked()
		m.mu.Unlock()
		// The entry is built in its ledger frame, which the writer keeps.
		n := ledger.FrameHeaderSize + batchHeaderSize
		for _, it := range items {
			n += len(it.rec)
		}
		frame := appendBatchHeader(make([]byte, ledger.FrameHeaderSize, n), first.seq, len(items))
		for _, it := range items {
			frame = append(frame, it.rec...)
		}
		led.w.AppendFrameAsync(frame, func(id int64, err error) { m.onAdded(e, id, err) })
		m.mu.Lock()
	}
	m.sending = false
	m.mu.Unlock()
}

// onAdded is the ledger writer's answer for entry e (on the writer's
// callback goroutine).
func (m *ML) onAdded(e *sentEntry, id int64, err error) {
	if err == nil && id != e.id {
		err = fmt.Errorf("%w: seq %d went to entry %d of ledger %d, not %d", ErrCorrupt, e.items[0].seq, id, e.led.id, e.id)
	}
	if err != nil {
		m.lose(fmt.Errorf("ledger %d: add of seqs %d..%d: %w", e.led.id, e.items[0].seq, e.items[len(e.items)-1].seq, err))
		return
	}
	m.mu.Lock()
	for _, it := range e.items {
		it.confirmed = true
	}
	m.batch.done()
	m.mu.Unlock()
	m.send()
	// Answer here unless the completer is at it: a hand-off to another
	// goroutine costs a wake-up, which on a busy machine is tens to
	// hundreds of µs on every publish's path.
	if !m.answering.TryLock() {
		m.wakeCompleter()
		return
	}
	if m.answer() {
		m.wakeCompleter() // stopped: the completer exits too
	}
	m.answering.Unlock()
}

type answer struct {
	done func(PubResult, error)
	res  PubResult
	err  error
}

// completer answers publishes in call order; it is the only goroutine
// calling their done. It exits once the ML stopped and nothing is
// pending.
func (m *ML) completer() {
	defer close(m.complDone)
	for range m.completeCh {
		m.answering.Lock()
		exit := m.answer()
		m.answering.Unlock()
		if exit {
			return
		}
	}
}

// answer answers what can be answered (answering held) and reports
// whether the ML has stopped with nothing left to answer.
func (m *ML) answer() (exit bool) {
	for {
		answers, exit := m.collect()
		for _, a := range answers {
			a.done(a.res, a.err)
		}
		if len(answers) > 0 && m.cfg.AfterAnswers != nil {
			m.cfg.AfterAnswers()
		}
		if exit || len(answers) == 0 {
			return exit
		}
	}
}

// collect takes the answerable publishes off the queue, applying
// confirmed ones to the state; once stopped, it fails the rest.
func (m *ML) collect() (answers []answer, exit bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	advanced := false
	for m.qhead < len(m.queue) {
		it := m.queue[m.qhead]
		a := answer{done: it.done}
		switch {
		case it.err != nil:
			a.err = it.err
		case it.dup:
			a.res = PubResult{Seq: it.seq, Duplicate: true}
		case it.skip != nil:
			it.skip.lost = m.core.confirmSkip(it.skip.stream, it.skip.first, it.skip.last)
			m.dirty = true
		case it.confirmed && it.led.recorded:
			m.core.confirm(it.led.id, &it.msg, it.msgID, it.size, it.entryFirst)
			m.cache.push(it.msg, it.size)
			a.res = PubResult{Seq: it.seq}
			advanced = true
		default:
			goto blocked
		}
		m.pop(it)
		answers = append(answers, a)
	}
blocked:
	if m.stopErr != nil {
		for m.qhead < len(m.queue) {
			it := m.queue[m.qhead]
			m.pop(it)
			answers = append(answers, answer{done: it.done, err: m.stopErr})
		}
		exit = true
	}
	if advanced {
		m.cache.evict(int64(m.cfg.CacheBytes), m.keepFrom())
		if m.stopErr == nil {
			close(m.notify)
			m.notify = make(chan struct{})
		}
		m.kick()
	}
	return answers, exit
}

func (m *ML) pop(*item) {
	m.queue[m.qhead] = nil
	m.qhead++
	if m.qhead == len(m.queue) {
		m.queue, m.qhead = m.queue[:0], 0
	} else if m.qhead > 1024 && m.qhead*2 > len(m.queue) {
		m.queue = append(m.queue[:0:0], m.queue[m.qhead:]...)
		m.qhead = 0
	}
}

// keepFrom is the first sequence of the first ledger not yet closed: the
// cache keeps every message from there (mu held).
func (m *ML) keepFrom() uint64 {
	for _, l := range m.core.ledgers {
		if l.State != LedgerClosed {
			return l.FirstSeq
		}
	}
	return m.core.conf.seq + 1
}
