package consumer

import (
	"errors"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
)

// stall is why a dispatch round stopped.
type stall uint8

const (
	stallNone       stall = iota
	stallEmpty            // nothing to deliver
	stallAckPending       // max_ack_pending reached (redeliveries still go)
	stallReserve          // the persisted dseq reservation is used up
	stallLoad             // the Source failed (LoadErr)
	stallPaused           // pause_until in the future
)

// candidate is the next message to deliver: a queued redelivery (p set)
// or the next new matching message.
type candidate struct {
	seq uint64
	msg Msg
	p   *pend
}

// Dispatch delivers available messages to waiting requests: queued
// redeliveries first (lowest stream sequence first), then new matching
// messages, each to the oldest waiting request. New messages wait while
// num_ack_pending >= max_ack_pending. A message bigger than the head
// request's remaining max_bytes ends that request with "409 Message Size
// Exceeds MaxBytes" and goes to the next one. A request whose batch fills
// ends silently, or with "409 Batch Completed" if it had max_bytes left.
// Messages not matching the filters, and trimmed ones, are skipped and
// count as acked; with ack_policy none a message is acked as it is
// delivered. The round stops at the first Source error (LoadErr).
func (c *Consumer) Dispatch(now time.Time) []Out {
	c.observe(now)
	if c.stopped {
		return nil
	}
	return c.dispatch(now, nil)
}

func (c *Consumer) dispatch(now time.Time, outs []Out) []Out {
	c.loadErr = nil
	why := stallEmpty
	if c.paused(now) {
		why = stallPaused
	}
	for why != stallPaused && len(c.waiting) > 0 {
		r := c.waiting[0]
		if r.expired(now) {
			outs = append(outs, r.status(jsapi.StatusTimeout, jsapi.DescRequestTimeout))
			c.removeHead()
			continue
		}
		var cd candidate
		cd, why, outs = c.next(outs)
		if why != stallNone {
			break
		}
		meta := c.meta(cd)
		size := c.size(cd.msg, meta)
		if r.maxBytes > 0 && size > r.bytesLeft {
			outs = append(outs, r.status(jsapi.StatusConflict, jsapi.DescMaxBytesExceeded))
			c.removeHead()
			continue
		}
		outs = c.deliver(now, r, cd, meta, size, outs)
	}
	if why != stallReserve {
		outs = c.endNoWait(outs)
	}
	return outs
}

func (c *Consumer) paused(now time.Time) bool {
	return c.cfg.PauseUntil != nil && now.Before(*c.cfg.PauseUntil)
}

// next finds the next candidate. It may skip (and ack) filtered-out or
// trimmed messages and end redeliveries that reached max_deliver.
func (c *Consumer) next(outs []Out) (candidate, stall, []Out) {
	for c.rdq.len() > 0 {
		seq := c.rdq.peek()
		p := c.pending[seq]
		if p == nil || p.state != stQueued {
			c.rdq.pop()
			continue
		}
		if c.maxDelivered(p) { // max_deliver lowered since it was queued
			c.rdq.pop()
			outs = c.terminate(seq, p, outs)
			continue
		}
		if c.dseq >= c.persistedReserved {
			return candidate{}, stallReserve, outs
		}
		msg, err := c.load(seq)
		if errors.Is(err, ErrGone) {
			c.rdq.pop()
			c.removePending(seq)
			continue
		}
		if err != nil {
			c.loadErr = err
			return candidate{}, stallLoad, outs
		}
		return candidate{seq, msg, p}, stallNone, outs
	}
	if c.ackPendingFull() {
		return candidate{}, stallAckPending, outs
	}
	if c.dseq >= c.persistedReserved {
		return candidate{}, stallReserve, outs
	}
	for {
		last := c.src.LastSeq()
		seq := c.delivered + 1
		if seq > last {
			return candidate{}, stallEmpty, outs
		}
		if first := c.src.FirstSeq(); seq < first {
			c.skipTo(min(first-1, last))
			continue
		}
		if c.acks.Contains(seq) {
			c.delivered = seq
			c.gen++
			continue
		}
		msg, err := c.load(seq)
		if errors.Is(err, ErrGone) {
			c.skipTo(seq)
			continue
		}
		if err != nil {
			c.loadErr = err
			return candidate{}, stallLoad, outs
		}
		if !c.matches(msg.Subject) {
			c.skipTo(seq)
			continue
		}
		return candidate{seq, msg, nil}, stallNone, outs
	}
}

// load reads seq through the one-message lookahead (a message that did
// not fit a request is not read again).
func (c *Consumer) load(seq uint64) (Msg, error) {
	if seq < c.src.FirstSeq() {
		return Msg{}, ErrGone
	}
	if c.look.ok && c.look.msg.Seq == seq {
		return c.look.msg, nil
	}
	m, err := c.src.Load(seq)
	if err != nil {
		return Msg{}, err
	}
	m.Seq = seq
	c.look = lookahead{ok: true, msg: m}
	return m, nil
}

// skipTo acks (delivered, seq] unread: filtered out or trimmed.
func (c *Consumer) skipTo(seq uint64) {
	c.acks.AckRange(c.delivered+1, seq)
	c.delivered = seq
	c.gen++
}

func (c *Consumer) ackPendingFull() bool {
	return c.cfg.AckPolicy != jsapi.AckNone && c.cfg.MaxAckPending > 0 && len(c.pending) >= c.cfg.MaxAckPending
}

// meta is the ack subject content of delivering cd now.
func (c *Consumer) meta(cd candidate) jsapi.AckMeta {
	count := uint64(1)
	if cd.p != nil {
		count = uint64(cd.p.count) + 1
	}
	var ts int64
	if !cd.msg.Time.IsZero() {
		ts = cd.msg.Time.UnixNano()
	}
	return jsapi.AckMeta{Stream: c.stream, Consumer: c.name, Delivered: count, StreamSeq: cd.seq,
		ConsumerSeq: c.dseq + 1, Timestamp: ts, Pending: c.numPendingAbove(max(c.delivered, cd.seq))}
}

// size is what a delivery counts against max_bytes, as the reference and
// nats.go count it: subject, reply (the V1 ack subject), header and data.
func (c *Consumer) size(m Msg, meta jsapi.AckMeta) int {
	c.scratch = jsapi.AppendAckSubject(c.scratch[:0], meta)
	return len(m.Subject) + len(c.scratch) + len(m.Header) + len(m.Data)
}

func (c *Consumer) deliver(now time.Time, r *request, cd candidate, meta jsapi.AckMeta, size int, outs []Out) []Out {
	if cd.p != nil {
		c.rdq.pop()
	} else {
		c.delivered = cd.seq
	}
	c.look = lookahead{}
	c.dseq = meta.ConsumerSeq
	c.gen++
	c.reserve()
	if c.cfg.AckPolicy == jsapi.AckNone {
		c.acks.Ack(cd.seq)
	} else {
		p := cd.p
		if p == nil {
			p = &pend{}
			c.pending[cd.seq] = p
		}
		p.dseq, p.count = meta.ConsumerSeq, uint32(meta.Delivered)
		c.setTimer(cd.seq, p, stInFlight, now.Add(c.ackWait(p.count)))
	}
	outs = append(outs, Out{Kind: Deliver, Reply: r.reply, Msg: cd.msg, Ack: meta})
	c.lastDelivery, c.lastActivity = now, now
	r.batchLeft--
	r.delivered++
	r.lastSent = now
	if r.maxBytes > 0 {
		r.bytesLeft -= size
	}
	switch {
	case r.batchLeft == 0:
		if r.maxBytes > 0 && r.bytesLeft > 0 {
			outs = append(outs, r.status(jsapi.StatusConflict, jsapi.DescBatchCompleted))
		}
		c.removeHead()
	case r.maxBytes > 0 && r.bytesLeft == 0:
		c.removeHead() // exactly used up: the client counts bytes too
	}
	return outs
}

// numPendingAbove counts matching messages above stream sequence d:
// exact without filters; with filters an upper bound (see the package
// documentation).
func (c *Consumer) numPendingAbove(d uint64) uint64 {
	last := c.src.LastSeq()
	if first := c.src.FirstSeq(); first > 0 {
		d = max(d, first-1)
	}
	if last <= d {
		return 0
	}
	n := last - d
	if c.filters != nil && c.literal {
		var best uint64
		for _, f := range c.filters {
			best = max(best, c.src.LastForSubject(f))
		}
		if best <= d {
			return 0
		}
		n = min(n, best-d)
	}
	return n
}
