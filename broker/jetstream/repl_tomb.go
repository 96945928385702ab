package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/replicator/wire"
	"github.com/stratamesh/strata/tenancy"
)

// Tombstones (ARCHITECTURE §4; issue 8 item 6): deleting or purging a
// replicated topic queues one tombstone per remote region in etcd
// (tombOutPrefix, written with the owner's condition before the topic
// goes); the broker owning the topic's bundle sends each until the
// remote acknowledges it, backing off from 1 s to 30 s. A remote deletes
// (or purges) its copy and, for a deletion, keeps the deleted origin
// streams (tombInPrefix) so that their late batches are acknowledged and
// dropped instead of re-creating the topic. A deletion caused by a
// tombstone queues none itself.

const (
	tombOutPrefix = "tombstones/out/" // <remote>/<t>/<ns>/<topic>/<kind>-<unix ns> → wire.Tombstone
	tombInPrefix  = "tombstones/in/"  // <t>/<ns>/<topic> → inTombstone
	tombRetryMax  = 30 * time.Second
	// tombSubPrefix starts the kind of a queued replicated-subscription
	// deletion ("sub-<consumer>-<time>", a wire.SubSync with a deleted
	// set, sent on the subscription-sync subject).
	tombSubPrefix = "sub-"
)

// inTombstone is what a region keeps of the deletions it received.
type inTombstone struct {
	Streams []string  `json:"streams"` // "region/incarnation", deleted
	At      time.Time `json:"at"`
}

func streamKey(s replicator.Stream) string { return s.Region + "/" + s.Incarnation }

// queueTombstones records a deletion or purge of the topic for every
// remote region (nothing when it does not replicate), under the topic's
// ownership.
func (t *topic) queueTombstones(ctx context.Context, kind string) error {
	remotes := t.s.remotesOf(t.name)
	if len(remotes) == 0 {
		return nil
	}
	tb := wire.Tombstone{Kind: kind, Origin: t.s.cfg.Region, At: t.s.cfg.Now().UTC()}
	if kind == wire.TombDelete {
		tb.Streams = append(tb.Streams, streamKey(t.ml.LocalStream()))
		for _, o := range t.ml.Origins() {
			tb.Streams = append(tb.Streams, streamKey(o.Stream))
		}
	}
	body := wire.EncodeTombstone(&tb)
	var ops []meta.Op
	if kind == wire.TombDelete {
		// This region drops late batches of the deleted streams too (a
		// remote's in flight before it hears of the deletion).
		in := t.s.inTombstone(ctx, t.name)
		for _, st := range tb.Streams {
			if !slices.Contains(in.Streams, st) {
				in.Streams = append(in.Streams, st)
			}
		}
		in.At = tb.At
		b, _ := json.Marshal(in)
		ops = append(ops, meta.OpPut(tombInPrefix+t.name.String(), b))
	}
	for _, r := range remotes {
		ops = append(ops, meta.OpPut(tombOutPrefix+r+"/"+t.name.String()+"/"+kind+"-"+formatNanos(tb.At), body))
	}
	_, err := t.s.cfg.Store.Txn(ctx, []meta.Cond{t.own.Cond()}, ops...)
	return err
}

func formatNanos(at time.Time) string { return at.Format("20060102T150405.000000000") }

// queueDefinition records a stream created (TombCreate) or reconfigured
// (TombUpdate) through the API here for every remote region of its
// namespace, with its definition spec, so they create or update their
// copy without waiting for a message. Errors: etcd's (the stream exists
// here anyway; the other regions create it with its first message).
func (s *Service) queueDefinition(ctx context.Context, n tenancy.Name, kind string, spec []byte) error {
	remotes := s.remotesOf(n)
	if len(remotes) == 0 {
		return nil
	}
	tb := wire.Tombstone{Kind: kind, Origin: s.cfg.Region, At: s.cfg.Now().UTC(), Definition: spec}
	body := wire.EncodeTombstone(&tb)
	var ops []meta.Op
	for _, r := range remotes {
		ops = append(ops, meta.OpPut(tombOutPrefix+r+"/"+n.String()+"/"+kind+"-"+formatNanos(tb.At), body))
	}
	_, err := s.cfg.Store.Txn(ctx, nil, ops...)
	return err
}

// applyDefinition creates or updates this region's copy of topic n from
// another region's definition (a create or update record).
func (s *Service) applyDefinition(ctx context.Context, n tenancy.Name, tb *wire.Tombstone, m message) {
	reply := m.reply
	if s.reg.topic(n) == nil {
		err := mledger.Create(ctx, s.cfg.Store, n, tb.Definition, s.cfg.Now().UTC())
		if err == nil || errors.Is(err, mledger.ErrExists) {
			if tm, _, lerr := mledger.Load(ctx, s.cfg.Store, n); lerr == nil && s.reg.put(decodeStream(n, tm)) {
				s.topicAdded(n)
			}
			err = nil
		}
		s.subSyncReply(reply, err)
		return
	}
	if tb.Kind != wire.TombUpdate {
		s.subSyncReply(reply, nil) // it exists already
		return
	}
	var spec topicSpec
	if err := json.Unmarshal(tb.Definition, &spec); err != nil {
		s.subSyncReply(reply, err)
		return
	}
	s.toOwner(n, m, func(t *topic) { // m itself goes to another owner

		s.goAPI(func() {
			ctx, cancel := context.WithTimeout(s.ctx, apiTimeout)
			defer cancel()
			if cur := t.stream(); !sameConfig(&cur.config, &spec.Config) {
				if e := t.update(ctx, cur, &spec.Config); e != nil {
					// Not retried: this region's configuration conflicts
					// (e.g. overlapping subjects); it keeps its own.
					s.cfg.Logger.Warn("another region's stream configuration not applied here",
						"topic", n.String(), "origin", tb.Origin, "err", e.Description)
				}
			}
			s.subSyncReply(reply, nil)
		})
	})
}

// forgetReplication deletes a deleted topic's replicator positions and
// replicated subscription sets.
func (t *topic) forgetReplication(ctx context.Context) {
	for _, prefix := range []string{replDir(t.name), rsubsPrefix + t.name.String() + "/"} {
		kvs, err := t.s.cfg.Store.List(ctx, prefix)
		if err != nil {
			continue
		}
		for _, kv := range kvs {
			_ = t.s.cfg.Store.Delete(ctx, kv.Key)
		}
	}
}

// tombLoop sends the queued tombstones of the topics whose bundles this
// broker owns, each until its remote acknowledges it.
func (s *Service) tombLoop() {
	next := map[string]time.Time{}
	wait := map[string]time.Duration{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		kvs, err := s.cfg.Store.List(s.ctx, tombOutPrefix)
		if err != nil {
			continue
		}
		now := time.Now()
		for _, kv := range kvs {
			remote, rest, _ := strings.Cut(strings.TrimPrefix(kv.Key, tombOutPrefix), "/")
			i := strings.LastIndexByte(rest, '/')
			if i < 0 {
				continue
			}
			name, err := tenancy.ParseName(rest[:i])
			if err != nil || s.ownerOf(name) != s.cfg.Name || now.Before(next[kv.Key]) {
				continue
			}
			subject := wire.TombstoneSubject
			if strings.HasPrefix(rest[i+1:], tombSubPrefix) {
				subject = wire.SubSyncSubject
			}
			id := name
			if err := s.linkRequest(s.ctx, remote, subject(id), kv.Value); err != nil {
				d := min(max(2*wait[kv.Key], time.Second), tombRetryMax)
				wait[kv.Key], next[kv.Key] = d, now.Add(d)
				s.cfg.Logger.Info("tombstone not delivered yet", "topic", name.String(), "remote", remote, "retry_in", d, "err", err)
				continue
			}
			if err := s.cfg.Store.Delete(s.ctx, kv.Key); err == nil {
				delete(next, kv.Key)
				delete(wait, kv.Key)
			}
		}
	}
}

// dispatchTombstone applies a tombstone from another region: records a
// deletion's streams, then deletes or purges the local copy at its owner.
func (s *Service) dispatchTombstone(m message) {
	id, err := wire.ParseTombstoneSubject(m.subject)
	if err != nil {
		return
	}
	tb, err := wire.DecodeTombstone(m.data)
	if err != nil {
		s.subSyncReply(m.reply, err)
		return
	}
	name := tenancy.Name{Tenant: id.Tenant, Namespace: id.Namespace, Topic: id.Topic}
	s.goAPI(func() {
		ctx, cancel := context.WithTimeout(s.ctx, apiTimeout)
		defer cancel()
		if tb.Kind == wire.TombCreate || tb.Kind == wire.TombUpdate {
			s.applyDefinition(ctx, name, tb, m)
			return
		}
		if tb.Kind == wire.TombDelete {
			if err := s.recordTombstone(ctx, name, tb); err != nil {
				s.subSyncReply(m.reply, err)
				return
			}
		}
		if s.reg.topic(name) == nil {
			s.subSyncReply(m.reply, nil)
			return
		}
		s.toOwner(name, m, func(t *topic) {
			s.goAPI(func() {
				ctx, cancel := context.WithTimeout(s.ctx, apiTimeout)
				defer cancel()
				var err error
				if tb.Kind == wire.TombDelete {
					err = t.deleteStream(ctx, false)
				} else {
					_, err = t.ml.Purge(ctx)
				}
				if err == nil {
					s.cfg.Logger.Info("applied a tombstone from another region", "topic", name.String(), "kind", tb.Kind, "origin", tb.Origin)
				}
				s.subSyncReply(m.reply, err)
			})
		})
	})
}

// recordTombstone adds a deletion's streams to the topic's inbound
// tombstone.
func (s *Service) recordTombstone(ctx context.Context, n tenancy.Name, tb *wire.Tombstone) error {
	cur := s.inTombstone(ctx, n)
	for _, st := range tb.Streams {
		if !slices.Contains(cur.Streams, st) {
			cur.Streams = append(cur.Streams, st)
		}
	}
	cur.At = tb.At
	b, _ := json.Marshal(cur)
	_, err := s.cfg.Store.Put(ctx, tombInPrefix+n.String(), b)
	return err
}

// inTombstone reads topic n's inbound tombstone (empty when none).
func (s *Service) inTombstone(ctx context.Context, n tenancy.Name) inTombstone {
	var cur inTombstone
	if kv, err := s.cfg.Store.Get(ctx, tombInPrefix+n.String()); err == nil {
		_ = json.Unmarshal(kv.Value, &cur)
	}
	return cur
}

// tombstoned reports whether origin stream st of topic n was deleted.
func (s *Service) tombstoned(ctx context.Context, n tenancy.Name, st replicator.Stream) bool {
	return slices.Contains(s.inTombstone(ctx, n).Streams, streamKey(st))
}
