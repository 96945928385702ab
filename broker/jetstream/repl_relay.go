package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/replicator/wire"
)

// Relay through this region (issue 26 item 8; replicator/relay.go): the
// owner of a topic keeps one replicator.Relay with what it learned of
// the other regions' marks (from the marks in every answer, and its own
// cursors' positions), plans every relayEvery, and runs a relay sender
// for each route planned: this region's copies of another origin's
// stream to a region that has stayed behind them for the relay delay.
// When its own stream stays behind at a remote, it asks the other
// remotes for their marks (a probe), so a cursor whose remote is cut off
// advances on what a third region learned, and its storage is released.

const (
	relayEvery        = time.Second
	defaultRelayDelay = 5 * time.Second
)

// topicRelay is a topic's relay state, guarded by mu.
type topicRelay struct {
	mu        sync.Mutex
	core      *replicator.Relay
	remotes   []string
	running   map[relayKey]chan struct{} // closed to stop the relay
	lastProbe time.Time
}

type relayKey struct {
	stream replicator.Stream
	to     string
}

func (s *Service) relayDelay() time.Duration {
	if s.cfg.RelayDelay > 0 {
		return s.cfg.RelayDelay
	}
	return defaultRelayDelay
}

// relayCore returns the topic's Relay for its current remotes (made
// again when they changed), nil without a third region. Called with
// t.relay.mu held.
func (t *topic) relayCore() *replicator.Relay {
	remotes := t.s.remotesOf(t.name)
	if len(remotes) < 2 {
		return nil
	}
	tr := &t.relay
	if tr.core == nil || !slices.Equal(tr.remotes, remotes) {
		c, err := replicator.NewRelay(t.s.cfg.Region, remotes, t.s.relayDelay())
		if err != nil {
			return nil
		}
		tr.core, tr.remotes = c, remotes
	}
	return tr.core
}

// runRelays plans relays every relayEvery until the topic stops here
// (started by startReplication).
func (t *topic) runRelays(ml *mledger.ML) {
	tick := time.NewTicker(relayEvery)
	defer tick.Stop()
	defer t.stopRelays()
	for {
		select {
		case <-t.done:
			return
		case <-t.s.ctx.Done():
			return
		case <-tick.C:
			t.planRelays(ml, time.Now())
		}
	}
}

func (t *topic) stopRelays() {
	t.relay.mu.Lock()
	defer t.relay.mu.Unlock()
	for k, quit := range t.relay.running {
		close(quit)
		delete(t.relay.running, k)
	}
}

// planRelays runs one round: learn the cursors' positions, plan, start
// and stop relays, and ask for marks when the local stream lags.
func (t *topic) planRelays(ml *mledger.ML, now time.Time) {
	senders := t.replSenders()
	local := ml.LocalStream()
	tr := &t.relay
	tr.mu.Lock()
	defer tr.mu.Unlock()
	core := t.relayCore()
	if core == nil {
		return
	}
	for _, r := range senders {
		core.Learn(replicator.Mark{Holder: r.remote, Stream: local, HWM: r.pos.Load()})
	}
	plan := core.Plan(now, ml.Origins(), local, ml.LastOriginSeq())
	want := map[relayKey]replicator.Route{}
	for _, rt := range plan.Routes {
		want[relayKey{rt.Stream, rt.To}] = rt
	}
	if tr.running == nil {
		tr.running = map[relayKey]chan struct{}{}
	}
	for k, quit := range tr.running {
		if _, ok := want[k]; !ok {
			close(quit)
			delete(tr.running, k)
			t.s.cfg.Logger.Info("relay stopped: the region caught up", "topic", t.name.String(), "origin", k.stream.Region, "to", k.to)
		}
	}
	for k, rt := range want {
		if tr.running[k] != nil {
			continue
		}
		quit := make(chan struct{})
		tr.running[k] = quit
		t.s.cfg.Logger.Info("relaying another region's messages", "topic", t.name.String(), "origin", rt.Stream.Region, "to", rt.To, "from", rt.From+1)
		t.s.goRun(func() {
			err := t.relayLife(ml, rt, quit)
			tr.mu.Lock()
			if tr.running[k] == quit {
				delete(tr.running, k) // the next round starts it again if still planned
			}
			tr.mu.Unlock()
			if err != nil {
				t.s.cfg.Logger.Warn("relay ended", "topic", t.name.String(), "origin", rt.Stream.Region, "to", rt.To, "err", err)
			}
		})
	}
	if plan.Probe && now.Sub(tr.lastProbe) >= t.s.relayDelay() {
		tr.lastProbe = now
		for _, r := range senders {
			r.probe.Store(true)
		}
	}
}

// learnMarks applies the marks of an answer from region from: to the
// topic's Relay, and, for marks of this region's own stream held by a
// third region (learned by from), to the sender towards that region. The
// answering region's own marks are authoritative (Relay.Observe: a
// region rebuilt from empty storage answers lower marks than before) and
// move no sender: the answer's high-water mark already did.
func (t *topic) learnMarks(from string, marks []wire.Mark) {
	if len(marks) == 0 {
		return
	}
	local := t.ml.LocalStream()
	var hints []func()
	t.relay.mu.Lock()
	core := t.relayCore()
	for _, m := range marks {
		st := replicator.Stream{Topic: t.name, Region: m.Region, Incarnation: m.Incarnation}
		mk := replicator.Mark{Holder: m.Holder, Stream: st, HWM: m.HWM}
		if m.Holder == from {
			if core != nil {
				core.Observe(mk)
			}
			continue
		}
		if core != nil {
			core.Learn(mk)
		}
		if st == local {
			for _, r := range t.replSenders() {
				if r.remote == m.Holder {
					hints = append(hints, func() { r.hint(m.HWM) })
				}
			}
		}
	}
	t.relay.mu.Unlock()
	for _, h := range hints {
		h()
	}
}

// replMarks is what this region answers a batch of origin's stream
// with: its own marks of the topic's streams and the marks it learned
// of origin's streams at other regions.
func (t *topic) replMarks(origin string) []wire.Mark {
	var out []wire.Mark
	for _, ss := range t.ml.Origins() {
		out = append(out, wire.Mark{Holder: t.s.cfg.Region, Region: ss.Region, Incarnation: ss.Incarnation, HWM: ss.HWM})
	}
	t.relay.mu.Lock()
	if core := t.relayCore(); core != nil {
		for _, m := range core.MarksFor(origin) {
			out = append(out, wire.Mark{Holder: m.Holder, Region: m.Stream.Region, Incarnation: m.Stream.Incarnation, HWM: m.HWM})
		}
	}
	t.relay.mu.Unlock()
	if len(out) > wire.MaxMarks {
		out = out[:wire.MaxMarks]
	}
	return out
}

// relayLife runs one relay sender until quit, the topic stops here, or
// something fails (the next round may start it again).
func (t *topic) relayLife(ml *mledger.ML, rt replicator.Route, quit chan struct{}) error {
	s := t.s
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	go func() {
		select {
		case <-quit:
		case <-t.done:
		case <-ctx.Done():
		}
		cancel()
	}()
	l, err := s.link(rt.To)
	if err != nil {
		return err
	}
	src := &relaySource{ml: ml, ctx: ctx, stream: rt.Stream}
	snd, err := replicator.NewRelaySender(s.replConfig(), rt.Stream, rt.To, rt.From, src, time.Now())
	if err != nil {
		return err
	}
	prefix, answers, unregister := l.Register()
	defer unregister()
	def, _ := json.Marshal(topicSpec{Stream: t.stream().stream, Config: t.stream().config})
	subject := wire.Subject(rt.Stream.Topic)
	var buf []byte
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		notify := ml.Notify()
		now := time.Now()
		batches, _ := snd.Send(now)
		for i := range batches {
			b := &batches[i]
			buf = wire.AppendBatch(buf[:0], b, def)
			if perr := l.Publish(subject, prefix+strconv.FormatUint(b.ID, 10), buf); perr != nil {
				_ = snd.Answer(now, replicator.Answer{Batch: b.ID, Kind: replicator.Failed})
				break
			}
		}
		wait := relayEvery
		if d := snd.NextDeadline(); !d.IsZero() {
			wait = min(wait, time.Until(d))
		}
		timer.Reset(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			return nil
		case <-notify:
		case p := <-answers:
			a, err := wire.DecodeAnswer(p)
			if err != nil {
				continue
			}
			if err := snd.Answer(time.Now(), a.Answer); err != nil {
				s.cfg.Logger.Warn("relay answer refused", "topic", t.name.String(), "to", rt.To, "answer", a.String(), "err", err)
			}
			t.learnMarks(rt.To, a.Marks)
		case <-timer.C:
			snd.Tick(time.Now())
		}
	}
}

// relaySource is the managed ledger as a relay sender reads it: the
// copies of one other origin's stream, by origin sequence, found by
// reading forward (relays are rare and read on from the last copy).
type relaySource struct {
	ml     *mledger.ML
	ctx    context.Context
	stream replicator.Stream

	at, atOrigin uint64 // the topic seq of the last copy found and its origin seq
}

// FirstSeq is the origin sequence of the first copy still stored.
func (s *relaySource) FirstSeq() uint64 {
	first := s.ml.State().FirstSeq
	if s.at >= first && s.atOrigin > 0 {
		return 1 // not searched again: Load reports a trimmed copy
	}
	m, err := s.next(first)
	if err != nil {
		return s.LastSeq() + 1
	}
	return m.Origin.Seq
}

// LastSeq is this region's mark of the stream.
func (s *relaySource) LastSeq() uint64 { return s.ml.OriginHWM(s.stream) }

// next reads forward from topic seq from to the first copy of the
// stream.
func (s *relaySource) next(from uint64) (mledger.Message, error) {
	last := s.ml.State().LastSeq
	for seq := max(from, s.ml.State().FirstSeq); seq <= last; seq++ {
		m, err := s.ml.Read(s.ctx, seq)
		if errors.Is(err, mledger.ErrGone) {
			continue
		}
		if err != nil {
			return mledger.Message{}, err
		}
		if m.Origin.Region == s.stream.Region && m.Origin.Incarnation == s.stream.Incarnation {
			s.at, s.atOrigin = m.Seq, m.Origin.Seq
			return m, nil
		}
	}
	return mledger.Message{}, fmt.Errorf("%w: no copy of %s after seq %d", mledger.ErrNotFound, s.stream, from)
}

// Load reads the copy with origin sequence seq; ErrTrimmed when it is
// not stored here (trimmed, or skipped by a gap record).
func (s *relaySource) Load(seq uint64) (replicator.Msg, error) {
	from := s.ml.State().FirstSeq
	if s.atOrigin > 0 && s.atOrigin < seq && s.at >= from {
		from = s.at + 1
	}
	for {
		m, err := s.next(from)
		if errors.Is(err, mledger.ErrNotFound) {
			return replicator.Msg{}, errors.Join(replicator.ErrTrimmed, err)
		}
		if err != nil {
			return replicator.Msg{}, err
		}
		switch {
		case m.Origin.Seq == seq:
			return replicator.Msg{Origin: m.Origin, Subject: m.Subject, Header: m.Header, Data: m.Data}, nil
		case m.Origin.Seq > seq:
			return replicator.Msg{}, fmt.Errorf("%w: origin seq %d of %s not stored here", replicator.ErrTrimmed, seq, s.stream)
		}
		from = m.Seq + 1
	}
}

// Backlog is the copies after after: counted, not sized (relays are not
// in the lag the topic reports).
func (s *relaySource) Backlog(after uint64) (uint64, time.Time) {
	return 0, time.Time{}
}
