package mledger

// BytesFrom is the bytes (EncodedSize) of the confirmed live messages
// from seq to the last one: exact over the tail cache (recent messages,
// where backlogs usually are), estimated below it from the ledgers'
// totals (a ledger wholly in the range exactly, a partial one by its
// average message size), as Pulsar estimates a subscription's backlog
// from its ledgers. For per-subscription backlog sizes (the namespace's
// backlog quota, ARCHITECTURE §5). No I/O, O(ledgers); 0 when seq is
// past the last confirmed message.
func (m *ML) BytesFrom(seq uint64) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.core.backlogBytes(seq, &m.cache)
}

// backlogBytes is BytesFrom on the core and the tail cache (used only
// when it ends at the last confirmed message, as it does but for a
// moment after a restart of the cache).
func (c *core) backlogBytes(seq uint64, tail *tailCache) uint64 {
	seq = max(seq, c.first)
	last := c.conf.seq
	if seq > last {
		return 0
	}
	if tail.len() == 0 || tail.at(tail.len()-1).m.Seq != last {
		return uint64(max(c.estimate(seq, last, noInfo{}), 0))
	}
	from := tail.From()
	if seq >= from {
		return uint64(tail.bytesFrom(seq))
	}
	return uint64(max(c.estimate(seq, from-1, noInfo{}), 0) + tail.bytesFrom(from))
}

// bytesFrom is the bytes of the cached messages from seq (cached) to the
// last cached.
func (c *tailCache) bytesFrom(seq uint64) int64 {
	i := int(seq - c.From())
	return c.at(c.n-1).cum - c.at(i).cum + c.at(i).size
}
