package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/internal/ackset"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/replicator/wire"
	"github.com/stratamesh/strata/tenancy"
)

// Replicated subscriptions (ARCHITECTURE §4; issue 8 item 5). A durable
// consumer whose metadata has "strata.replicated": "true", on a topic
// that replicates across this region, keeps a replicator.SubSet: for
// each origin stream, the origin sequences acknowledged. Every
// Config.SubSyncInterval its owner folds the consumer's new local acks into the
// set (reading each message's origin) and ships what changed to every
// other region of the list; a receiving region creates the consumer if
// it lacks it, merges the set, and acknowledges every message it holds
// whose origin the set covers (and, through the consumer source's Skip,
// every one that arrives later). Sets merge by union, so consumers in
// two regions converge. The set is persisted at
// "rsubs/<t>/<ns>/<topic>/<consumer>" under the owner's condition.

// MetaReplicated is the consumer metadata key that turns replication of
// the subscription on ("true").
const MetaReplicated = "strata.replicated"

// DefaultSubSyncInterval is how often a replicated consumer ships its
// ack set (Config.SubSyncInterval).
const DefaultSubSyncInterval = time.Second

// Bounds of the work one sync round does on the consumer's goroutine.
const (
	subFoldLimit = 20000 // newly acked messages folded into the set
	subScanLimit = 20000 // held messages checked against the set
)

const rsubsPrefix = "rsubs/"

func rsubKey(n tenancy.Name, consumerName string) string {
	return rsubsPrefix + n.String() + "/" + consumerName
}

// isReplicated reports whether cfg asks for a replicated subscription.
func isReplicated(cfg *jsapi.ConsumerConfig) bool {
	return cfg.Durable != "" && strings.EqualFold(cfg.Metadata[MetaReplicated], "true")
}

// rsub is a replicated consumer's set and shipping state. set, folded,
// scanned and the versions are used on the consumer's runner goroutine
// only.
type rsub struct {
	t       *topic
	name    string
	set     *replicator.SubSet
	folded  *ackset.Set       // the consumer acks already folded into set
	scanned uint64            // held messages up to this seq were checked against the set's current content
	shipped map[string]uint64 // remote → set version it acknowledged

	persistMu  sync.Mutex
	persistVer uint64 // version last written (persistMu)
}

// newRsub makes the replicated state of consumer name from its persisted
// set (nil: a new one).
func (t *topic) newRsub(name string, persisted []byte) *rsub {
	rs := &rsub{t: t, name: name, set: replicator.NewSubSet(), folded: ackset.New(0), shipped: map[string]uint64{}}
	if len(persisted) > 0 {
		if set, err := replicator.DecodeSubSet(persisted); err == nil {
			rs.set = set
			if set.Deleted() {
				// Created again after a deletion: a new epoch outranks
				// the deletion's tombstone in every region.
				if _, err := set.Reset(t.s.cfg.Now(), t.s.cfg.Region); err != nil {
					t.s.cfg.Logger.Warn("replicated subscription: reset failed", "consumer", name, "err", err)
				}
			}
		} else {
			t.s.cfg.Logger.Warn("unreadable replicated subscription set: starting empty", "topic", t.name.String(), "consumer", name, "err", err)
		}
	}
	return rs
}

// covers reports whether the set acknowledges a message of origin o (the
// consumer source's Skip).
func (rs *rsub) covers(o *replicator.Origin) bool { return o.Seq > 0 && rs.set.Contains(*o) }

// loadSubSets reads topic n's persisted replicated subscription sets.
func loadSubSets(ctx context.Context, st *meta.Store, n tenancy.Name) (map[string][]byte, error) {
	dir := rsubsPrefix + n.String() + "/"
	kvs, err := st.List(ctx, dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, kv := range kvs {
		out[strings.TrimPrefix(kv.Key, dir)] = kv.Value
	}
	return out, nil
}

// persist writes the set (bytes of version ver) unless a newer one was.
func (rs *rsub) persist(ctx context.Context, ver uint64, b []byte) error {
	rs.persistMu.Lock()
	defer rs.persistMu.Unlock()
	if ver != 0 && ver <= rs.persistVer {
		return nil
	}
	_, err := rs.t.s.cfg.Store.Txn(ctx, []meta.Cond{rs.t.own.Cond()}, meta.OpPut(rsubKey(rs.t.name, rs.name), b))
	if err == nil {
		rs.persistVer = ver
	}
	return err
}

// fold adds the consumer's acks since the last fold to the set (runner
// goroutine): each newly acked message's origin, read from the ledger.
func (r *runner) fold(ctx context.Context) {
	rs := r.rsub
	cur := r.c.Acked()
	n := 0
	visit := func(first, last uint64) bool {
		for seq := max(first, rs.folded.MarkDelete()+1); seq <= last; seq++ {
			if rs.folded.Contains(seq) {
				continue
			}
			if n++; n > subFoldLimit {
				return false
			}
			msg, err := r.t.ml.Read(ctx, seq)
			switch {
			case errors.Is(err, mledger.ErrGone):
			case err != nil:
				return false // read again next round
			case msg.HasOrigin():
				if _, err := rs.set.Ack(msg.Origin); err != nil && !errors.Is(err, replicator.ErrSubDeleted) {
					r.t.s.cfg.Logger.Warn("replicated subscription: ack not recorded", "consumer", r.name, "seq", seq, "err", err)
				}
			}
			rs.folded.Ack(seq)
		}
		return true
	}
	if !visit(1, cur.MarkDelete()) {
		return
	}
	for _, rg := range cur.Ranges() {
		if !visit(rg[0], rg[1]) {
			return
		}
	}
}

// scan acknowledges the held messages the set covers (runner goroutine),
// from the mark-delete position after a merge changed the set, else from
// where the last scan ended, at most subScanLimit messages a round.
func (r *runner) scan(ctx context.Context) {
	rs := r.rsub
	last := r.t.ml.State().LastSeq
	from := max(rs.scanned, r.c.MarkDelete()) + 1
	for seq, n := from, 0; seq <= last && n < subScanLimit; seq, n = seq+1, n+1 {
		msg, err := r.t.ml.Read(ctx, seq)
		if err != nil && !errors.Is(err, mledger.ErrGone) {
			return
		}
		if err == nil && rs.covers(&msg.Origin) && r.c.AckElsewhere(seq) {
			rs.folded.Ack(seq) // it came from the set: nothing to fold
		}
		rs.scanned = seq
	}
}

// shipLoop ships the consumer's set to every remote of the topic each
// SubSyncInterval until the consumer stops.
func (r *runner) shipLoop() {
	ctx, cancel := context.WithCancel(r.t.s.ctx)
	defer cancel()
	go func() {
		select {
		case <-r.done:
		case <-r.t.done:
		case <-ctx.Done():
		}
		cancel()
	}()
	tick := time.NewTicker(r.t.s.cfg.SubSyncInterval)
	defer tick.Stop()
	remotes := r.t.s.remotesOf(r.t.name)
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
		type out struct {
			remote string
			ver    uint64
			body   []byte
		}
		var outs []out
		var setBytes []byte
		var ver uint64
		cfg, _ := json.Marshal(r.cfg)
		if err := r.call(ctx, func(time.Time) {
			r.fold(ctx)
			r.scan(ctx)
			ver = r.rsub.set.Version()
			setBytes, _ = r.rsub.set.MarshalBinary()
			for _, remote := range remotes {
				since, ok := r.rsub.shipped[remote]
				if ok && since >= ver {
					continue
				}
				delta, err := r.rsub.set.Delta(since).MarshalBinary()
				if err != nil {
					continue
				}
				outs = append(outs, out{remote, ver, wire.EncodeSubSync(&wire.SubSync{
					Origin: r.t.s.cfg.Region, Consumer: r.name, Config: cfg, Set: delta})})
			}
		}); err != nil {
			return
		}
		if err := r.rsub.persist(ctx, ver, setBytes); err != nil && ctx.Err() == nil {
			r.t.s.cfg.Logger.Warn("replicated subscription: persisting the set failed", "consumer", r.name, "err", err)
			continue
		}
		for _, o := range outs {
			if err := r.ship(ctx, o.remote, o.body); err != nil {
				r.t.s.cfg.Logger.Debug("replicated subscription: sync not acknowledged", "consumer", r.name, "remote", o.remote, "err", err)
				continue
			}
			remote, ver := o.remote, o.ver
			r.post(func(time.Time) {
				if r.rsub.shipped[remote] < ver {
					r.rsub.shipped[remote] = ver
				}
			})
		}
	}
}

// ship sends one sync to remote and waits for its reply.
func (r *runner) ship(ctx context.Context, remote string, body []byte) error {
	id := r.t.name
	return r.t.s.linkRequest(ctx, remote, wire.SubSyncSubject(id), body)
}

// linkRequest sends body to region remote on subject over the
// replication link and waits up to 5 s for its {"ok","error"} reply
// (wire.SubSyncReply). Errors: the link's, a refusal's text, "no reply",
// ctx's.
func (s *Service) linkRequest(ctx context.Context, remote, subject string, body []byte) error {
	l, err := s.link(remote)
	if err != nil {
		return err
	}
	prefix, answers, unregister := l.Register()
	defer unregister()
	if err := l.Publish(subject, prefix+"1", body); err != nil {
		return err
	}
	wait := time.NewTimer(5 * time.Second)
	defer wait.Stop()
	select {
	case p := <-answers:
		var rep wire.SubSyncReply
		if err := json.Unmarshal(p, &rep); err != nil {
			return err
		}
		if !rep.OK {
			return errors.New(rep.Error)
		}
		return nil
	case <-wait.C:
		return errors.New("no reply")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dispatchSubSync routes a subscription sync to its topic's owner.
func (s *Service) dispatchSubSync(m message) {
	id, err := wire.ParseSubSyncSubject(m.subject)
	if err != nil {
		return
	}
	name := tenancy.Name{Tenant: id.Tenant, Namespace: id.Namespace, Topic: id.Topic}
	if s.reg.topic(name) == nil {
		s.subSyncReply(m.reply, errors.New("topic "+name.String()+" does not exist in region "+s.cfg.Region+" yet"))
		return
	}
	s.toOwner(name, m, func(t *topic) { s.goAPI(func() { t.subSync(m) }) })
}

func (s *Service) subSyncReply(reply string, err error) {
	rep := wire.SubSyncReply{OK: err == nil}
	if err != nil {
		rep.Error = err.Error()
	}
	b, _ := json.Marshal(rep)
	s.respond(reply, b)
}

// subSync merges a shipped set into the consumer's, creating the
// consumer first when this region lacks it, and answers once the merged
// set is persisted.
func (t *topic) subSync(m message) {
	ctx, cancel := context.WithTimeout(t.s.ctx, apiTimeout)
	defer cancel()
	ss, set, err := wire.DecodeSubSync(m.data)
	if err != nil {
		t.s.subSyncReply(m.reply, err)
		return
	}
	t.subsMu.Lock()
	defer t.subsMu.Unlock()
	r := t.runner(ss.Consumer)
	existed := r != nil
	if r == nil {
		var tomb *replicator.SubSet // this region's record of a deletion
		if kv, err := t.s.cfg.Store.Get(ctx, rsubKey(t.name, ss.Consumer)); err == nil {
			tomb, _ = replicator.DecodeSubSet(kv.Value)
		}
		switch {
		case set.Deleted():
			// Deleted elsewhere and not here: keep the tombstone so an
			// older set does not create it again.
			if tomb == nil || tomb.Epoch().Compare(set.Epoch()) < 0 {
				b, _ := set.MarshalBinary()
				_, err = t.s.cfg.Store.Txn(ctx, []meta.Cond{t.own.Cond()}, meta.OpPut(rsubKey(t.name, ss.Consumer), b))
			}
			t.s.subSyncReply(m.reply, err)
			return
		case tomb != nil && tomb.Deleted() && set.Epoch().Compare(tomb.Epoch()) <= 0:
			t.s.subSyncReply(m.reply, nil) // a set from before the deletion
			return
		}
		if r, err = t.createReplicatedConsumer(ctx, ss); err != nil {
			t.s.subSyncReply(m.reply, err)
			return
		}
	}
	if r.rsub == nil {
		t.s.subSyncReply(m.reply, errors.New("consumer "+ss.Consumer+" is not a replicated subscription in region "+t.s.cfg.Region))
		return
	}
	var ver uint64
	var b []byte
	var reset bool
	if err := r.call(ctx, func(time.Time) {
		rs := r.rsub
		before := rs.set.Version()
		echo := rs.shipped[ss.Origin] == before
		res := rs.set.Merge(set)
		reset = existed && res.Outcome == replicator.MergeReplaced && !rs.set.Deleted()
		if res.Changed() {
			rs.scanned = 0 // check the held messages again
			r.scan(ctx)
		}
		if echo { // what it sent need not go back to it
			rs.shipped[ss.Origin] = rs.set.Version()
		}
		ver = rs.set.Version()
		b, _ = rs.set.MarshalBinary()
	}); err != nil {
		t.s.subSyncReply(m.reply, err)
		return
	}
	if r.rsub.set.Deleted() { // deleted in another region: here too
		if err := t.deleteConsumer(ctx, r.name, r); err != nil {
			t.s.subSyncReply(m.reply, err)
			return
		}
		t.s.cfg.Logger.Info("replicated subscription deleted by another region", "topic", t.name.String(), "consumer", r.name, "origin", ss.Origin)
	}
	if reset {
		// A new epoch from another region: the subscription was deleted
		// and created again there (e.g. reset to a position) and its
		// deletion's tombstone has not arrived yet. Here too it starts a
		// new life: created again from the beginning of the backlog with
		// the new set, which acknowledges what precedes its position.
		if err := r.rsub.persist(ctx, ver, b); err != nil {
			t.s.subSyncReply(m.reply, err)
			return
		}
		if err := t.deleteConsumer(ctx, r.name, r); err != nil {
			t.s.subSyncReply(m.reply, err)
			return
		}
		_, err := t.createReplicatedConsumer(ctx, ss)
		if err == nil {
			t.s.cfg.Logger.Info("replicated subscription reset by another region", "topic", t.name.String(), "consumer", ss.Consumer, "origin", ss.Origin)
		}
		t.s.subSyncReply(m.reply, err)
		return
	}
	t.s.subSyncReply(m.reply, r.rsub.persist(ctx, ver, b))
}

// replicateConsumerDelete makes the deletion of a replicated
// subscription (its runner stopped) mesh-wide: its set becomes a
// tombstone (Delete: a new epoch), persisted here so that older sets do
// not create it again, and queued for every other region like a topic
// tombstone.
func (t *topic) replicateConsumerDelete(ctx context.Context, r *runner) error {
	rs := r.rsub
	if rs == nil {
		return nil
	}
	if _, err := rs.set.Delete(t.s.cfg.Now(), t.s.cfg.Region); err != nil {
		return err
	}
	b, err := rs.set.MarshalBinary()
	if err != nil {
		return err
	}
	cfg, _ := json.Marshal(r.cfg)
	body := wire.EncodeSubSync(&wire.SubSync{Origin: t.s.cfg.Region, Consumer: r.name, Config: cfg, Set: b})
	ops := []meta.Op{meta.OpPut(rsubKey(t.name, r.name), b)}
	for _, remote := range t.s.remotesOf(t.name) {
		ops = append(ops, meta.OpPut(tombOutPrefix+remote+"/"+t.name.String()+"/"+tombSubPrefix+r.name+"-"+formatNanos(t.s.cfg.Now()), body))
	}
	_, err = t.s.cfg.Store.Txn(ctx, []meta.Cond{t.own.Cond()}, ops...)
	return err
}

// createReplicatedConsumer creates the consumer another region shipped
// (same configuration; it starts at the beginning of the backlog, and
// the set acknowledges what was consumed there).
func (t *topic) createReplicatedConsumer(ctx context.Context, ss *wire.SubSync) (*runner, error) {
	var cfg jsapi.ConsumerConfig
	if err := json.Unmarshal(ss.Config, &cfg); err != nil {
		return nil, err
	}
	if !isReplicated(&cfg) || cfg.Durable != ss.Consumer {
		return nil, errors.New("shipped consumer " + ss.Consumer + " is not a durable replicated subscription")
	}
	cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = jsapi.DeliverAll, 0, nil
	body, _ := json.Marshal(jsapi.CreateConsumerRequest{Stream: t.stream().stream, Config: cfg})
	req := jsapi.APIRequest{Kind: jsapi.KindConsumerCreate, Stream: t.stream().stream, Consumer: ss.Consumer}
	if _, apiErr := t.createConsumer(ctx, req, message{origin: t.s.cfg.Name, data: body}); apiErr != nil {
		return nil, apiErr
	}
	r := t.runner(ss.Consumer)
	if r == nil {
		return nil, errRunnerStopped
	}
	return r, nil
}
