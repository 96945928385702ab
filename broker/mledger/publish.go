package mledger

import "fmt"

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
// (ErrStoreFull). A message that passes gets the next sequence and is
// appended to the open ledger; Publish blocks only for the ledger
// writer's back-pressure.
//
// done is called from one goroutine of the ML, in the order of the
// Publish calls: for a stored message once its entry is confirmed at
// the ack quorum and its ledger is recorded in etcd; for a duplicate
// after its original; for a refused one after the calls before it. If
// the ML stops first, pending calls fail with its stop error (ErrNotOwner
// when ownership was lost: the message may or may not be stored; the
// next owner's answer is final). After the ML closed or stopped, done is
// called before Publish returns, with ErrClosed or the stop error.
func (m *ML) Publish(subject string, hdr, data []byte, o PublishOptions, done func(PubResult, error)) {
	if done == nil {
		done = func(PubResult, error) {}
	}
	m.appendMu.Lock()
	m.mu.Lock()
	if err := m.refuseErr(); err != nil {
		m.mu.Unlock()
		m.appendMu.Unlock()
		done(PubResult{}, err)
		return
	}
	now := m.cfg.Now()
	roll := m.rolloverDue(now)
	if roll && m.prev == nil && m.spare != nil && m.spareSaved {
		m.switchLocked(now, false) // the loop finishes the rollover
	}
	c := m.core
	msg := Message{Seq: c.head.seq + 1, Subject: subject, Header: hdr, Data: data, Time: now.UTC()}
	if msg.Time.Before(c.head.time) {
		msg.Time = c.head.time
	}
	size := EncodedSize(&msg)
	dup, err := c.check(subject, len(hdr), len(data), size, &o, now)
	if err != nil || dup > 0 {
		m.enqueue(&item{done: done, seq: dup, dup: dup > 0, err: err})
		m.mu.Unlock()
		m.appendMu.Unlock()
		m.wakeCompleter()
		if roll {
			m.kick()
		}
		return
	}
	seq, t := c.assign(subject, o.MsgID, int64(size), now)
	msg.Seq, msg.Time = seq, t
	payload := EncodeEntry(make([]byte, 0, size), &msg)
	stored, _ := DecodeEntry(payload) // aliases payload, which the writer copies
	led := m.cur
	it := &item{done: done, seq: seq, led: led, msg: stored, msgID: o.MsgID, size: int64(size)}
	m.enqueue(it)
	led.appended++
	led.bytes += int64(size)
	roll = roll || m.rolloverDue(now)
	m.mu.Unlock()
	led.w.AppendAsync(payload, func(id int64, err error) { m.onAdded(it, id, err) })
	m.appendMu.Unlock()
	if roll {
		m.kick()
	}
}

func (m *ML) enqueue(it *item) {
	m.queue = append(m.queue, it)
}

// onAdded is the ledger writer's answer for it's entry (on the writer's
// callback goroutine).
func (m *ML) onAdded(it *item, id int64, err error) {
	if err == nil && it.led.firstSeq+uint64(id) != it.seq {
		err = fmt.Errorf("%w: seq %d went to entry %d of ledger %d (first seq %d)", ErrCorrupt, it.seq, id, it.led.id, it.led.firstSeq)
	}
	if err != nil {
		m.lose(fmt.Errorf("ledger %d: add of seq %d: %w", it.led.id, it.seq, err))
		return
	}
	m.mu.Lock()
	it.confirmed = true
	m.mu.Unlock()
	m.wakeCompleter()
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
		for {
			answers, exit := m.collect()
			for _, a := range answers {
				a.done(a.res, a.err)
			}
			if exit {
				return
			}
			if len(answers) == 0 {
				break
			}
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
		case it.confirmed && it.led.recorded:
			m.core.confirm(it.led.id, it.seq, it.msg.Subject, it.msgID, it.msg.Time, it.size)
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
