package consumer

import (
	"github.com/stratamesh/strata/internal/ackset"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
)

// Ack applies an ack of the delivery (sseq, dseq) — the numbers of its
// $JS.ACK subject — with body a (spec §2.6):
//   - +ACK: ack_policy explicit acks sseq; all acks every pending
//     message <= sseq. A late ack of an earlier delivery still counts.
//   - -NAK: the delivery dseq (the latest of sseq) is redelivered now,
//     or not before a.Delay; at max_deliver it stops instead (Advisory).
//   - +WPI: restarts that delivery's ack_wait (or backoff) timer.
//   - +TERM: never redelivered; counts as acked (like +ACK, so with
//     ack_policy all it acks every pending message <= sseq too).
//   - +NXT: +ACK, then a.Next is a pull request answered to syncReply
//     (the PUB's reply); without a reply it is a plain ack.
//
// Unknown bodies, unknown or stale deliveries and duplicates change
// nothing. With syncReply set (AckSync, double ack) an AckReply Out is
// returned once the ack is persisted — from Persisted — or at once for a
// NAK, a WPI, or a no-op while nothing is waiting to be persisted. Acks
// after Stop are ignored.
func (c *Consumer) Ack(now time.Time, sseq, dseq uint64, a jsapi.Ack, syncReply string) []Out {
	c.observe(now)
	if c.stopped || a.Kind == jsapi.AckUnknown {
		return nil
	}
	c.lastActivity = now
	var outs []Out
	changed, durable := false, true
	switch a.Kind {
	case jsapi.AckAck, jsapi.AckTerm, jsapi.AckNext:
		changed = c.ackMsg(now, sseq)
	case jsapi.AckNak:
		changed, outs = c.nak(now, sseq, dseq, a.Delay, outs)
		durable = changed
	case jsapi.AckProgress:
		c.progress(now, sseq, dseq)
		durable = false
	}
	if a.Kind == jsapi.AckNext && syncReply != "" {
		req, err := jsapi.ParsePullRequest(a.Next)
		if err != nil {
			detail := err.Error()
			if bad, ok := err.(*jsapi.BadPullRequestError); ok {
				detail = bad.Detail
			}
			outs = append(outs, Out{Kind: Status, Reply: syncReply, Status: jsapi.StatusBadRequest,
				Description: jsapi.DescBadRequest(detail)})
			return c.dispatch(now, outs)
		}
		return c.pull(now, syncReply, req, outs)
	}
	if syncReply != "" {
		// A no-op may concern an ack not yet persisted: wait while dirty.
		if changed || (durable && c.gen != c.persistedGen) {
			c.syncs = append(c.syncs, syncWait{syncReply, c.gen})
		} else {
			outs = append(outs, Out{Kind: AckReply, Reply: syncReply})
		}
	}
	return c.dispatch(now, outs)
}

// ackMsg acks sseq (and, for ack_policy all, every pending message below
// it) and reports whether anything changed.
func (c *Consumer) ackMsg(now time.Time, sseq uint64) bool {
	if sseq == 0 || sseq > c.delivered {
		return false
	}
	n := 0
	if c.cfg.AckPolicy == jsapi.AckAll {
		for s := c.acks.NextUnacked(c.acks.MarkDelete()); s != 0 && s <= sseq; s = c.acks.NextUnacked(s) {
			if p := c.pending[s]; p != nil {
				c.unbind(p)
			}
			delete(c.pending, s)
			n++
		}
		c.acks.AckUpTo(sseq)
	} else if p, ok := c.pending[sseq]; ok {
		c.unbind(p)
		delete(c.pending, sseq)
		c.acks.Ack(sseq)
		n = 1
	} else if c.isHeld(sseq) {
		// Held since a restore, but delivered before it: the ack counts.
		c.unhold(sseq)
		c.acks.Ack(sseq)
		n = 1
	}
	if n == 0 {
		return false
	}
	c.gen++
	c.lastAck = now
	c.compactTimers()
	return true
}

// nak handles -NAK for the current delivery of sseq.
func (c *Consumer) nak(now time.Time, sseq, dseq uint64, delay time.Duration, outs []Out) (bool, []Out) {
	p := c.pending[sseq]
	if p == nil || p.state != stInFlight || (p.dseq != 0 && p.dseq != dseq) {
		return false, outs
	}
	if c.maxDelivered(p) {
		return true, c.terminate(sseq, p, outs)
	}
	if delay > 0 {
		c.setTimer(sseq, p, stDelayed, now.Add(delay))
		return false, outs
	}
	c.queue(sseq, p)
	return false, outs
}

// progress handles +WPI: the current delivery gets a fresh ack wait.
func (c *Consumer) progress(now time.Time, sseq, dseq uint64) {
	p := c.pending[sseq]
	if p == nil || p.state != stInFlight || (p.dseq != 0 && p.dseq != dseq) {
		return
	}
	c.setTimer(sseq, p, stInFlight, now.Add(c.ackWait(p.count)))
}

// queue puts a pending message on the redelivery queue.
func (c *Consumer) queue(seq uint64, p *pend) {
	c.unbind(p)
	p.state = stQueued
	p.ver++
	c.rdq.push(seqItem{seq: seq, ver: p.ver})
}

// terminate stops redelivering seq (max_deliver): acked, with an
// advisory.
func (c *Consumer) terminate(seq uint64, p *pend, outs []Out) []Out {
	c.removePending(seq)
	return append(outs, Out{Kind: Advisory, Seq: seq, Ack: jsapi.AckMeta{Stream: c.stream,
		Consumer: c.name, Delivered: uint64(p.count), StreamSeq: seq}})
}

// AckElsewhere acknowledges stream sequence seq on behalf of another
// region (a replicated subscription's ack set covers it, ARCHITECTURE
// §4): a pending delivery is settled, a message not yet delivered is
// marked so it never will be. It reports whether seq was newly acked.
// It sends nothing to clients (no ack reply, no advisory).
func (c *Consumer) AckElsewhere(seq uint64) bool {
	if seq == 0 || c.acks.Contains(seq) {
		return false
	}
	if c.pending[seq] != nil {
		c.removePending(seq)
		return true
	}
	if seq <= c.delivered {
		return false // delivered and not pending: acked already
	}
	c.acks.Ack(seq)
	c.gen++
	return true
}

// Acked returns a copy of the consumer's ack set (stream sequences).
func (c *Consumer) Acked() *ackset.Set { return c.acks.Clone() }

// removePending acks a pending message (terminated or trimmed).
func (c *Consumer) removePending(seq uint64) {
	if p := c.pending[seq]; p != nil {
		c.unbind(p)
	}
	delete(c.pending, seq)
	c.acks.Ack(seq)
	c.gen++
}

func (c *Consumer) maxDelivered(p *pend) bool {
	return c.cfg.MaxDeliver > 0 && int64(p.count) >= int64(c.cfg.MaxDeliver)
}

// ackWait is how long delivery number count waits for its ack:
// backoff[count-1] (the last one repeating), else ack_wait.
func (c *Consumer) ackWait(count uint32) time.Duration {
	if n := len(c.cfg.BackOff); n > 0 {
		return c.cfg.BackOff[min(max(int(count), 1), n)-1]
	}
	if c.cfg.AckWait > 0 {
		return c.cfg.AckWait
	}
	return jsapi.DefaultAckWait
}

// setTimer moves p to state with a deadline.
func (c *Consumer) setTimer(seq uint64, p *pend, state pstate, at time.Time) {
	if state != stInFlight {
		c.unbind(p)
	}
	p.state, p.at = state, at
	p.ver++
	c.timers.push(timerItem{at: at, seq: seq, ver: p.ver})
	c.compactTimers()
}

func (c *Consumer) timerValid(it timerItem) bool {
	p := c.pending[it.seq]
	return p != nil && p.ver == it.ver && (p.state == stInFlight || p.state == stDelayed)
}

// compactTimers bounds the stale items of both heaps.
func (c *Consumer) compactTimers() {
	if c.timers.len() > 2*len(c.pending)+64 {
		c.timers.compact(c.timerValid)
	}
	if c.rdq.len() > 2*len(c.pending)+64 {
		c.rdq.compact(c.queuedValid)
	}
}

// Tick runs the timers due at now: expired requests get "408 Request
// Timeout" with their pending headers; requests silent for their
// idle_heartbeat get "100 Idle Heartbeat"; a pin whose client has not
// pulled for priority_timeout ends (Unpinned); deliveries past their ack
// wait are queued for redelivery, or end with an Advisory at
// max_deliver; NAK delays that are due are queued. Then it dispatches.
func (c *Consumer) Tick(now time.Time) []Out {
	c.observe(now)
	if c.stopped {
		return nil
	}
	outs := c.expireRequests(now, nil)
	outs = c.heartbeats(now, outs)
	outs = c.expirePin(now, outs)
	first := c.src.FirstSeq()
	for c.timers.len() > 0 {
		it := c.timers.peek()
		if !c.timerValid(it) {
			c.timers.pop()
			continue
		}
		if it.at.After(now) {
			break
		}
		c.timers.pop()
		p := c.pending[it.seq]
		if it.seq < first { // trimmed meanwhile
			c.removePending(it.seq)
			continue
		}
		if p.state == stInFlight && c.maxDelivered(p) {
			outs = c.terminate(it.seq, p, outs)
			continue
		}
		c.queue(it.seq, p)
	}
	return c.dispatch(now, outs)
}

// NextDeadline is the earliest time Tick has something to do: a request
// expiry or heartbeat, an ack wait, a NAK delay, the end of a pin or the
// end of pause_until. Zero when there is none.
func (c *Consumer) NextDeadline() time.Time {
	var next time.Time
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if c.stopped {
		return next
	}
	for _, r := range c.waiting {
		earlier(r.expires)
		if r.hb > 0 {
			earlier(r.lastSent.Add(r.hb))
		}
	}
	for c.timers.len() > 0 && !c.timerValid(c.timers.peek()) {
		c.timers.pop()
	}
	if c.timers.len() > 0 {
		earlier(c.timers.peek().at)
	}
	if c.cfg.PauseUntil != nil && c.cfg.PauseUntil.After(c.now) {
		earlier(*c.cfg.PauseUntil)
	}
	if c.pin.id != "" {
		earlier(c.pin.deadline)
	}
	return next
}

// ackFloorDSeq is ack_floor.consumer_seq: the last dseq handed out when
// nothing is pending, else one below the lowest dseq of a pending
// delivery (the restored floor while a restored one has none yet).
func (c *Consumer) ackFloorDSeq() uint64 {
	floor := c.dseq
	if len(c.pending) > 0 {
		low := uint64(0)
		for _, p := range c.pending {
			if p.dseq == 0 {
				low = 0
				break
			}
			if low == 0 || p.dseq < low {
				low = p.dseq
			}
		}
		floor = c.floorDSeq
		if low > 0 {
			floor = low - 1
		}
	}
	c.floorDSeq = max(c.floorDSeq, floor)
	return c.floorDSeq
}

// Info reports the consumer as CONSUMER.INFO shows it. num_pending is
// exact without filters and an upper bound with them (see the package
// documentation). It calls the Source.
func (c *Consumer) Info(now time.Time) jsapi.ConsumerInfo {
	c.observe(now)
	redelivered := 0
	for _, p := range c.pending {
		if p.count > 1 {
			redelivered++
		}
	}
	info := jsapi.ConsumerInfo{
		Stream:         c.stream,
		Name:           c.name,
		Created:        c.created.UTC(),
		Config:         c.cfg,
		Delivered:      jsapi.SequenceInfo{Consumer: c.dseq, Stream: c.delivered, Last: timePtr(c.lastDelivery)},
		AckFloor:       jsapi.SequenceInfo{Consumer: c.ackFloorDSeq(), Stream: c.acks.MarkDelete(), Last: timePtr(c.lastAck)},
		NumAckPending:  len(c.pending),
		NumRedelivered: redelivered,
		NumWaiting:     len(c.waiting),
		NumPending:     c.numPendingAbove(c.delivered) + uint64(len(c.held)),
		PriorityGroups: c.priorityGroups(),
		TimeStamp:      now.UTC(),
	}
	if c.paused(now) {
		info.Paused = true
		info.PauseRemaining = c.cfg.PauseUntil.Sub(now)
	}
	return info
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
