package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/replicator/link"
	"github.com/stratamesh/strata/replicator/wire"
	"github.com/stratamesh/strata/tenancy"
)

// Replicator cursors (ARCHITECTURE §4; issue 8): the owner of a topic
// whose namespace replicates across this region runs one sender per
// other region listed. A sender drives replicator.Sender (the window,
// retries and position) over the topic's managed ledger (messages of
// local origin, by origin sequence) and the Service's link to that
// region. Its position, the durable cursor __repl.<remote>, is kept at
// replPrefix under the owner's conditioned write.

// replPrefix holds replicator cursor positions:
// "repl/<t>/<ns>/<topic>/<remote>" → replicator.SenderState as JSON.
const replPrefix = "repl/"

func replDir(n tenancy.Name) string { return replPrefix + n.String() + "/" }

// ReplCursorName is the name of the replicator cursor towards remote.
func ReplCursorName(remote string) string { return "__repl." + remote }

// Driver timings of a sender.
const (
	replPersistEvery = 100 * time.Millisecond
	replStatusEvery  = time.Second
	replRestartWait  = time.Second
	replBackoffMax   = 5 * time.Second
	replAckTimeout   = 5 * time.Second
	// The send window: 10000 sequences unanswered keep 10k msgs/s flowing
	// through a 1 s store round trip at the remote; batches of up to 500
	// messages (and 1 MiB) keep the requests few.
	replMaxInFlight   = 10000
	replMaxBatchMsgs  = 500
	replMaxBatchBytes = 512 << 10
)

// replConfig is the replicator configuration of this broker's senders.
func (s *Service) replConfig() replicator.Config {
	c, d := s.cfg.Replicator, replicator.DefaultConfig()
	if c.MaxInFlight == 0 {
		c.MaxInFlight = replMaxInFlight
	}
	if c.MaxBatchMsgs == 0 {
		c.MaxBatchMsgs = replMaxBatchMsgs
	}
	if c.MaxBatchBytes == 0 {
		// Half the remote brokers' default max_payload (1 MiB): a batch
		// with its envelope and the topic's definition always fits.
		c.MaxBatchBytes = replMaxBatchBytes
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = replAckTimeout
	}
	if c.BackoffInitial == 0 {
		c.BackoffInitial = d.BackoffInitial
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = replBackoffMax
	}
	if c.StallAfter == 0 {
		c.StallAfter = d.StallAfter
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.BackoffJitter == 0 {
		c.BackoffJitter = 0.2
	}
	return c
}

// remotesOf is the regions topic n replicates to from here: its
// namespace's replication list without this region, or none when the
// list does not name this region (or replication is off here).
func (s *Service) remotesOf(n tenancy.Name) []string {
	if s.cfg.Region == "" || s.cfg.RemoteBrokers == nil {
		return nil
	}
	ns, ok := s.namespace(n.Tenant, n.Namespace)
	if !ok || !slices.Contains(ns.Replication, s.cfg.Region) {
		return nil
	}
	var out []string
	for _, r := range ns.Replication {
		if r != s.cfg.Region && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// link returns the Service's link to region remote, made on first use.
func (s *Service) link(remote string) (*link.Link, error) {
	s.linksMu.Lock()
	defer s.linksMu.Unlock()
	if l := s.links[remote]; l != nil {
		return l, nil
	}
	if err := s.ctx.Err(); err != nil {
		return nil, err // stopping: closeLinks has run or will
	}
	l, err := link.New(link.Config{
		Remote: remote, Name: "strata-replicator " + s.cfg.Region + "/" + s.cfg.Name,
		Brokers: func() []string { return s.cfg.RemoteBrokers(remote) },
		Options: s.cfg.LinkOptions,
		TLS:     s.cfg.LinkTLS,
		Logger:  s.cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	s.links[remote] = l
	return l, nil
}

// closeLinks closes every replication link (Close).
func (s *Service) closeLinks() {
	s.linksMu.Lock()
	links := s.links
	s.links = map[string]*link.Link{}
	s.linksMu.Unlock()
	for _, l := range links {
		l.Close()
	}
}

// LinkStatus reports every replication link of this broker.
func (s *Service) LinkStatus() []link.Status {
	s.linksMu.Lock()
	defer s.linksMu.Unlock()
	out := make([]link.Status, 0, len(s.links))
	for _, l := range s.links {
		out = append(out, l.Status())
	}
	slices.SortFunc(out, func(a, b link.Status) int {
		if a.Remote < b.Remote {
			return -1
		}
		if a.Remote > b.Remote {
			return 1
		}
		return 0
	})
	return out
}

// replSender is one replicator cursor of a topic this broker owns.
type replSender struct {
	t      *topic
	ml     *mledger.ML
	remote string

	pos atomic.Uint64 // the sender's position (origin sequence acknowledged), for retention
	// frozen is a test hook (testhooks.go): sends are dropped, and stats
	// report no lag.
	frozen atomic.Bool
	// epoch is the remote's replication epoch this sender persists
	// (repl_decom.go).
	epoch string
	// learned is the highest mark of the remote learned through a third
	// region (repl_relay.go), probe a request for marks: the life loop
	// applies both.
	learned atomic.Uint64
	probe   atomic.Bool
	quit    chan struct{} // closed by stop: the region left the replication list
	once    sync.Once
	exited  chan struct{} // closed when run returns: its last position is written

	mu     sync.Mutex
	status replicator.Status
	err    string // the last error, for status
}

// startReplication starts the topic's replicator cursors (openTopic,
// once the topic is ready), and removes those of regions the
// namespace's replication list no longer names.
func (t *topic) startReplication(ml *mledger.ML) {
	t.s.goRun(t.dropStaleCursors)
	for _, remote := range t.s.remotesOf(t.name) {
		r := t.newSender(ml, remote)
		t.mu.Lock()
		t.repl = append(t.repl, r)
		t.mu.Unlock()
		t.s.goRun(r.run)
	}
	t.s.goRun(func() { t.runRelays(ml) })
}

// replSenders returns the topic's replicator cursors.
func (t *topic) replSenders() []*replSender {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.repl)
}

// run runs sender lives until the topic stops serving here.
func (r *replSender) run() {
	defer close(r.exited)
	ctx, cancel := context.WithCancel(r.t.s.ctx)
	defer cancel()
	go func() {
		select {
		case <-r.quit:
			cancel()
		case <-r.t.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for ctx.Err() == nil {
		err := r.life(ctx)
		if ctx.Err() != nil {
			return
		}
		r.setErr(err)
		r.t.s.cfg.Logger.Warn("replicator cursor restarting", "topic", r.t.name.String(), "remote", r.remote, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(replRestartWait):
		}
	}
}

// hint raises the mark learned through a third region to hwm.
func (r *replSender) hint(hwm uint64) {
	for {
		old := r.learned.Load()
		if hwm <= old || r.learned.CompareAndSwap(old, hwm) {
			return
		}
	}
}

// relayHints applies what repl_relay.go handed the sender: a mark
// learned through a third region, and a probe to send (returned).
func (r *replSender) relayHints(snd *replicator.Sender, now time.Time) []replicator.Batch {
	if h := r.learned.Load(); h > snd.Position() && snd.Learn(now, h) {
		r.t.s.cfg.Logger.Debug("replicator cursor moved on a mark learned through a third region", "topic", r.t.name.String(), "remote", r.remote, "position", snd.Position())
	}
	if r.probe.Swap(false) {
		if b, ok := snd.Probe(now); ok {
			return []replicator.Batch{b}
		}
	}
	return nil
}

// stop ends the sender (its region left the topic's replication list).
func (r *replSender) stop() { r.once.Do(func() { close(r.quit) }) }

func (r *replSender) setErr(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.err = ""
	} else {
		r.err = err.Error()
	}
}

// life is one sender: restored from the persisted position, it sends
// until the topic stops or something fails that a new sender must fix.
func (r *replSender) life(ctx context.Context) error {
	s := r.t.s
	l, err := s.link(r.remote)
	if err != nil {
		return err
	}
	st, err := r.load(ctx)
	if err != nil {
		return err
	}
	stream := r.ml.LocalStream()
	if st.Incarnation != stream.Incarnation {
		st = replicator.SenderState{} // a new incarnation starts from its first message
	}
	src := &replSource{ml: r.ml, ctx: ctx}
	snd, err := replicator.NewSender(s.replConfig(), stream, r.remote, st, src, time.Now())
	if errors.Is(err, replicator.ErrBadState) {
		s.cfg.Logger.Warn("replicator cursor position does not fit the topic: resending from its first message",
			"topic", r.t.name.String(), "remote", r.remote, "err", err)
		snd, err = replicator.NewSender(s.replConfig(), stream, r.remote, replicator.SenderState{}, src, time.Now())
	}
	if err != nil {
		return err
	}
	prefix, answers, unregister := l.Register()
	defer unregister()
	def, _ := json.Marshal(topicSpec{Stream: r.t.stream().stream, Config: r.t.stream().config})
	subject := wire.Subject(stream.Topic)
	persisted, lastPersist, lastStatus := snd.Position(), time.Time{}, time.Time{}
	var buf []byte
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		notify := r.ml.Notify()
		now := time.Now()
		probes := r.relayHints(snd, now)
		batches, err := snd.Send(now)
		batches = append(probes, batches...)
		for i := range batches {
			b := &batches[i]
			if r.frozen.Load() {
				continue // test hook: the batch is dropped (it times out and is resent)
			}
			buf = wire.AppendBatch(buf[:0], b, def)
			if perr := l.Publish(subject, prefix+strconv.FormatUint(b.ID, 10), buf); perr != nil {
				r.setErr(perr)
				_ = snd.Answer(now, replicator.Answer{Batch: b.ID, Kind: replicator.Failed})
				break
			}
		}
		if err != nil {
			r.setErr(err)
		}
		r.pos.Store(snd.Position())
		if pos := snd.Position(); pos != persisted && now.Sub(lastPersist) >= replPersistEvery {
			if err := r.persist(ctx, snd.State()); err != nil {
				return err
			}
			persisted, lastPersist = pos, now
		}
		if now.Sub(lastStatus) >= replStatusEvery {
			r.setStatus(snd.Status(now))
			lastStatus = now
		}
		wait := time.Until(snd.NextDeadline())
		if snd.NextDeadline().IsZero() || wait > replStatusEvery {
			wait = replStatusEvery
		}
		if pos := snd.Position(); pos != persisted {
			wait = min(wait, replPersistEvery)
		}
		timer.Reset(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			if pos := snd.Position(); pos != persisted {
				persist := func() {
					pctx, cancel := context.WithTimeout(context.Background(), time.Second)
					_ = r.persist(pctx, snd.State())
					cancel()
				}
				if h := r.t.s.finalPersistHook.Load(); h != nil {
					(*h)(persist) // test hook
				} else {
					persist()
				}
			}
			r.setStatus(snd.Status(time.Now()))
			return nil
		case <-notify:
		case p := <-answers:
			r.answer(snd, p)
			for drained := false; !drained; {
				select {
				case p := <-answers:
					r.answer(snd, p)
				default:
					drained = true
				}
			}
		case <-timer.C:
			snd.Tick(time.Now())
		}
	}
}

// answer hands one reply to the sender.
func (r *replSender) answer(snd *replicator.Sender, p []byte) {
	a, err := wire.DecodeAnswer(p)
	if err != nil {
		r.setErr(err)
		return
	}
	if a.Kind == replicator.Failed && a.Error != "" {
		r.setErr(errors.New(r.remote + ": " + a.Error))
	}
	before := snd.Position()
	if err := snd.Answer(time.Now(), a.Answer); err != nil {
		r.setErr(err)
		r.t.s.cfg.Logger.Warn("replicator answer refused", "topic", r.t.name.String(), "remote", r.remote, "answer", a.String(), "err", err)
	}
	if snd.Position() < before {
		// The remote holds less than it did (rebuilt from empty storage):
		// a mark learned of it before is stale and must not move the
		// cursor past what it now lacks.
		r.learned.Store(0)
	}
	r.t.learnMarks(r.remote, a.Marks)
}

func (r *replSender) setStatus(st replicator.Status) {
	r.mu.Lock()
	r.status = st
	r.mu.Unlock()
}

// load reads the cursor's persisted position (zero when none, and when
// it is of another replication epoch: the region left the list since
// and was added back, so it starts over from the retained messages).
func (r *replSender) load(ctx context.Context) (replicator.SenderState, error) {
	var st replPosition
	kv, err := r.t.s.cfg.Store.Get(ctx, replDir(r.t.name)+r.remote)
	if errors.Is(err, meta.ErrNotFound) {
		return st.SenderState, nil
	}
	if err != nil {
		return st.SenderState, err
	}
	if err := json.Unmarshal(kv.Value, &st); err != nil {
		r.t.s.cfg.Logger.Warn("unreadable replicator cursor: starting over", "topic", r.t.name.String(), "remote", r.remote, "err", err)
		return replicator.SenderState{}, nil
	}
	if st.Epoch != r.epoch {
		r.t.s.cfg.Logger.Info("replicator cursor position of an earlier replication epoch ignored: starting over from the retained messages",
			"topic", r.t.name.String(), "remote", r.remote, "position", st.Position, "epoch", st.Epoch, "now", r.epoch)
		return replicator.SenderState{}, nil
	}
	return st.SenderState, nil
}

// persist writes the cursor's position, with its epoch, under the
// topic's ownership.
func (r *replSender) persist(ctx context.Context, st replicator.SenderState) error {
	b, err := json.Marshal(replPosition{SenderState: st, Epoch: r.epoch})
	if err != nil {
		return err
	}
	_, err = r.t.s.cfg.Store.Txn(ctx, []meta.Cond{r.t.own.Cond()}, meta.OpPut(replDir(r.t.name)+r.remote, b))
	return err
}

// replSource is the managed ledger as a replicator sender reads it: the
// messages of local origin, by origin sequence.
type replSource struct {
	ml  *mledger.ML
	ctx context.Context

	topicFirst, originFirst uint64 // FirstSeq's cache: valid while the topic's first seq is topicFirst
}

// FirstSeq is the lowest local origin sequence still stored: that of the
// first local message at or after the topic's first sequence (found
// again only when the topic's first sequence moved).
func (s *replSource) FirstSeq() uint64 {
	first := s.ml.State().FirstSeq
	if first == s.topicFirst && s.originFirst != 0 {
		return s.originFirst
	}
	last := s.ml.LastOriginSeq()
	msg, err := s.ml.NextLocal(s.ctx, first)
	switch {
	case err == nil:
		s.topicFirst, s.originFirst = first, msg.Origin.Seq
	case errors.Is(err, mledger.ErrNotFound):
		return last + 1 // nothing local stored: do not cache, more may come
	default:
		return max(s.originFirst, 1) // a read failed: Load reports it
	}
	return s.originFirst
}

// LastSeq is the last confirmed local origin sequence.
func (s *replSource) LastSeq() uint64 { return s.ml.LastOriginSeq() }

// Load reads local origin sequence seq.
func (s *replSource) Load(seq uint64) (replicator.Msg, error) {
	m, err := s.ml.ReadLocal(s.ctx, seq)
	if errors.Is(err, mledger.ErrGone) {
		return replicator.Msg{}, errors.Join(replicator.ErrTrimmed, err)
	}
	if err != nil {
		return replicator.Msg{}, err
	}
	return replicator.Msg{Origin: m.Origin, Subject: m.Subject, Header: m.Header, Data: m.Data}, nil
}

// Backlog estimates the bytes of local messages after origin sequence
// after (their count times the topic's mean message size) and reads the
// origin time of the first of them.
func (s *replSource) Backlog(after uint64) (uint64, time.Time) {
	last := s.ml.LastOriginSeq()
	if after >= last {
		return 0, time.Time{}
	}
	st := s.ml.State()
	mean := uint64(1)
	if st.Msgs > 0 {
		mean = max(st.Bytes/st.Msgs, 1)
	}
	var oldest time.Time
	if m, err := s.ml.ReadLocal(s.ctx, max(after+1, s.FirstSeq())); err == nil {
		oldest = m.Origin.Time
	}
	return (last - after) * mean, oldest
}
