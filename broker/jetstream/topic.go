package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/broker"
	"github.com/stratamesh/strata/broker/consumer"
	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/tenancy"
)

var errLeadershipLost = errors.New("jetstream: topic ownership lost")

// topic is a topic this broker owns: its managed ledger and its
// consumers' drivers.
type topic struct {
	s    *Service
	name tenancy.Name
	own  *ownedBundle // the bundle whose ownership it is served under
	ml   *mledger.ML

	ready   atomic.Bool
	deleted atomic.Bool
	fence   publishFence // publishes handed to ml and answered, for API requests

	mu        sync.Mutex
	st        *stream // the stream as last configured
	quoted    []byte  // the stream name as a JSON string, for PubAcks
	consumers map[string]*runner
	repl      []*replSender // replicator cursors (repl_send.go)
	relay     topicRelay    // relays through this region (repl_relay.go)
	tombs     []string      // origin streams deleted elsewhere ("region/incarnation"): their batches are dropped
	stopped   bool          // lost or shut down (guarded by mu, with ml during opening)
	policy    policyState   // applying the namespace's policies (policies.go)
	backlog   backlogState  // the namespace's backlog quota: verdict, held publishes (backlog*.go)
	// staleCursors: removing the positions of regions no longer in the
	// replication list failed; the next policy round tries again.
	staleCursors atomic.Bool
	dropping     atomic.Bool // dropStaleCursors runs
	dropAgain    atomic.Bool // a round was asked for while one ran: run another
	// stopping are the replicator cursors stopped (their region left the
	// list) that may not have written their last position yet; a drop
	// round waits for them (repl_decom.go; guarded by mu).
	stopping []*replSender
	// parked are the positions of cursors a pending decommission
	// stopped (remote → origin sequence), held for retention until it is
	// confirmed or cancelled (repl_decom.go; guarded by mu).
	parked map[string]uint64
	drop   dropState // the last round of dropStaleCursors (repl_decom.go)

	// subsMu orders the deletion of a consumer against the merging of a
	// replicated subscription's set shipped by another region, so a set
	// shipped before the deletion cannot create the consumer again while
	// its tombstone is not yet persisted.
	subsMu sync.Mutex

	// pubAcks holds the PubAcks of a run of answered publishes; the
	// goroutine answering the managed ledger's publishes (one at a time,
	// the only one touching it) sends them together after the run
	// (flushPubAcks).
	pubAcks []broker.Reply

	stopOnce sync.Once
	done     chan struct{}
}

// flushPubAcks sends the buffered PubAcks (mledger.Config.AfterAnswers).
func (t *topic) flushPubAcks() {
	t.s.srv.PublishReplies(t.pubAcks)
	clear(t.pubAcks)
	t.pubAcks = t.pubAcks[:0]
}

func (t *topic) isReady() bool { return t != nil && t.ready.Load() }

func (t *topic) stream() *stream {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st
}

// openTopic serves topic n of a bundle this broker owns: the managed
// ledger's takeover (fencing the previous owner's ledger), then the
// consumers from their persisted cursors.
func (s *Service) openTopic(ctx context.Context, n tenancy.Name, own *ownedBundle) (*topic, error) {
	st := s.reg.topic(n)
	if st == nil {
		tm, _, err := mledger.Load(ctx, s.cfg.Store, n)
		if err != nil {
			return nil, fmt.Errorf("topic %s: %w", n, err)
		}
		st = decodeStream(n, tm)
		s.reg.put(st)
	}
	t := &topic{s: s, name: n, own: own, st: st, consumers: map[string]*runner{}, done: make(chan struct{})}
	t.quoted, _ = json.Marshal(st.stream)
	s.mu.Lock()
	if s.closing || !own.active() {
		s.mu.Unlock()
		return nil, errors.New("jetstream: broker closing or bundle handed over")
	}
	s.topics[n] = t
	s.mu.Unlock()
	fail := func(err error) (*topic, error) {
		s.mu.Lock()
		if s.topics[n] == t {
			delete(s.topics, n)
		}
		s.mu.Unlock()
		t.stopOnce.Do(func() { close(t.done) })
		return nil, err
	}
	ml, err := mledger.Open(ctx, mledger.Config{
		Store: s.cfg.Store, Ledgers: s.cfg.Ledgers,
		Ensemble: s.cfg.Ensemble, WriteQuorum: s.cfg.WriteQuorum, AckQuorum: s.cfg.AckQuorum,
		Cond: own.Cond(), Limits: s.cfg.limits(&st.config), Now: s.cfg.Now, Region: s.cfg.Region,
		Tier: s.cfg.Tier, Offload: s.nsOffload(n),
		OnLost:       func(err error) { go t.lost(err) },
		AfterAnswers: t.flushPubAcks,
		Logger:       s.cfg.Logger, // the managed ledger names the topic itself
	}, n)
	if err != nil {
		return fail(fmt.Errorf("open managed ledger %s: %w", n, err))
	}
	t.mu.Lock()
	stopped := t.stopped
	if !stopped {
		t.ml = ml
	}
	t.mu.Unlock()
	if stopped { // lost or shut down while opening
		ml.Drop()
		return fail(errLeadershipLost)
	}
	states, err := loadCursors(ctx, s.cfg.Store, n)
	if err != nil {
		ml.Drop()
		return fail(fmt.Errorf("load cursors of %s: %w", n, err))
	}
	sets, err := loadSubSets(ctx, s.cfg.Store, n)
	if err != nil {
		ml.Drop()
		return fail(fmt.Errorf("load replicated subscriptions of %s: %w", n, err))
	}
	t.tombs = s.inTombstone(ctx, n).Streams
	runners := map[string]*runner{}
	for name, cs := range states {
		cs := cs
		src, rs := t.consumerSource(name, &cs.Config, sets[name])
		c, err := consumer.New(cs.Config, &cs, s.cfg.Now(), src, s.consumerOptions(st)...)
		if err != nil {
			s.cfg.Logger.Warn("dropping an unreadable cursor", "topic", n.String(), "consumer", name, "err", err)
			continue
		}
		if rs != nil {
			// The persisted set holds the acks folded before the last
			// sync; later ones are redelivered elsewhere at most (the
			// bound of a sync interval), not read again here.
			rs.folded = c.Acked()
		}
		runners[name] = t.startRunner(name, cs.Config, c, true, rs)
	}
	t.mu.Lock()
	stopped = t.stopped
	if !stopped {
		t.consumers = runners
	}
	t.mu.Unlock()
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if stopped || closing {
		for _, r := range runners {
			r.stop(false, jsapi.DescLeadershipChange)
		}
		if closing {
			_ = t.shutdown(ctx, true)
		}
		return fail(errors.New("jetstream: topic stopped while opening"))
	}
	t.ready.Store(true)
	t.startReplication(ml)
	s.goRun(t.retainLoop)
	s.goRun(t.backlogLoop)
	s.goRun(func() {
		select {
		case <-ml.Done():
			t.lost(errLeadershipLost)
		case <-t.done:
		}
	})
	s.cfg.Logger.Info("serving topic as its owner", "topic", n.String(), "stream", st.stream, "consumers", len(states))
	return t, nil
}

// lost stops serving the topic at once: ownership went to another broker
// (a fenced add, a failed etcd condition, or the lease expired). Nothing
// more is written or acknowledged; waiting pulls get 409 Leadership Change.
func (t *topic) lost(err error) {
	t.stopOnce.Do(func() {
		t.ready.Store(false)
		t.s.cfg.Logger.Warn("dropping topic: ownership lost", "topic", t.name.String(), "err", err)
		ml := t.stop()
		for _, r := range t.runners() {
			r.stop(false, jsapi.DescLeadershipChange)
		}
		if ml != nil {
			ml.Drop()
		}
		close(t.done)
	})
}

// shutdown stops serving the topic; graceful closes the open ledger and
// persists the cursors first (a clean handover), else the next owner
// recovers.
func (t *topic) shutdown(ctx context.Context, graceful bool) error {
	var err error
	t.stopOnce.Do(func() {
		t.ready.Store(false)
		ml := t.stop()
		for _, r := range t.runners() {
			r.stop(graceful, jsapi.DescLeadershipChange)
		}
		if ml != nil {
			if graceful {
				err = ml.Close(ctx)
			} else {
				ml.Drop()
			}
		}
		close(t.done)
	})
	return err
}

// stop marks the topic stopped (an opening that has not finished gives
// up) and returns its managed ledger, if it got one.
func (t *topic) stop() *mledger.ML {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	return t.ml
}

func (t *topic) runners() []*runner {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*runner, 0, len(t.consumers))
	for _, r := range t.consumers {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (t *topic) runner(name string) *runner {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.consumers[name]
}

// mlSource is the managed ledger as a consumer core reads it.
type mlSource struct {
	ml     *mledger.ML
	ctx    context.Context
	region string // this region: messages of other origins are replicated copies
	// skip, when set, marks messages acknowledged in another region (a
	// replicated subscription's set covers their origin).
	skip func(*replicator.Origin) bool
}

// consumerSource is the source of consumer name: with the replicated
// subscription state when cfg asks for one and the topic replicates
// (persisted: its set as last written).
func (t *topic) consumerSource(name string, cfg *jsapi.ConsumerConfig, persisted []byte) (*mlSource, *rsub) {
	src := &mlSource{ml: t.ml, ctx: t.s.ctx, region: t.s.cfg.Region}
	if !isReplicated(cfg) || len(t.s.remotesOf(t.name)) == 0 {
		return src, nil
	}
	rs := t.newRsub(name, persisted)
	src.skip = rs.covers
	return src, rs
}

func (m *mlSource) FirstSeq() uint64 { return m.ml.State().FirstSeq }
func (m *mlSource) LastSeq() uint64  { return m.ml.State().LastSeq }

func (m *mlSource) Load(seq uint64) (consumer.Msg, error) {
	msg, err := m.ml.Read(m.ctx, seq)
	if err != nil {
		if errors.Is(err, mledger.ErrGone) {
			return consumer.Msg{}, consumer.ErrGone
		}
		return consumer.Msg{}, err
	}
	hdr := msg.Header
	if msg.HasOrigin() && msg.Origin.Region != m.region {
		hdr = originHeaders(hdr, &msg.Origin)
	}
	return consumer.Msg{Seq: msg.Seq, Subject: msg.Subject, Header: hdr, Data: msg.Data, Time: msg.Time,
		Skip: m.skip != nil && m.skip(&msg.Origin)}, nil
}

func (m *mlSource) SeqAtTime(t time.Time) (uint64, error) { return m.ml.SeqAtTime(m.ctx, t) }

func (m *mlSource) LastForSubject(subject string) uint64 {
	seq, _ := m.ml.LastForSubject(subject)
	return seq
}
