package mledger

import "time"

// msgOverhead is what a cached message costs beyond its encoded size
// (the Message value with its Origin, the subject string, bookkeeping),
// for CacheBytes.
const msgOverhead = 192

type cachedMsg struct {
	m    Message
	size int64 // encoded entry size
	// cum is the sum of size over the cached run up to this message
	// (since the cache last restarted): ranges' bytes in O(1).
	cum int64
}

// tailCache holds the most recent confirmed messages: a contiguous run
// of sequences ending at the last confirmed one, in a ring buffer (so the
// hot publish path neither copies nor reallocates once it has grown). It
// is the core's msgInfo (exact sizes and times from From() up). Not safe
// for concurrent use (the ML's mu guards it).
type tailCache struct {
	ring  []cachedMsg // ring[head], ring[head+1], … (mod len) hold n messages
	head  int
	n     int
	bytes int64 // accounted: size + msgOverhead each
}

// at is the i-th cached message (0 = oldest).
func (c *tailCache) at(i int) *cachedMsg { return &c.ring[(c.head+i)%len(c.ring)] }

// push adds the next confirmed message. A message that does not follow
// the last cached one restarts the cache.
func (c *tailCache) push(m Message, size int64) {
	if c.n > 0 && c.at(c.n-1).m.Seq+1 != m.Seq {
		c.reset()
	}
	if c.n == len(c.ring) {
		grown := make([]cachedMsg, max(64, 2*len(c.ring)))
		for i := 0; i < c.n; i++ {
			grown[i] = *c.at(i)
		}
		c.ring, c.head = grown, 0
	}
	cum := size
	if c.n > 0 {
		cum += c.at(c.n - 1).cum
	}
	*c.at(c.n) = cachedMsg{m: m, size: size, cum: cum}
	c.n++
	c.bytes += size + msgOverhead
}

func (c *tailCache) len() int { return c.n }

func (c *tailCache) reset() {
	c.ring, c.head, c.n, c.bytes = nil, 0, 0, 0
}

func (c *tailCache) popFront() {
	first := c.at(0)
	c.bytes -= first.size + msgOverhead
	*first = cachedMsg{}
	c.head = (c.head + 1) % len(c.ring)
	c.n--
	if c.n == 0 {
		c.head = 0
	}
}

// evict drops the oldest messages while over budget, but none at or
// above keepFrom (the first sequence of a ledger not yet closed).
func (c *tailCache) evict(budget int64, keepFrom uint64) {
	for c.n > 0 && c.bytes > budget && c.at(0).m.Seq < keepFrom {
		c.popFront()
	}
}

// dropBelow drops the messages below seq (trimmed).
func (c *tailCache) dropBelow(seq uint64) {
	for c.n > 0 && c.at(0).m.Seq < seq {
		c.popFront()
	}
}

func (c *tailCache) get(seq uint64) (cachedMsg, bool) {
	if c.n == 0 {
		return cachedMsg{}, false
	}
	first := c.at(0).m.Seq
	if seq < first || seq-first >= uint64(c.n) {
		return cachedMsg{}, false
	}
	return *c.at(int(seq - first)), true
}

// From implements msgInfo.
func (c *tailCache) From() uint64 {
	if c.n == 0 {
		return ^uint64(0)
	}
	return c.at(0).m.Seq
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
