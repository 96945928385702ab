package replicator

import (
	"fmt"
	"slices"
	"time"
)

// Relay through a third region (issue 26 item 8). When region B cannot
// reach C but both reach A, A forwards copies whose origin is B to C, and
// B learns through A that C holds them, so B's cursor __repl.C advances
// and B's storage is released. Duplicates are harmless and loops
// impossible because every copy keeps its origin (region, incarnation,
// origin sequence) and C's receiver stores only HWM+1 of each stream,
// whoever sends it.
//
// Knowledge travels as Marks in answers: a receiver answers every batch
// with its own high-water marks of the topic's streams and the marks it
// knows other regions hold of the sender's own stream. A Relay keeps what
// this region has learned (the highest mark per holder and stream: marks
// only grow while an incarnation lives) and decides, with time passed in,
// which copies to forward.

// Mark is a region's high-water mark of one stream, as learned: Holder
// stores every origin sequence <= HWM of Stream (or it is covered by a
// gap record it accepted).
type Mark struct {
	Holder string
	Stream Stream
	HWM    uint64
}

func (m Mark) String() string { return fmt.Sprintf("%s holds %s to %d", m.Holder, m.Stream, m.HWM) }

// Route is a relay to run: forward this region's copies of Stream (whose
// origin is another region) to To, from origin sequence From+1 (the
// highest mark of To known here).
type Route struct {
	Stream Stream
	To     string
	From   uint64
}

func (r Route) String() string {
	return fmt.Sprintf("relay %s to %s from %d", r.Stream, r.To, r.From+1)
}

// Plan is what a Relay decided at one time.
type Plan struct {
	// Routes are the relays to run now, sorted by stream and remote; a
	// running relay not listed is stopped (its remote caught up).
	Routes []Route
	// Probe is true when some remote has stayed behind this region's own
	// stream for the relay delay: the driver then asks the other remotes
	// for their marks (Sender.Probe), since they may know, through a
	// relay, that the lagging remote holds more.
	Probe bool
}

// Relay is one topic's relay decisions at one region. It is not safe
// for concurrent use; it does no I/O and keeps no clock.
type Relay struct {
	self    string
	remotes []string
	delay   time.Duration
	known   map[holderStream]uint64
	behind  map[holderStream]stretch
}

type holderStream struct {
	holder string
	stream Stream
}

// stretch is a remote found behind: since when it has failed to reach
// target, what this region held when it was found behind.
type stretch struct {
	target uint64
	since  time.Time
}

// NewRelay returns the relay decisions of region self for a topic
// replicated to remotes (the replication list without self), relaying
// only after a remote has stayed behind for delay (> 0). The delay keeps
// a healthy mesh from paying double traffic: a remote that the origin
// reaches keeps up within it, and a relay is never started. Errors wrap
// ErrInvalid.
func NewRelay(self string, remotes []string, delay time.Duration) (*Relay, error) {
	switch {
	case self == "":
		return nil, fmt.Errorf("%w: relay: empty region", ErrInvalid)
	case slices.Contains(remotes, self) || slices.Contains(remotes, ""):
		return nil, fmt.Errorf("%w: relay: remotes %q include %q or \"\"", ErrInvalid, remotes, self)
	case delay <= 0:
		return nil, fmt.Errorf("%w: relay: delay %v <= 0", ErrInvalid, delay)
	}
	return &Relay{self: self, remotes: slices.Clone(remotes), delay: delay,
		known: map[holderStream]uint64{}, behind: map[holderStream]stretch{}}, nil
}

// Learn records that holder stores stream up to hwm (from an answer's
// marks, or a sender's position). Lower marks than known are ignored;
// marks of this region, or of a holder that is not a remote, too.
func (r *Relay) Learn(m Mark) {
	if m.Holder == r.self || !slices.Contains(r.remotes, m.Holder) || m.Stream.validate() != nil {
		return
	}
	k := holderStream{m.Holder, m.Stream}
	if m.HWM > r.known[k] {
		r.known[k] = m.HWM
	}
}

// Observe records the holder's own mark of a stream, from its direct
// answer: it replaces what was known, lower or not, because the holder
// is the authority on what it stores (a remote rebuilt from empty
// storage answers lower marks than it did; a stale higher mark kept
// here would move cursors past messages it no longer holds). Marks of
// this region, or of a holder that is not a remote, are ignored.
func (r *Relay) Observe(m Mark) {
	if m.Holder == r.self || !slices.Contains(r.remotes, m.Holder) || m.Stream.validate() != nil {
		return
	}
	r.known[holderStream{m.Holder, m.Stream}] = m.HWM
}

// Known is the highest mark of stream learned from holder (0 if none).
func (r *Relay) Known(holder string, s Stream) uint64 { return r.known[holderStream{holder, s}] }

// MarksFor is what this region tells a sender of region origin in an
// answer besides its own marks: the marks it knows other remotes hold of
// origin's streams, sorted.
func (r *Relay) MarksFor(origin string) []Mark {
	var out []Mark
	for k, h := range r.known {
		if k.stream.Region == origin && k.holder != origin {
			out = append(out, Mark{Holder: k.holder, Stream: k.stream, HWM: h})
		}
	}
	slices.SortFunc(out, func(a, b Mark) int {
		if c := compareStreams(a.Stream, b.Stream); c != 0 {
			return c
		}
		return cmpString(a.Holder, b.Holder)
	})
	return out
}

// Forget drops what is known of stream (a tombstone, a new incarnation).
func (r *Relay) Forget(s Stream) {
	for k := range r.known {
		if k.stream == s {
			delete(r.known, k)
		}
	}
	for k := range r.behind {
		if k.stream == s {
			delete(r.behind, k)
		}
	}
}

// Plan decides at now, given what this region holds: held, its marks of
// the streams of other origins (Receiver.State's streams), and local,
// its own stream, of which it holds 1..localLast. A remote R is behind on
// stream S when its known mark is below what this region holds; it has
// stayed behind for the delay when, delay ago or earlier, this region
// already held a sequence that R is still not known to hold. Then S is
// relayed to R when S's origin is another region (never to S's origin),
// and for this region's own stream Probe is set. A remote that reaches
// the held mark is caught up and its stretch ends.
func (r *Relay) Plan(now time.Time, held []StreamState, local Stream, localLast uint64) Plan {
	var p Plan
	live := map[holderStream]bool{}
	consider := func(s Stream, h uint64, isLocal bool) {
		for _, to := range r.remotes {
			if to == s.Region {
				continue
			}
			k := holderStream{to, s}
			known := r.known[k]
			if known >= h {
				continue
			}
			live[k] = true
			st, ok := r.behind[k]
			if !ok || known >= st.target {
				st = stretch{target: h, since: now} // a new stretch: what it lacks now
				r.behind[k] = st
			}
			if now.Sub(st.since) < r.delay {
				continue
			}
			if isLocal {
				p.Probe = true
			} else {
				p.Routes = append(p.Routes, Route{Stream: s, To: to, From: known})
			}
		}
	}
	for _, ss := range held {
		if ss.Region != r.self && ss.HWM > 0 {
			consider(ss.Stream, ss.HWM, false)
		}
	}
	if local.Region == r.self && localLast > 0 {
		consider(local, localLast, true)
	}
	for k := range r.behind {
		if !live[k] {
			delete(r.behind, k)
		}
	}
	slices.SortFunc(p.Routes, func(a, b Route) int {
		if c := compareStreams(a.Stream, b.Stream); c != 0 {
			return c
		}
		return cmpString(a.To, b.To)
	})
	return p
}

// NextDeadline is the earliest time a stretch reaches the delay (zero if
// none is pending): call Plan then.
func (r *Relay) NextDeadline() time.Time {
	var d time.Time
	for _, st := range r.behind {
		if t := st.since.Add(r.delay); d.IsZero() || t.Before(d) {
			d = t
		}
	}
	return d
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
