package mledger

// batcher is the batching policy (group commit at the managed-ledger
// level): a plain state machine that decides which queued messages go to
// the ledger writer as one entry, and when. No I/O, no clock, no locks.
//
// The rule: at most maxInflight entries are appended and not yet
// confirmed. Whenever fewer are, everything queued goes out at once, cut
// into as few entries as the caps allow: each entry takes the longest run
// of messages from the head of the queue that belong to one ledger, with
// at most maxMsgs messages and at most maxBytes encoded bytes (entry
// header included; a single message larger than that goes alone). So at
// low load an entry holds the one message just published, and under load
// messages gather while maxInflight entries are in flight, and entries
// grow with the load: the batch size follows the ledger's round trip by
// itself. (The ML adds one timer around it: the idle linger,
// Config.Linger, which holds next back while a burst arrives.)
type batcher struct {
	maxInflight, maxMsgs, maxBytes int

	inflight int     // entries handed out by next, not yet done
	q        []*item // queued messages, by sequence: q[head:]
	head     int
	bytes    int64 // EncodedSizes of the queued messages
}

func newBatcher(maxInflight, maxMsgs, maxBytes int) batcher {
	return batcher{maxInflight: max(maxInflight, 1), maxMsgs: max(maxMsgs, 1), maxBytes: maxBytes}
}

// push queues a stored message (its sequence follows the last pushed).
func (b *batcher) push(it *item) {
	b.q = append(b.q, it)
	b.bytes += it.size
}

// full reports whether a full entry is queued: maxMsgs messages or
// maxBytes bytes.
func (b *batcher) full() bool {
	return b.queued() >= b.maxMsgs || b.bytes+batchHeaderSize >= int64(b.maxBytes)
}

// queued is the number of queued messages.
func (b *batcher) queued() int { return len(b.q) - b.head }

// next takes the next entry to append, if one may go now: a new slice of
// queued messages (at least one), counted in flight. nil if the queue is
// empty or maxInflight entries are in flight.
func (b *batcher) next() []*item {
	if b.inflight >= b.maxInflight || b.queued() == 0 {
		return nil
	}
	first := b.q[b.head]
	n, size := 1, batchSize(int(first.size))
	for _, it := range b.q[b.head+1:] {
		if n == b.maxMsgs || it.led != first.led || size+int(it.size) > b.maxBytes {
			break
		}
		n++
		size += int(it.size)
	}
	out := make([]*item, n)
	copy(out, b.q[b.head:b.head+n])
	for i := b.head; i < b.head+n; i++ {
		b.bytes -= b.q[i].size
		b.q[i] = nil
	}
	b.head += n
	if b.head == len(b.q) {
		b.q, b.head = b.q[:0], 0
	} else if b.head > 1024 && b.head*2 > len(b.q) {
		b.q = append(b.q[:0:0], b.q[b.head:]...)
		b.head = 0
	}
	b.inflight++
	return out
}

// done records that an entry handed out by next was confirmed.
func (b *batcher) done() {
	if b.inflight > 0 {
		b.inflight--
	}
}
