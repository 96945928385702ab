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
	stallHeld             // key_shared: as many messages held as allowed
	stallNoRequest        // no waiting request may take the message (pinned)
)

// candidate is the next message to deliver: a queued redelivery (p set),
// a held message (key_shared), or the next new matching message.
type candidate struct {
	seq    uint64
	msg    Msg
	p      *pend
	key    string // key_shared: the message's key
	held   bool   // a held message: a first delivery below the read position
	loaded bool   // msg is set
}

// Dispatch delivers available messages to waiting requests: queued
// redeliveries first (lowest stream sequence first), then new matching
// messages, each to the oldest waiting request that may take it (any
// request, but see pin.go for pinned_client consumers and keyshared.go
// for key_shared ones). New messages wait while num_ack_pending >=
// max_ack_pending. A message bigger than the head
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
	switch {
	case c.paused(now):
		why = stallPaused
	case c.ks != nil:
		why, outs = c.dispatchKeyed(now, outs)
	default:
		why, outs = c.dispatchFIFO(now, outs)
	}
	if why != stallReserve {
		outs = c.endNoWait(outs)
	}
	return outs
}

// dispatchFIFO is a dispatch round of a consumer that is not key_shared:
// each message to the oldest waiting request (the pinned one for
// pinned_client).
func (c *Consumer) dispatchFIFO(now time.Time, outs []Out) (stall, []Out) {
	why := stallEmpty
	for len(c.waiting) > 0 {
		r := c.waiting[0]
		if r.expired(now) {
			outs = append(outs, r.status(jsapi.StatusTimeout, jsapi.DescRequestTimeout))
			c.removeAt(0)
			continue
		}
		var cd candidate
		cd, why, outs = c.next(outs)
		if why != stallNone {
			break
		}
		i, newPin := 0, false
		if c.pinned() {
			if i, newPin, outs = c.pickPinned(now, outs); i < 0 {
				why = stallNoRequest
				break
			}
			r = c.waiting[i]
		}
		meta := c.meta(cd)
		size := c.size(cd.msg, meta)
		if r.maxBytes > 0 && size > r.bytesLeft {
			outs = append(outs, r.status(jsapi.StatusConflict, jsapi.DescMaxBytesExceeded))
			if newPin {
				c.unassignPin(r)
			}
			c.removeAt(i)
			continue
		}
		if newPin {
			outs = append(outs, c.pinConfirm(r))
		}
		outs = c.deliver(now, i, cd, meta, size, outs)
	}
	return why, outs
}

func (c *Consumer) paused(now time.Time) bool {
	return c.cfg.PauseUntil != nil && now.Before(*c.cfg.PauseUntil)
}

// next finds the next candidate. It may skip (and ack) filtered-out or
// trimmed messages and end redeliveries that reached max_deliver.
func (c *Consumer) next(outs []Out) (candidate, stall, []Out) {
	for c.rdq.len() > 0 {
		it := c.rdq.peek()
		if !c.queuedValid(it) {
			c.rdq.pop()
			continue
		}
		seq, p := it.seq, c.pending[it.seq]
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
		if msg.Skip { // acknowledged elsewhere meanwhile
			c.rdq.pop()
			c.removePending(seq)
			continue
		}
		return candidate{seq: seq, msg: msg, p: p, loaded: true}, stallNone, outs
	}
	if c.ackPendingFull() {
		return candidate{}, stallAckPending, outs
	}
	if c.dseq >= c.persistedReserved {
		return candidate{}, stallReserve, outs
	}
	cd, why := c.nextNew()
	return cd, why, outs
}

// queuedValid reports whether a redelivery queue item is current.
func (c *Consumer) queuedValid(it seqItem) bool {
	p := c.pending[it.seq]
	return p != nil && p.state == stQueued && p.ver == it.ver
}

// nextNew reads the next new matching message, skipping (and acking)
// filtered-out and trimmed ones.
func (c *Consumer) nextNew() (candidate, stall) {
	for {
		last := c.src.LastSeq()
		seq := c.delivered + 1
		if seq > last {
			return candidate{}, stallEmpty
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
			return candidate{}, stallLoad
		}
		if !c.matches(msg.Subject) || msg.Skip {
			c.skipTo(seq)
			continue
		}
		return candidate{seq: seq, msg: msg, loaded: true}, stallNone
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
	pending := c.numPendingAbove(max(c.delivered, cd.seq))
	if len(c.held) > 0 {
		pending += uint64(c.heldAbove(cd.seq))
	}
	return jsapi.AckMeta{Stream: c.stream, Consumer: c.name, Delivered: count, StreamSeq: cd.seq,
		ConsumerSeq: c.dseq + 1, Timestamp: ts, Pending: pending}
}

// size is what a delivery counts against max_bytes, as the reference and
// nats.go count it: subject, reply (the V1 ack subject), header and data.
func (c *Consumer) size(m Msg, meta jsapi.AckMeta) int {
	c.scratch = jsapi.AppendAckSubject(c.scratch[:0], meta)
	return len(m.Subject) + len(c.scratch) + len(m.Header) + len(m.Data)
}

// deliver sends cd to waiting request i.
func (c *Consumer) deliver(now time.Time, i int, cd candidate, meta jsapi.AckMeta, size int, outs []Out) []Out {
	r := c.waiting[i]
	switch {
	case cd.p != nil: // a redelivery: its queue item is stale from here on
	case cd.held:
		c.unhold(cd.seq)
	default:
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
			p = &pend{key: cd.key, keyed: c.ks != nil}
			c.pending[cd.seq] = p
		}
		p.dseq, p.count = meta.ConsumerSeq, uint32(meta.Delivered)
		c.setTimer(cd.seq, p, stInFlight, now.Add(c.ackWait(p.count)))
		c.bind(p, r.reply)
	}
	out := Out{Kind: Deliver, Reply: r.reply, Msg: cd.msg, Ack: meta}
	if c.pinned() {
		out.PinID = r.pinID
	}
	outs = append(outs, out)
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
		c.removeAt(i)
	case r.maxBytes > 0 && r.bytesLeft == 0:
		c.removeAt(i) // exactly used up: the client counts bytes too
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
	// Messages acknowledged ahead of delivery (AckElsewhere: another
	// region's consumer acked them) will never be delivered.
	if ahead := uint64(c.acks.Count(d+1, last)); ahead < n {
		n -= ahead
	} else {
		n = 0
	}
	return n
}
