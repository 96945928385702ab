package mledger

import "time"

// msgOverhead is what a cached message costs beyond its encoded size
// (the Message value, the subject string, bookkeeping), for CacheBytes.
const msgOverhead = 128

type cachedMsg struct {
	m    Message
	size int64 // encoded entry size
}

// tailCache holds the most recent confirmed messages: a contiguous run
// of sequences ending at the last confirmed one. It is the core's
// msgInfo (exact sizes and times from From() up). Not safe for
// concurrent use (the ML's mu guards it).
type tailCache struct {
	msgs  []cachedMsg // msgs[head:] are cached, by sequence
	head  int
	bytes int64 // accounted: size + msgOverhead each
}

// push adds the next confirmed message. A message that does not follow
// the last cached one restarts the cache.
func (c *tailCache) push(m Message, size int64) {
	if n := c.len(); n > 0 && c.msgs[len(c.msgs)-1].m.Seq+1 != m.Seq {
		c.reset()
	}
	c.msgs = append(c.msgs, cachedMsg{m: m, size: size})
	c.bytes += size + msgOverhead
}

func (c *tailCache) len() int { return len(c.msgs) - c.head }

func (c *tailCache) reset() {
	c.msgs, c.head, c.bytes = nil, 0, 0
}

func (c *tailCache) popFront() {
	c.bytes -= c.msgs[c.head].size + msgOverhead
	c.msgs[c.head] = cachedMsg{}
	c.head++
	if c.head == len(c.msgs) {
		c.msgs, c.head = c.msgs[:0], 0
	} else if c.head > 1024 && c.head*2 > len(c.msgs) {
		c.msgs = append(c.msgs[:0:0], c.msgs[c.head:]...)
		c.head = 0
	}
}

// evict drops the oldest messages while over budget, but none at or
// above keepFrom (the first sequence of a ledger not yet closed).
func (c *tailCache) evict(budget int64, keepFrom uint64) {
	for c.len() > 0 && c.bytes > budget && c.msgs[c.head].m.Seq < keepFrom {
		c.popFront()
	}
}

// dropBelow drops the messages below seq (trimmed).
func (c *tailCache) dropBelow(seq uint64) {
	for c.len() > 0 && c.msgs[c.head].m.Seq < seq {
		c.popFront()
	}
}

func (c *tailCache) get(seq uint64) (cachedMsg, bool) {
	if c.len() == 0 {
		return cachedMsg{}, false
	}
	first := c.msgs[c.head].m.Seq
	if seq < first || seq-first >= uint64(c.len()) {
		return cachedMsg{}, false
	}
	return c.msgs[c.head+int(seq-first)], true
}

// From implements msgInfo.
func (c *tailCache) From() uint64 {
	if c.len() == 0 {
		return ^uint64(0)
	}
	return c.msgs[c.head].m.Seq
}

// Info implements msgInfo; seq must be cached.
func (c *tailCache) Info(seq uint64) (int64, time.Time) {
	cm, ok := c.get(seq)
	if !ok {
		return 0, time.Time{}
	}
	return cm.size, cm.m.Time
}

// backlogCache holds messages read from the bookies (read-ahead for
// readers behind the tail), evicted oldest-inserted first.
type backlogCache struct {
	budget int64
	bytes  int64
	msgs   map[uint64]cachedMsg
	order  []uint64
	head   int
}

func (b *backlogCache) get(seq uint64) (Message, bool) {
	cm, ok := b.msgs[seq]
	return cm.m, ok
}

func (b *backlogCache) put(m Message, size int64) {
	if b.msgs == nil {
		b.msgs = map[uint64]cachedMsg{}
	}
	if _, ok := b.msgs[m.Seq]; ok {
		return
	}
	b.msgs[m.Seq] = cachedMsg{m: m, size: size}
	b.order = append(b.order, m.Seq)
	b.bytes += size + msgOverhead
	for b.bytes > b.budget && b.head < len(b.order) {
		s := b.order[b.head]
		b.head++
		if cm, ok := b.msgs[s]; ok {
			b.bytes -= cm.size + msgOverhead
			delete(b.msgs, s)
		}
	}
	if b.head > 1024 && b.head*2 > len(b.order) {
		b.order = append(b.order[:0:0], b.order[b.head:]...)
		b.head = 0
	}
}
