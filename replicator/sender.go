package replicator

import (
	"errors"
	"fmt"
	"time"
)

// SenderState is a sender's persisted position: the replicator cursor
// __repl.<remote> of its topic (JSON, snake_case). It is a value: the
// sender keeps no reference to it.
type SenderState struct {
	// Incarnation is the topic incarnation the position belongs to; ""
	// for a sender that never ran (then Position is 0).
	Incarnation string `json:"incarnation,omitempty"`
	// Position is an origin sequence: the remote acknowledged every
	// origin sequence <= Position as durably stored (or covered by a gap
	// record it accepted). It never passes a message the remote did not
	// store.
	Position uint64 `json:"position"`
}

// Sender replicates one topic incarnation's messages of local origin to
// one remote region. See the package documentation.
type Sender struct {
	cfg    Config
	stream Stream
	remote string
	src    Source
	bo     backoff

	// acked is the position: every origin sequence <= acked was
	// acknowledged by the remote as stored. It only moves down when the
	// remote answers with a lower high-water mark (it lost its state).
	acked uint64
	// next is the next origin sequence to put in a batch; acked < next.
	// Every sequence in [acked+1, next-1] is in an in-flight batch.
	next uint64
	// inflight holds the batches sent and not yet answered, in send order
	// (ascending, disjoint ranges, all above acked); n counts their
	// sequences (a gap record counts 1) against MaxInFlight.
	inflight []flight
	n        uint64
	nextID   uint64

	failures   int       // failures in a row, reset by progress
	retryAt    time.Time // nothing is sent before it
	refusedAt  uint64    // the expected seq of the last gap refusal without progress since, 0 if none
	behindFrom time.Time // start of the current stretch with a backlog and no progress; zero when caught up
	lastOK     time.Time // the last Stored or Duplicate answer
	lastErr    error     // the last failure, for Status
	sentHigh   uint64    // the highest origin sequence ever put in a batch in this life
	now        time.Time // the latest time passed in
	stats      Stats

	// relay: this sender forwards another origin's stream (NewRelaySender):
	// it sends no gap records, and while probing (until its first answer)
	// at most one message is in flight.
	relay, probing bool
}

// flight is an in-flight batch.
type flight struct {
	id, first, last uint64
	gap             bool
	sentAt          time.Time
}

func (f *flight) weight() uint64 {
	if f.gap {
		return 1
	}
	return f.last - f.first + 1
}

// NewSender returns the sender of stream (the topic, this region, its
// current incarnation) to the region remote, reading src, restored from st
// (the zero SenderState for a new cursor). cfg must Validate. Errors wrap
// ErrInvalid (cfg, stream, remote) or ErrBadState: st belongs to another
// incarnation (the driver starts a fresh SenderState for a new one, so an
// old position is never applied to new numbers), or lies above
// src.LastSeq().
func NewSender(cfg Config, stream Stream, remote string, st SenderState, src Source, now time.Time) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := stream.validate(); err != nil {
		return nil, err
	}
	switch {
	case remote == "" || remote == stream.Region:
		return nil, fmt.Errorf("%w: remote region %q for origin %q", ErrInvalid, remote, stream.Region)
	case src == nil:
		return nil, fmt.Errorf("%w: nil Source", ErrInvalid)
	case st.Incarnation == "" && st.Position != 0:
		return nil, fmt.Errorf("%w: position %d without an incarnation", ErrBadState, st.Position)
	case st.Incarnation != "" && st.Incarnation != stream.Incarnation:
		return nil, fmt.Errorf("%w: position of incarnation %q, topic is at %q", ErrBadState, st.Incarnation, stream.Incarnation)
	case st.Position > src.LastSeq():
		return nil, fmt.Errorf("%w: position %d above the source's last sequence %d", ErrBadState, st.Position, src.LastSeq())
	}
	s := &Sender{
		cfg: cfg, stream: stream, remote: remote, src: src, bo: newBackoff(cfg),
		acked: st.Position, next: st.Position + 1, nextID: 1, now: now,
	}
	s.observe(now)
	return s, nil
}

// NewRelaySender returns a sender that forwards this region's copies of
// stream, whose origin is another region, to remote (not the origin),
// from origin sequence from+1 (the remote's mark as known here; the
// position is not persisted: a relay restarts from what is known). src
// reads the copies of stream held here by origin sequence; LastSeq is
// this region's mark of it. It differs from a sender of local origin in
// three ways: it never sends a gap record (a copy missing here, trimmed
// or skipped, is no proof of loss: the origin may still hold it; the
// relay waits at it), it puts one message in flight until its first
// answer (a probe: if the remote already holds more, the cost is one
// message), and a remote mark above LastSeq is accepted (the remote may
// have more from the origin itself). Errors wrap ErrInvalid.
func NewRelaySender(cfg Config, stream Stream, remote string, from uint64, src Source, now time.Time) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := stream.validate(); err != nil {
		return nil, err
	}
	switch {
	case remote == "" || remote == stream.Region:
		return nil, fmt.Errorf("%w: relay to region %q of origin %q", ErrInvalid, remote, stream.Region)
	case src == nil:
		return nil, fmt.Errorf("%w: nil Source", ErrInvalid)
	}
	s := &Sender{
		cfg: cfg, stream: stream, remote: remote, src: src, bo: newBackoff(cfg),
		acked: from, next: from + 1, nextID: 1, now: now, relay: true, probing: true,
	}
	s.observe(now)
	return s, nil
}

// Relay reports whether s forwards another origin's stream.
func (s *Sender) Relay() bool { return s.relay }

// Learn applies a mark of the remote learned from a third region (an
// answer's marks, from a region that relays to it): the remote holds
// every origin sequence <= hwm of the sender's stream, so the position
// moves there (at most to the source's LastSeq) and the storage held for
// the remote can be released. A mark at or below the position changes
// nothing. In-flight batches it covers leave the window; their late
// answers are stale. It reports whether the position moved.
func (s *Sender) Learn(now time.Time, hwm uint64) bool {
	s.now = now
	hwm = min(hwm, s.src.LastSeq())
	if hwm <= s.acked {
		return false
	}
	s.stats.Learned += hwm - s.acked
	s.advance(now, hwm)
	return true
}

// Probe returns a batch of one message, the one at the position (already
// acknowledged), to ask the remote for its marks, when nothing is in
// flight, no backoff runs and that message is still stored; ok is false
// otherwise. The remote answers Duplicate (with its marks: the driver
// reads them); the answer is applied like any other. The driver calls it
// when Relay.Plan says Probe, at most once per relay delay.
func (s *Sender) Probe(now time.Time) (b Batch, ok bool) {
	s.now = now
	if s.relay || len(s.inflight) > 0 || now.Before(s.retryAt) || s.acked == 0 || s.acked < s.src.FirstSeq() {
		return Batch{}, false
	}
	m, err := s.src.Load(s.acked)
	if err != nil {
		return Batch{}, false
	}
	s.stats.Probes++
	return s.track(Batch{First: s.acked, Last: s.acked, Msgs: []Msg{m}, Bytes: m.Bytes()}, now), true
}

// Stream is the stream the sender replicates.
func (s *Sender) Stream() Stream { return s.stream }

// Remote is the region the sender replicates to.
func (s *Sender) Remote() string { return s.remote }

// Position is the persisted position (SenderState.Position).
func (s *Sender) Position() uint64 { return s.acked }

// State is the state to persist. Persisting it late is safe (a restored
// sender resends, and the remote answers duplicates); the driver persists
// it when Position changed, at most every persist interval.
func (s *Sender) State() SenderState {
	return SenderState{Incarnation: s.stream.Incarnation, Position: s.acked}
}

// Send returns the batches to send now, in order, filling the window:
// gap records for sequences trimmed before the remote acknowledged them,
// then runs of messages of at most MaxBatchMsgs and MaxBatchBytes, while
// fewer than MaxInFlight sequences are unanswered. It returns nothing
// while backing off. A Source error other than ErrTrimmed ends the round:
// Send returns the batches built so far with the error, and backs off.
// The driver calls Send after every other call and whenever the topic
// gets a message of local origin.
func (s *Sender) Send(now time.Time) ([]Batch, error) {
	s.now = now
	s.observe(now)
	if now.Before(s.retryAt) {
		return nil, nil
	}
	var out []Batch
	for s.n < uint64(s.cfg.MaxInFlight) {
		first, last := s.src.FirstSeq(), s.src.LastSeq()
		if s.next > last {
			break
		}
		if s.probing && s.n > 0 {
			break
		}
		if s.next < first && s.relay {
			break // no gap records from a relay: the origin may hold them
		}
		if s.next < first {
			out = append(out, s.track(Batch{Gap: true, First: s.next, Last: first - 1}, now))
			s.stats.GapRecords++
			continue
		}
		b, err := s.build(last)
		if len(b.Msgs) > 0 {
			out = append(out, s.track(b, now))
		}
		if err == nil {
			continue
		}
		if errors.Is(err, ErrTrimmed) && len(b.Msgs) > 0 {
			continue // the next round sees the new FirstSeq
		}
		if errors.Is(err, ErrTrimmed) {
			// Trimmed, yet at or above FirstSeq: the Source contradicts
			// itself; back off rather than spin.
			err = fmt.Errorf("replicator: source trimmed seq %d at or above its first seq %d: %w", s.next, first, err)
		}
		s.fail(now, err)
		return out, err
	}
	return out, nil
}

// build loads a run of messages from s.next, at most to last.
func (s *Sender) build(last uint64) (Batch, error) {
	b := Batch{First: s.next}
	room := min(uint64(s.cfg.MaxBatchMsgs), uint64(s.cfg.MaxInFlight)-s.n)
	if s.probing {
		room = 1
	}
	for seq := s.next; seq <= last && uint64(len(b.Msgs)) < room; seq++ {
		m, err := s.src.Load(seq)
		if err != nil {
			return b, fmt.Errorf("replicator: load origin seq %d: %w", seq, err)
		}
		if m.Origin.Seq != seq || m.Origin.Region != s.stream.Region || m.Origin.Incarnation != s.stream.Incarnation {
			return b, fmt.Errorf("replicator: source returned origin %s/%s seq %d for seq %d", m.Origin.Region, m.Origin.Incarnation, m.Origin.Seq, seq)
		}
		size := m.Bytes()
		if len(b.Msgs) > 0 && b.Bytes+size > s.cfg.MaxBatchBytes {
			break
		}
		b.Msgs = append(b.Msgs, m)
		b.Bytes += size
		b.Last = seq
	}
	return b, nil
}

// track names b, records it as in flight and moves next past it.
func (s *Sender) track(b Batch, now time.Time) Batch {
	b.ID = s.nextID
	s.nextID++
	b.Stream = s.stream
	f := flight{id: b.ID, first: b.First, last: b.Last, gap: b.Gap, sentAt: now}
	s.inflight = append(s.inflight, f)
	s.n += f.weight()
	s.next = b.Last + 1
	s.stats.Batches++
	if !b.Gap {
		if b.First <= s.sentHigh {
			s.stats.Resent += min(b.Last, s.sentHigh) - b.First + 1
		}
		s.stats.Sent += b.Count()
	}
	s.sentHigh = max(s.sentHigh, b.Last)
	return b
}

// Answer applies the remote's answer to a batch. Answers to batches not
// in flight (already covered by a later answer, or abandoned by a rewind)
// are ignored and counted as stale: whatever they said is learned again
// from the resend. Stored and Duplicate advance the position to the
// answer's HWM (it may skip ahead: the remote may hold more than this
// life sent). GapRefused rewinds to the remote's expected sequence, at
// once the first time and with backoff when the remote refuses the same
// sequence again without progress in between; an HWM below the position
// means the remote lost what it had acknowledged (a rebuilt region): the
// position moves down to it, and what the source still holds is resent.
// Failed rewinds to the batch's first sequence (later batches would be
// refused as gaps) and backs off. Errors wrap ErrInvalid (an answer that
// contradicts its batch) or ErrAheadOfSource; such answers are not
// applied, and the batch times out.
func (s *Sender) Answer(now time.Time, a Answer) error {
	s.now = now
	i := s.find(a.Batch)
	if i < 0 {
		s.stats.StaleAnswers++
		return nil
	}
	f := s.inflight[i]
	if a.Kind != Failed {
		s.probing = false
	}
	switch a.Kind {
	case Stored, Duplicate:
		if a.HWM < f.last {
			return fmt.Errorf("%w: answer %v to batch %d-%d", ErrInvalid, a, f.first, f.last)
		}
		if err := s.checkAhead(a); err != nil {
			return err
		}
		if a.Kind == Duplicate {
			s.stats.Duplicates++
		}
		s.lastOK = now
		s.advance(now, a.HWM)
	case GapRefused:
		if a.HWM+1 >= f.first {
			return fmt.Errorf("%w: answer %v to batch %d-%d", ErrInvalid, a, f.first, f.last)
		}
		if err := s.checkAhead(a); err != nil {
			return err
		}
		s.stats.GapRefusals++
		if a.HWM < s.acked {
			s.stats.Regressions++
			s.acked = a.HWM
			s.behindFrom = now
		} else {
			s.advance(now, a.HWM)
		}
		s.rewind(a.HWM + 1)
		if s.refusedAt == a.HWM+1 {
			s.fail(now, fmt.Errorf("replicator: remote %s refused origin seq %d again", s.remote, a.HWM+1))
		}
		s.refusedAt = a.HWM + 1
	case Failed:
		s.stats.Failures++
		s.failAt(now, i, fmt.Errorf("replicator: remote %s failed batch %d (origin seqs %s)", s.remote, f.id, seqRange(f.first, f.last)))
	default:
		return fmt.Errorf("%w: answer kind %d", ErrInvalid, a.Kind)
	}
	return nil
}

func (s *Sender) checkAhead(a Answer) error {
	if s.relay {
		return nil // the remote may hold more, from the origin itself
	}
	if last := s.src.LastSeq(); a.HWM > last {
		return fmt.Errorf("%w: answer %v, last origin seq %d", ErrAheadOfSource, a, last)
	}
	return nil
}

// Tick passes time: the oldest batch unanswered for AckTimeout fails
// (with every later one: rewind and back off). The driver calls it at
// NextDeadline; calling it more often is harmless.
func (s *Sender) Tick(now time.Time) {
	s.now = now
	if len(s.inflight) > 0 && !now.Before(s.inflight[0].sentAt.Add(s.cfg.AckTimeout)) {
		f := s.inflight[0]
		s.stats.Timeouts++
		s.failAt(now, 0, fmt.Errorf("replicator: remote %s did not answer batch %d (origin seqs %s) within %v", s.remote, f.id, seqRange(f.first, f.last), s.cfg.AckTimeout))
	}
	s.observe(now)
}

// NextDeadline is when the driver must call Tick (and then Send) next:
// the end of the backoff, the oldest batch's ack timeout, or the moment
// the sender would turn Stalled; zero when none is pending. Every call
// may move it.
func (s *Sender) NextDeadline() time.Time {
	var d time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	if s.now.Before(s.retryAt) {
		earliest(s.retryAt)
	}
	if len(s.inflight) > 0 {
		earliest(s.inflight[0].sentAt.Add(s.cfg.AckTimeout))
	}
	if !s.behindFrom.IsZero() {
		if t := s.behindFrom.Add(s.cfg.StallAfter); s.now.Before(t) {
			earliest(t)
		}
	}
	return d
}

// find returns the index of the in-flight batch id, -1 if none.
func (s *Sender) find(id uint64) int {
	for i := range s.inflight {
		if s.inflight[i].id == id {
			return i
		}
	}
	return -1
}

// advance applies a remote high-water mark h >= acked: the position moves
// to h, batches it covers leave the window, and next skips past it.
func (s *Sender) advance(now time.Time, h uint64) {
	if h > s.acked {
		s.acked = h
		s.failures = 0
		s.refusedAt = 0
		s.behindFrom = time.Time{}
		s.lastErr = nil
	}
	k := 0
	for _, f := range s.inflight {
		if f.last > h {
			s.inflight[k] = f
			k++
		} else {
			s.n -= f.weight()
		}
	}
	clear(s.inflight[k:])
	s.inflight = s.inflight[:k]
	s.next = max(s.next, h+1)
	s.observe(now)
}

// rewind abandons every in-flight batch and resends from seq.
func (s *Sender) rewind(seq uint64) {
	clear(s.inflight)
	s.inflight = s.inflight[:0]
	s.n = 0
	s.next = seq
}

// failAt abandons in-flight batch i and every later one, resends from its
// first sequence not yet acknowledged, and backs off.
func (s *Sender) failAt(now time.Time, i int, err error) {
	for _, f := range s.inflight[i:] {
		s.n -= f.weight()
	}
	s.next = max(s.inflight[i].first, s.acked+1)
	clear(s.inflight[i:])
	s.inflight = s.inflight[:i]
	s.fail(now, err)
}

// fail counts a failure in a row and starts its backoff.
func (s *Sender) fail(now time.Time, err error) {
	s.failures++
	s.retryAt = now.Add(s.bo.wait(s.failures))
	s.lastErr = err
}

// observe starts or ends the stretch used for stall detection.
func (s *Sender) observe(now time.Time) {
	if s.src.LastSeq() <= s.acked {
		s.behindFrom = time.Time{}
	} else if s.behindFrom.IsZero() {
		s.behindFrom = now
	}
}
