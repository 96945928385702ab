package consumer

import "time"

// What the driver needs for a namespace's backlog quota (ARCHITECTURE §5;
// broker/jetstream measures and enforces it).

// Created is when the consumer was created (restored from its State, so
// the same on every owner of the topic).
func (c *Consumer) Created() time.Time { return c.created }

// NextUnacked is the lowest stream sequence above after that the
// consumer has not acknowledged (acked, filtered out, trimmed, evicted
// or acknowledged elsewhere); sequences above Delivered count as unacked
// unless an AckRange or AckElsewhere covered them.
func (c *Consumer) NextUnacked(after uint64) uint64 { return c.acks.NextUnacked(after) }

// AckRange acknowledges stream sequences first..last for the consumer
// without its clients (a backlog quota's consumer_backlog_eviction:
// Pulsar acknowledges a subscription's oldest messages for it): pending
// deliveries in the range are settled (a later ack of one is a
// duplicate, answered as such), held key_shared messages are dropped,
// and messages not read yet are marked so they are never delivered.
// Nothing is sent (no ack replies, no advisories). The read position
// moves up only when the mark-delete passes it. It returns how many
// sequences were newly acknowledged; an empty range (first > last) is
// a no-op.
func (c *Consumer) AckRange(first, last uint64) int {
	first = max(first, 1)
	if first > last || last <= c.acks.MarkDelete() {
		return 0
	}
	n := 0
	for seq := range c.pending {
		if seq >= first && seq <= last {
			c.removePending(seq)
			n++
		}
	}
	for i := len(c.held) - 1; i >= 0; i-- {
		if s := c.held[i].seq; s >= first && s <= last {
			c.unhold(s)
			c.acks.Ack(s)
			n++
		}
	}
	n += c.acks.AckRange(first, last)
	if md := c.acks.MarkDelete(); md > c.delivered {
		c.delivered = md // everything up to it is acked: nothing to read there
	}
	if n > 0 {
		c.gen++
	}
	return n
}
