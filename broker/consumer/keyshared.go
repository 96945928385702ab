package consumer

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/broker/natsproto"
)

// Key_Shared subscriptions (Pulsar's semantics; JetStream has no
// equivalent, spec §4), selected through the consumer's metadata:
//
//	"strata.subscription": "key_shared"
//	"strata.key": "subject" (the default) or "header:<Header-Name>"
//
// Every message has a key: the value of header <Header-Name> ("" when the
// message has none), or its subject's tokens after the stream's topic
// subject "tenant.namespace.topic" (TopicSubject; "" for the bare topic
// subject), or its whole subject for streams with other subjects.
//
// A puller is a pull request's reply subject (nats.go's Consume and
// Messages keep one inbox for the whole subscription; each Fetch uses a
// new one). A key is bound to the puller that has a delivery of it in
// flight (delivered, ack wait running); while bound, its messages go only
// to that puller's requests, and first deliveries go in stream order. A
// key with nothing in flight (acked, termed, NAKed, or its ack wait
// expired) is free: its next message may go to any puller, which binds
// it.
//
// Dispatch takes, one pass per round: queued redeliveries, lowest stream
// sequence first; then held messages, lowest first; then new messages.
// Each goes to the oldest waiting request that may take it; one that
// none may take stays where it is. A new message whose key is bound to a
// puller without a waiting request, or that has held messages, is held:
// read past, not delivered, and delivered before any new message once a
// request may take it. At most maxHeld messages are held (max_ack_pending,
// or DefaultMaxAckPending when unlimited); beyond that the cursor stops
// reading until some are delivered.
//
// key_shared needs ack_policy explicit (ack none binds nothing; with
// ack all one puller's ack would settle another's deliveries, which
// Pulsar also refuses for Key_Shared) and no priority groups.

// Metadata keys and values a consumer config may set.
const (
	MetaSubscription      = "strata.subscription"
	MetaKey               = "strata.key"
	SubscriptionShared    = "shared"
	SubscriptionKeyShared = "key_shared"
	KeyBySubject          = "subject"
	KeyByHeaderPrefix     = "header:"
)

// keySpec says where a key_shared consumer's keys come from.
type keySpec struct {
	header string // the header whose value is the key; "" = by subject
}

// parseKeyShared reads the key_shared metadata of cfg: nil when the
// consumer is not key_shared; an ErrInvalidConfig naming the metadata
// key for a value Strata does not read.
func parseKeyShared(cfg *jsapi.ConsumerConfig) (*keySpec, error) {
	sub, hasSub := cfg.Metadata[MetaSubscription]
	key, hasKey := cfg.Metadata[MetaKey]
	switch {
	case !hasSub || sub == SubscriptionShared:
		if hasKey {
			return nil, fmt.Errorf("%w: metadata %q is set but %q is not %q", ErrInvalidConfig, MetaKey, MetaSubscription, SubscriptionKeyShared)
		}
		return nil, nil
	case sub != SubscriptionKeyShared:
		return nil, fmt.Errorf("%w: metadata %q: %q is not one of %q, %q (Exclusive/Failover is priority_policy %q)",
			ErrInvalidConfig, MetaSubscription, sub, SubscriptionShared, SubscriptionKeyShared, jsapi.PriorityPinned)
	case cfg.AckPolicy != jsapi.AckExplicit:
		return nil, fmt.Errorf("%w: metadata %q: %q needs ack_policy explicit, not %s",
			ErrInvalidConfig, MetaSubscription, SubscriptionKeyShared, cfg.AckPolicy)
	case cfg.PriorityPolicy != jsapi.PriorityNone:
		return nil, fmt.Errorf("%w: metadata %q: %q does not go with priority_policy %s",
			ErrInvalidConfig, MetaSubscription, SubscriptionKeyShared, cfg.PriorityPolicy)
	}
	ks := &keySpec{}
	switch {
	case !hasKey || key == KeyBySubject:
	case strings.HasPrefix(key, KeyByHeaderPrefix) && validHeaderName(key[len(KeyByHeaderPrefix):]):
		ks.header = key[len(KeyByHeaderPrefix):]
	default:
		return nil, fmt.Errorf("%w: metadata %q: %q is neither %q nor %q followed by a header name",
			ErrInvalidConfig, MetaKey, key, KeyBySubject, KeyByHeaderPrefix)
	}
	return ks, nil
}

// validHeaderName: printable ASCII without spaces or ':'.
func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		if b := h[i]; b <= ' ' || b >= 0x7f || b == ':' {
			return false
		}
	}
	return true
}

// keyOf is m's key (see above).
func (c *Consumer) keyOf(m Msg) string {
	if c.ks.header != "" {
		v, _ := natsproto.HeaderGet(m.Header, c.ks.header)
		return string(v)
	}
	if c.topic != "" && strings.HasPrefix(m.Subject, c.topic) {
		rest := m.Subject[len(c.topic):]
		if rest == "" {
			return ""
		}
		if rest[0] == '.' {
			return rest[1:]
		}
	}
	return m.Subject
}

// binding is a key bound to a puller: n deliveries of it are in flight
// there.
type binding struct {
	puller string
	n      int
}

// heldMsg is a message read past but not delivered yet.
type heldMsg struct {
	seq   uint64
	key   string
	keyed bool // key is known (false after a restore until loaded)
}

// maxHeld bounds the held messages.
func (c *Consumer) maxHeld() int {
	if c.cfg.MaxAckPending > 0 {
		return c.cfg.MaxAckPending
	}
	return jsapi.DefaultMaxAckPending
}

// bind records that p (of stream sequence seq) is in flight at puller.
func (c *Consumer) bind(p *pend, puller string) {
	p.reply = puller
	if c.ks == nil || !p.keyed || p.bound {
		return
	}
	b := c.keys[p.key]
	if b == nil {
		b = &binding{puller: puller}
		c.keys[p.key] = b
	}
	b.n++
	p.bound = true
}

// unbind records that p is no longer in flight.
func (c *Consumer) unbind(p *pend) {
	if !p.bound {
		return
	}
	p.bound = false
	if b := c.keys[p.key]; b != nil {
		if b.n--; b.n <= 0 {
			delete(c.keys, p.key)
		}
	}
}

// eligible is the index of the oldest waiting request that may take a
// message with key, -1 if none.
func (c *Consumer) eligible(key string) int {
	b := c.keys[key]
	if b == nil {
		if len(c.waiting) == 0 {
			return -1
		}
		return 0
	}
	for i, r := range c.waiting {
		if r.reply == b.puller {
			return i
		}
	}
	return -1
}

// dispatchKeyed is a key_shared dispatch round (see above). The waiting
// requests only leave and keys only get bound during a round, so a
// message that no request may take when the pass reaches it stays so: one
// pass is enough.
func (c *Consumer) dispatchKeyed(now time.Time, outs []Out) (stall, []Out) {
	outs = c.expireRequests(now, outs)
	if len(c.waiting) == 0 {
		return stallEmpty, outs
	}
	// Redeliveries.
	for _, it := range c.rdq.sorted(c.queuedValid) {
		if len(c.waiting) == 0 {
			return stallEmpty, outs
		}
		seq, p := it.seq, c.pending[it.seq]
		if c.maxDelivered(p) {
			outs = c.terminate(seq, p, outs)
			continue
		}
		if c.dseq >= c.persistedReserved {
			return stallReserve, outs
		}
		cd := candidate{seq: seq, p: p, key: p.key}
		if !p.keyed { // restored: its key is known once it is loaded
			m, err := c.load(seq)
			if errors.Is(err, ErrGone) {
				c.removePending(seq)
				continue
			}
			if err != nil {
				c.loadErr = err
				return stallLoad, outs
			}
			p.key, p.keyed = c.keyOf(m), true
			cd.msg, cd.key, cd.loaded = m, p.key, true
		}
		var why stall
		if why, outs = c.offer(now, cd, outs); why != stallNone {
			return why, outs
		}
	}
	// Held messages, then new ones.
	if why := c.resolveHeld(); why != stallNone {
		return why, outs
	}
	for _, h := range append([]heldMsg(nil), c.held...) {
		if len(c.waiting) == 0 {
			return stallEmpty, outs
		}
		if why := c.newStall(); why != stallNone {
			return why, outs
		}
		var why stall
		why, outs = c.offer(now, candidate{seq: h.seq, key: h.key, held: true}, outs)
		if why != stallNone {
			return why, outs
		}
	}
	for len(c.waiting) > 0 {
		if why := c.newStall(); why != stallNone {
			return why, outs
		}
		cd, why := c.nextNew()
		if why != stallNone {
			return why, outs
		}
		cd.key = c.keyOf(cd.msg)
		if c.heldKeys[cd.key] > 0 || c.eligible(cd.key) < 0 {
			if len(c.held) >= c.maxHeld() {
				return stallHeld, outs
			}
			c.hold(cd.seq, cd.key)
			continue
		}
		cd.loaded = true
		if why, outs = c.offer(now, cd, outs); why != stallNone {
			return why, outs
		}
	}
	return stallEmpty, outs
}

// newStall says whether a new message (or a held one: also a first
// delivery) may not be delivered now.
func (c *Consumer) newStall() stall {
	switch {
	case c.ackPendingFull():
		return stallAckPending
	case c.dseq >= c.persistedReserved:
		return stallReserve
	}
	return stallNone
}

// offer delivers cd to the oldest waiting request that may take it, if
// any, loading the message first when needed. Requests it does not fit
// (max_bytes) end with 409 and the next one is tried.
func (c *Consumer) offer(now time.Time, cd candidate, outs []Out) (stall, []Out) {
	for {
		i := c.eligible(cd.key)
		if i < 0 {
			return stallNone, outs
		}
		if !cd.loaded {
			m, err := c.load(cd.seq)
			if errors.Is(err, ErrGone) {
				if cd.held {
					c.unhold(cd.seq)
					c.acks.Ack(cd.seq)
					c.gen++
				} else {
					c.removePending(cd.seq)
				}
				return stallNone, outs
			}
			if err != nil {
				c.loadErr = err
				return stallLoad, outs
			}
			cd.msg, cd.loaded = m, true
		}
		r := c.waiting[i]
		meta := c.meta(cd)
		size := c.size(cd.msg, meta)
		if r.maxBytes > 0 && size > r.bytesLeft {
			outs = append(outs, r.status(jsapi.StatusConflict, jsapi.DescMaxBytesExceeded))
			c.removeAt(i)
			continue
		}
		return stallNone, c.deliver(now, i, cd, meta, size, outs)
	}
}

// hold reads seq past without delivering it.
func (c *Consumer) hold(seq uint64, key string) {
	c.held = append(c.held, heldMsg{seq: seq, key: key, keyed: true})
	c.heldKeys[key]++
	c.delivered = seq
	c.look = lookahead{}
	c.gen++
}

// unhold removes seq from the held messages (delivered or gone).
func (c *Consumer) unhold(seq uint64) {
	i := sort.Search(len(c.held), func(i int) bool { return c.held[i].seq >= seq })
	if i == len(c.held) || c.held[i].seq != seq {
		return
	}
	if h := c.held[i]; !h.keyed {
		c.heldUnkeyed--
	} else if c.heldKeys[h.key]--; c.heldKeys[h.key] <= 0 {
		delete(c.heldKeys, h.key)
	}
	c.held = append(c.held[:i], c.held[i+1:]...)
	c.gen++
}

// isHeld reports whether seq is held.
func (c *Consumer) isHeld(seq uint64) bool {
	i := sort.Search(len(c.held), func(i int) bool { return c.held[i].seq >= seq })
	return i < len(c.held) && c.held[i].seq == seq
}

// heldAbove counts the held messages above seq.
func (c *Consumer) heldAbove(seq uint64) int {
	return len(c.held) - sort.Search(len(c.held), func(i int) bool { return c.held[i].seq > seq })
}

// resolveHeld loads the keys of held messages restored without one (the
// order of first deliveries needs every held key). Trimmed ones are
// dropped and count as acked. It stops at a Source error (stallLoad).
func (c *Consumer) resolveHeld() stall {
	if c.heldUnkeyed == 0 {
		return stallNone
	}
	kept := c.held[:0]
	for i, h := range c.held {
		if !h.keyed {
			m, err := c.load(h.seq)
			if errors.Is(err, ErrGone) {
				c.heldUnkeyed--
				c.acks.Ack(h.seq)
				c.gen++
				continue
			}
			if err != nil {
				c.loadErr = err
				c.held = append(kept, c.held[i:]...)
				return stallLoad
			}
			h.key, h.keyed = c.keyOf(m), true
			c.heldKeys[h.key]++
			c.heldUnkeyed--
		}
		kept = append(kept, h)
	}
	clear(c.held[len(kept):])
	c.held = kept
	return stallNone
}

// heldSet is the set of held sequences of a State to restore (nil when
// the consumer is not key_shared).
func (c *Consumer) heldSet(st *State) map[uint64]bool {
	if c.ks == nil || len(st.Held) == 0 {
		return nil
	}
	set := make(map[uint64]bool, len(st.Held))
	for _, s := range st.Held {
		set[s] = true
	}
	return set
}

// restoreHeld adds a held sequence of a restored State (in ascending
// order); its key is loaded on the next dispatch.
func (c *Consumer) restoreHeld(seq uint64) {
	c.held = append(c.held, heldMsg{seq: seq})
	c.heldUnkeyed++
}
