package mledger

import "time"

// dedupWindow remembers Nats-Msg-Ids for a window of publish time. Plain
// data: no clock, no locks (the caller passes now and holds the lock).
// Ids are added with non-decreasing times (publish times are monotonic),
// so expiry pops from the front of a FIFO.
type dedupWindow struct {
	window time.Duration
	ids    map[string]dedupRec
	fifo   []dedupItem // by time; fifo[head:] are live or stale
	head   int
}

type dedupRec struct {
	seq uint64
	t   time.Time
}

type dedupItem struct {
	id  string
	seq uint64
	t   time.Time
}

func newDedupWindow(window time.Duration) dedupWindow {
	return dedupWindow{window: window, ids: map[string]dedupRec{}}
}

// expired reports whether a record of time t is outside the window at
// now.
func (d *dedupWindow) expired(t, now time.Time) bool { return now.Sub(t) >= d.window }

// lookup returns the sequence id was stored under, if that is within the
// window at now.
func (d *dedupWindow) lookup(id string, now time.Time) (uint64, bool) {
	r, ok := d.ids[id]
	if !ok || d.expired(r.t, now) {
		return 0, false
	}
	return r.seq, true
}

// add remembers id for seq published at t.
func (d *dedupWindow) add(id string, seq uint64, t time.Time) {
	d.ids[id] = dedupRec{seq: seq, t: t}
	d.fifo = append(d.fifo, dedupItem{id: id, seq: seq, t: t})
}

// expire forgets the ids outside the window at now.
func (d *dedupWindow) expire(now time.Time) {
	for d.head < len(d.fifo) && d.expired(d.fifo[d.head].t, now) {
		it := d.fifo[d.head]
		if r, ok := d.ids[it.id]; ok && r.seq == it.seq {
			delete(d.ids, it.id)
		}
		d.fifo[d.head] = dedupItem{}
		d.head++
	}
	if d.head > 64 && d.head*2 > len(d.fifo) {
		d.fifo = append(d.fifo[:0:0], d.fifo[d.head:]...)
		d.head = 0
	}
}

// snapshot returns the ids within the window at now whose sequence is at
// most upTo (confirmed), oldest first, at most max of them (the newest).
func (d *dedupWindow) snapshot(upTo uint64, now time.Time, max int) []DedupEntry {
	var out []DedupEntry
	for i := len(d.fifo) - 1; i >= d.head && len(out) < max; i-- {
		it := d.fifo[i]
		if d.expired(it.t, now) {
			break
		}
		if r, ok := d.ids[it.id]; !ok || r.seq != it.seq || it.seq > upTo {
			continue
		}
		out = append(out, DedupEntry{ID: it.id, Seq: it.seq, Time: it.t})
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// len is the number of ids remembered (expired ones included until
// expire runs).
func (d *dedupWindow) len() int { return len(d.ids) }
