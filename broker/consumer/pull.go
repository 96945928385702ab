package consumer

import (
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
)

// request is a waiting pull request (spec §2.5).
type request struct {
	reply     string
	batchLeft int
	maxBytes  int // 0: no byte limit
	bytesLeft int
	noWait    bool
	expires   time.Time     // zero: never
	hb        time.Duration // 0: no idle heartbeats
	lastSent  time.Time     // last message or status sent to it (or arrival)
	delivered int
	pinID     string // the pin id it was sent with or given (pinned_client)
}

// status is a status Out for r with its pending headers.
func (r *request) status(code int, desc string) Out {
	return Out{Kind: Status, Reply: r.reply, Status: code, Description: desc,
		PendingMsgs: r.batchLeft, PendingBytes: r.bytesLeft}
}

func (r *request) expired(now time.Time) bool {
	return !r.expires.IsZero() && !now.Before(r.expires)
}

// Pull handles a CONSUMER.MSG.NEXT request (or the pull of a +NXT ack)
// answered to reply: it checks the request against the consumer's limits
// (a 400 or 409 status on failure), queues it FIFO and dispatches. A
// no_wait request is answered within the call: what is available, then
// "404 No Messages" unless its batch filled. (With expires set, a no_wait
// request that got nothing yet keeps waiting until a message or its
// expiry, like the reference's legacy Fetch.) Pulls from the same reply
// are separate requests. A request without a reply is ignored. For the
// priority-group fields (group, id) see pin.go: a pull with a stale pin
// id gets "423 Nats-Pin-Id mismatch".
func (c *Consumer) Pull(now time.Time, reply string, req jsapi.PullRequest) []Out {
	c.observe(now)
	return c.pull(now, reply, req, nil)
}

func (c *Consumer) pull(now time.Time, reply string, req jsapi.PullRequest, outs []Out) []Out {
	if reply == "" {
		return outs
	}
	c.lastActivity = now
	batch := req.Batch
	if batch == 0 {
		batch = 1
	}
	r := &request{reply: reply, batchLeft: batch, maxBytes: req.MaxBytes, bytesLeft: req.MaxBytes,
		noWait: req.NoWait, hb: req.IdleHeartbeat, lastSent: now, pinID: req.ID}
	fail := func(code int, desc string) []Out {
		return append(outs, Out{Kind: Status, Reply: reply, Status: code, Description: desc})
	}
	cfg := &c.cfg
	switch {
	case c.stopped:
		return append(outs, r.status(jsapi.StatusConflict, c.stopDesc))
	case batch < 0, req.Expires < 0, req.MaxBytes < 0, req.IdleHeartbeat < 0:
		return fail(jsapi.StatusBadRequest, jsapi.DescBadRequest("negative value"))
	case req.IdleHeartbeat > 0 && req.IdleHeartbeat > req.Expires/2:
		return fail(jsapi.StatusBadRequest, jsapi.DescBadRequest("heartbeat value too large"))
	case cfg.MaxRequestBatch > 0 && batch > cfg.MaxRequestBatch:
		return fail(jsapi.StatusConflict, jsapi.DescExceededMaxRequestBatch(cfg.MaxRequestBatch))
	case req.Expires > 0 && cfg.MaxRequestExpires > 0 && req.Expires > cfg.MaxRequestExpires:
		return fail(jsapi.StatusConflict, jsapi.DescExceededMaxRequestExpires(cfg.MaxRequestExpires))
	case req.MaxBytes > 0 && cfg.MaxRequestMaxBytes > 0 && req.MaxBytes > cfg.MaxRequestMaxBytes:
		return fail(jsapi.StatusConflict, jsapi.DescExceededMaxRequestMaxBytes(cfg.MaxRequestMaxBytes))
	}
	if code, desc := c.pullPriority(now, &req); code != 0 {
		return fail(code, desc)
	}
	maxWaiting := cfg.MaxWaiting
	if maxWaiting <= 0 {
		maxWaiting = jsapi.DefaultMaxWaiting
	}
	if len(c.waiting) >= maxWaiting {
		outs = c.expireRequests(now, outs) // make room if any expired
	}
	if len(c.waiting) >= maxWaiting {
		if r.noWait && req.Expires == 0 && c.rdq.len() == 0 && c.numPendingAbove(c.delivered) == 0 {
			return fail(jsapi.StatusNoMessages, jsapi.DescNoMessages) // as the reference: nothing to wait for
		}
		return fail(jsapi.StatusConflict, jsapi.DescExceededMaxWaiting)
	}
	if req.Expires > 0 {
		r.expires = now.Add(req.Expires)
	}
	c.waiting = append(c.waiting, r)
	c.noWaits = c.noWaits || r.noWait
	return c.dispatch(now, outs)
}

// expireRequests answers expired requests with 408 and drops them.
func (c *Consumer) expireRequests(now time.Time, outs []Out) []Out {
	kept := c.waiting[:0]
	for _, r := range c.waiting {
		if r.expired(now) {
			outs = append(outs, r.status(jsapi.StatusTimeout, jsapi.DescRequestTimeout))
			continue
		}
		kept = append(kept, r)
	}
	clear(c.waiting[len(kept):])
	c.waiting = kept
	return outs
}

// heartbeats sends "100 Idle Heartbeat" to requests silent for their
// idle_heartbeat.
func (c *Consumer) heartbeats(now time.Time, outs []Out) []Out {
	for _, r := range c.waiting {
		if r.hb > 0 && !now.Before(r.lastSent.Add(r.hb)) {
			outs = append(outs, Out{Kind: Status, Reply: r.reply, Status: jsapi.StatusIdleHeartbeat,
				Description: jsapi.DescIdleHeartbeat, LastConsumer: c.dseq, LastStream: c.delivered})
			r.lastSent = now
		}
	}
	return outs
}

// endNoWait answers the no_wait requests a dispatch round could not fill
// with 404 (those with an expiry only once they got something).
func (c *Consumer) endNoWait(outs []Out) []Out {
	if !c.noWaits {
		return outs
	}
	c.noWaits = false
	kept := c.waiting[:0]
	for _, r := range c.waiting {
		if r.noWait && (r.expires.IsZero() || r.delivered > 0) {
			outs = append(outs, Out{Kind: Status, Reply: r.reply, Status: jsapi.StatusNoMessages,
				Description: jsapi.DescNoMessages})
			continue
		}
		c.noWaits = c.noWaits || r.noWait
		kept = append(kept, r)
	}
	clear(c.waiting[len(kept):])
	c.waiting = kept
	return outs
}

// removeAt drops waiting request i.
func (c *Consumer) removeAt(i int) {
	if i == 0 {
		c.waiting[0] = nil
		c.waiting = c.waiting[1:]
		return
	}
	copy(c.waiting[i:], c.waiting[i+1:])
	c.waiting[len(c.waiting)-1] = nil
	c.waiting = c.waiting[:len(c.waiting)-1]
}
