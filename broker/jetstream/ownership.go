package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/broker/bundle"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/tenancy"
)

// settleTime: a bundle this broker acquired for an admin unload less
// than this long ago is not shed (bundle.View.Settling), so that load
// shedding does not send the unloaded bundle straight back (it may move
// another one to even the counts).
const settleTime = 30 * time.Second

// ownedBundle is a bundle this broker owns: its owner key's condition,
// and the topics of it that it serves.
type ownedBundle struct {
	id    bundle.ID
	cond  meta.Cond // the owner key at the mod revision this broker created it at
	lease *meta.Lease
	ctx   context.Context // ends when the bundle is released or lost
	stop  context.CancelFunc
	wg    sync.WaitGroup // its topics' serve loops

	mu        sync.Mutex
	serving   map[tenancy.Name]bool // topics with a serve loop
	releasing bool
}

// Cond is "this broker still owns the bundle", for every etcd write made
// for its topics.
func (ob *ownedBundle) Cond() meta.Cond { return ob.cond }

// active reports whether the bundle is owned and not being handed over.
func (ob *ownedBundle) active() bool {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	return !ob.releasing && ob.ctx.Err() == nil
}

// renewLease grants the broker's ownership lease and registers the broker
// under it (bundles/brokers/<name>) as a possible bundle owner.
func (s *Service) renewLease(ctx context.Context) error {
	l, err := s.cfg.Store.GrantLease(ctx, s.cfg.LeaseTTL)
	if err != nil {
		return err
	}
	if err := s.register(ctx, l, false); err != nil {
		_ = l.Revoke(ctx)
		return err
	}
	s.leaseMu.Lock()
	s.lease = l
	close(s.leaseOK)
	s.leaseMu.Unlock()
	return nil
}

// register writes this broker's registration under lease l.
func (s *Service) register(ctx context.Context, l *meta.Lease, draining bool) error {
	_, err := meta.PutJSON(ctx, s.cfg.Store, brokersPrefix+s.cfg.Name,
		brokerRec{Lease: l.ID(), Instance: s.cfg.Instance, Draining: draining, Since: s.cfg.Now().UTC()}, meta.WithLease(l.ID()))
	return err
}

// currentLease returns a live lease, waiting for keepLease to replace a
// lost one.
func (s *Service) currentLease(ctx context.Context) (*meta.Lease, error) {
	for {
		s.leaseMu.Lock()
		l, ok := s.lease, s.leaseOK
		s.leaseMu.Unlock()
		select {
		case <-ok:
			select {
			case <-l.Done():
			default:
				return l, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// keepLease replaces the ownership lease when it is lost (etcd expired it:
// this broker was cut off or frozen for longer than its TTL, or a peer
// revoked it after the membership layer declared this broker dead).
// Losing it ends every bundle ownership it carried.
func (s *Service) keepLease() {
	for {
		s.leaseMu.Lock()
		l := s.lease
		s.leaseMu.Unlock()
		select {
		case <-s.ctx.Done():
			return
		case <-l.Done():
		}
		s.cfg.Logger.Warn("ownership lease lost; dropping its bundles and taking a new lease")
		s.leaseMu.Lock()
		s.leaseOK = make(chan struct{})
		s.leaseMu.Unlock()
		s.kickPlacement()
		for s.ctx.Err() == nil {
			ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
			err := s.renewLease(ctx)
			cancel()
			if err == nil {
				break
			}
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

func (s *Service) kickPlacement() { s.place.signal() }

// placeLoop makes this broker's ownership decisions whenever the bundles/
// keys, the topics or the lease change, and every PlacementInterval.
func (s *Service) placeLoop() {
	tick := time.NewTicker(s.cfg.PlacementInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.place.changed:
		case <-tick.C:
		}
		s.placeOnce()
	}
}

// placeOnce is one round of decisions (bundle.View gives the rules):
// drop bundles whose owner key is no longer this broker's; declare dead
// brokers' leases void; acquire the unowned bundles this broker should
// take (or any left unowned for AcquireGrace); hand over bundles an admin
// unload names; shed one bundle when over the load threshold.
func (s *Service) placeOnce() {
	now := s.cfg.Now()
	bundles := s.allBundles()
	v, unowned := s.place.view(bundles, now)
	v.Threshold = s.cfg.LoadThreshold
	v.Loads = v.Load()
	me := s.cfg.Name
	v.Settling = map[bundle.ID]bool{}

	s.place.mu.RLock()
	seenRev := s.place.rev
	keys := map[bundle.ID]ownerEntry{}
	for id, e := range s.place.owners {
		keys[id] = e
	}
	unloads := map[bundle.ID]unloadRec{}
	for id, u := range s.place.unloads {
		unloads[id] = u
	}
	brokers := map[string]brokerRec{}
	for n, b := range s.place.brokers {
		brokers[n] = b
	}
	s.place.mu.RUnlock()

	lease, leaseErr := s.liveLease()
	s.mu.Lock()
	owned := make([]*ownedBundle, 0, len(s.owned))
	for _, ob := range s.owned {
		owned = append(owned, ob)
	}
	draining := s.closing || s.draining
	shedding := s.shedding
	for id, at := range s.settling {
		if now.Sub(at) < settleTime {
			v.Settling[id] = true
		} else {
			delete(s.settling, id)
		}
	}
	s.mu.Unlock()

	// Ownership that ended: the lease is gone, or the owner key (once the
	// watch has caught up with its creation) is not ours any more.
	for _, ob := range owned {
		e, ok := keys[ob.id]
		gone := ob.lease != lease || leaseErr != nil
		if seenRev >= ob.cond.ModRevision && (!ok || e.rev != ob.cond.ModRevision) {
			gone = true
		}
		if gone {
			s.loseBundle(ob, errLeadershipLost)
		}
	}
	// Bundles that no longer exist (their namespace's bundle count
	// changed, or it was deleted) are handed over to no one: their topics
	// close, and the owners of the bundles they now belong to open them.
	exists := make(map[bundle.ID]bool, len(bundles))
	for _, id := range bundles {
		exists[id] = true
	}
	for _, ob := range owned {
		if !exists[ob.id] {
			s.goRun(func() { s.release(ob, "the bundle no longer exists (namespace bundles changed or namespace deleted)") })
		}
	}
	s.voidDeadBrokers(brokers, keys)
	s.checkForwardedPulls()
	if draining || leaseErr != nil {
		return
	}
	for _, id := range bundles {
		since, free := unowned[id]
		if !free || s.isOwned(id) {
			continue
		}
		if v.Acquirer(id) == me || now.Sub(since) >= s.cfg.AcquireGrace {
			s.acquire(id, lease)
		}
	}
	for id, u := range unloads {
		if ob := s.ownedBundle(id); ob != nil && u.From == me {
			s.goRun(func() { s.release(ob, "admin unload") })
		} else if ob != nil && u.From != me {
			// This broker owns it and the unload named another owner: it
			// moved meanwhile (the unload is answered, or moot).
			s.goRun(func() {
				ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
				defer cancel()
				_ = s.cfg.Store.Delete(ctx, unloadKey(id))
			})
		}
	}
	if !shedding {
		if id, ok := v.Shed(me); ok {
			if ob := s.ownedBundle(id); ob != nil {
				s.mu.Lock()
				s.shedding = true
				s.mu.Unlock()
				s.goRun(func() {
					s.release(ob, "load shedding")
					s.mu.Lock()
					s.shedding = false
					s.mu.Unlock()
				})
			}
		}
	}
}

// liveLease returns the current lease if it is live.
func (s *Service) liveLease() (*meta.Lease, error) {
	s.leaseMu.Lock()
	l, ok := s.lease, s.leaseOK
	s.leaseMu.Unlock()
	select {
	case <-ok:
	default:
		return nil, errLeadershipLost
	}
	select {
	case <-l.Done():
		return nil, errLeadershipLost
	default:
		return l, nil
	}
}

func (s *Service) isOwned(id bundle.ID) bool { return s.ownedBundle(id) != nil }

func (s *Service) ownedBundle(id bundle.ID) *ownedBundle {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owned[id]
}

// voidDeadBrokers revokes the lease of every registered broker the
// membership layer (Config.MemberDown: Serf's failure detection) reports
// dead, so its bundles are free at once rather than after the lease TTL.
// A broker wrongly declared dead only loses its bundles: its writes are
// conditioned on its owner keys, so nothing it does afterwards lands. The
// registration's instance goes with the question, so that a broker
// restarted under the same name is not declared dead by the failure of
// its previous run, which Serf may still show.
func (s *Service) voidDeadBrokers(brokers map[string]brokerRec, owners map[bundle.ID]ownerEntry) {
	if s.cfg.MemberDown == nil {
		return
	}
	owns := map[string]bool{}
	for _, e := range owners {
		owns[e.Broker] = true
	}
	for name, b := range brokers {
		if name == s.cfg.Name || b.Draining || !owns[name] || !s.cfg.MemberDown(name, b.Instance) {
			continue
		}
		s.mu.Lock()
		done := s.voided[b.Lease]
		s.voided[b.Lease] = true
		s.mu.Unlock()
		if done {
			continue
		}
		s.cfg.Logger.Warn("broker reported dead by the membership layer; releasing its bundles", "broker", name)
		s.goRun(func() {
			ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
			defer cancel()
			if err := s.cfg.Store.RevokeLeaseID(ctx, b.Lease); err != nil {
				s.cfg.Logger.Warn("revoking a dead broker's lease failed", "broker", name, "err", err)
				s.mu.Lock()
				delete(s.voided, b.Lease)
				s.mu.Unlock()
			}
		})
	}
}

// acquire tries to create bundle id's owner key under lease (absent →
// ours); on success this broker serves the bundle's topics.
func (s *Service) acquire(id bundle.ID, lease *meta.Lease) {
	s.mu.Lock()
	if s.closing || s.draining || s.acquiring[id] || s.owned[id] != nil {
		s.mu.Unlock()
		return
	}
	s.acquiring[id] = true
	s.mu.Unlock()
	s.goRun(func() {
		defer func() {
			s.mu.Lock()
			delete(s.acquiring, id)
			s.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		defer cancel()
		rec, _ := json.Marshal(ownerRec{Broker: s.cfg.Name, Lease: lease.ID(), Since: s.cfg.Now().UTC()})
		rev, err := s.cfg.Store.CAS(ctx, ownerKey(id), rec, 0, meta.WithLease(lease.ID()))
		if err != nil {
			if !errors.Is(err, meta.ErrConflict) {
				s.cfg.Logger.Warn("acquiring a bundle failed", "bundle", id.String(), "err", err)
			}
			return
		}
		s.place.mu.RLock()
		_, unloaded := s.place.unloads[id]
		s.place.mu.RUnlock()
		if unloaded {
			s.mu.Lock()
			s.settling[id] = s.cfg.Now()
			s.mu.Unlock()
		}
		_ = s.cfg.Store.Delete(ctx, unloadKey(id)) // an unload it answers is done
		bctx, stop := context.WithCancel(s.ctx)
		ob := &ownedBundle{id: id, cond: meta.Cond{Key: ownerKey(id), ModRevision: rev}, lease: lease,
			ctx: bctx, stop: stop, serving: map[tenancy.Name]bool{}}
		s.mu.Lock()
		if s.closing || s.draining {
			s.mu.Unlock()
			stop()
			_ = s.cfg.Store.DeleteIf(ctx, ownerKey(id), rev)
			return
		}
		s.owned[id] = ob
		s.mu.Unlock()
		s.cfg.Logger.Info("owning bundle", "bundle", id.String())
		s.goRun(func() {
			select {
			case <-lease.Done():
				s.loseBundle(ob, errLeadershipLost)
			case <-bctx.Done():
			}
		})
		for _, n := range s.reg.all() {
			if s.bundleOf(n) == id {
				s.serveTopic(ob, n)
			}
		}
	})
}

// serveTopic starts topic n's serve loop in owned bundle ob, once.
func (s *Service) serveTopic(ob *ownedBundle, n tenancy.Name) {
	ob.mu.Lock()
	if ob.serving[n] || ob.releasing || ob.ctx.Err() != nil {
		ob.mu.Unlock()
		return
	}
	ob.serving[n] = true
	ob.wg.Add(1)
	ob.mu.Unlock()
	s.goRun(func() {
		defer ob.wg.Done()
		defer func() {
			ob.mu.Lock()
			delete(ob.serving, n)
			ob.mu.Unlock()
		}()
		s.topicLoop(ob, n)
	})
}

// topicLoop serves topic n while ob is owned: open it (takeover recovery
// fences the previous owner), serve until it stops, and open it again if
// it stopped by itself (e.g. its ledger writer failed) while the bundle is
// still owned. Release and loss of the bundle shut the topic down.
func (s *Service) topicLoop(ob *ownedBundle, n tenancy.Name) {
	defer s.noteOpen(n, nil)
	backoff := 100 * time.Millisecond
	for ob.active() {
		if s.reg.topic(n) == nil {
			return // deleted
		}
		t, err := s.openTopic(ob.ctx, n, ob)
		s.noteOpen(n, err)
		if err != nil {
			if ob.ctx.Err() == nil {
				s.cfg.Logger.Warn("opening an owned topic failed; retrying", "topic", n.String(), "err", err)
				s.sleep(ob.ctx, backoff)
				backoff = min(2*backoff, 5*time.Second)
			}
			continue
		}
		backoff = 100 * time.Millisecond
		select {
		case <-t.done:
		case <-ob.ctx.Done():
			<-t.done // release or loss shuts it down
		}
		s.mu.Lock()
		if s.topics[n] == t {
			delete(s.topics, n)
		}
		s.mu.Unlock()
		if t.deleted.Load() {
			return
		}
		if ob.active() {
			s.sleep(ob.ctx, backoff)
		}
	}
}

// noteOpen records the outcome of opening topic n for parked publishes:
// a failure for want of writable bookies (ledger.ErrNotEnoughBookies) is
// kept until an open succeeds or the topic is no longer served here.
func (s *Service) noteOpen(n tenancy.Name, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && errors.Is(err, ledger.ErrNotEnoughBookies) {
		s.openFail[n] = err
		return
	}
	delete(s.openFail, n)
}

// topicsOf returns the topics of bundle id this broker serves.
func (s *Service) topicsOf(id bundle.ID) []*topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*topic
	for _, t := range s.topics {
		// The bundle the topic is served under: after a change of its
		// namespace's bundle count, no longer the one bundleOf names.
		if t.own != nil && t.own.id == id {
			out = append(out, t)
		}
	}
	return out
}

// release hands bundle ob over gracefully (load shedding, an admin
// unload, or the broker stopping): its topics are closed (pending adds
// confirmed, open ledgers closed, cursors persisted; waiting pulls get
// 409 Leadership Change), then its owner key is deleted so that the
// broker placement picks acquires it.
func (s *Service) release(ob *ownedBundle, why string) {
	ob.mu.Lock()
	if ob.releasing || ob.ctx.Err() != nil {
		ob.mu.Unlock()
		return
	}
	ob.releasing = true
	ob.mu.Unlock()
	s.cfg.Logger.Info("handing bundle over", "bundle", ob.id.String(), "why", why)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.HandoverTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, t := range s.topicsOf(ob.id) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := t.shutdown(ctx, true); err != nil {
				s.cfg.Logger.Warn("closing a topic for handover failed; the next owner recovers it", "topic", t.name.String(), "err", err)
			}
		}()
	}
	wg.Wait()
	ob.stop()
	ob.wg.Wait()
	s.mu.Lock()
	if s.owned[ob.id] == ob {
		delete(s.owned, ob.id)
	}
	s.mu.Unlock()
	if err := s.cfg.Store.DeleteIf(ctx, ob.cond.Key, ob.cond.ModRevision); err != nil && !errors.Is(err, meta.ErrConflict) {
		s.cfg.Logger.Warn("deleting a released bundle's owner key failed; it expires with the lease", "bundle", ob.id.String(), "err", err)
	}
	s.kickPlacement()
}

// loseBundle stops serving bundle ob at once: its ownership ended (lease
// lost or owner key gone). Nothing more is written or acknowledged for
// its topics.
func (s *Service) loseBundle(ob *ownedBundle, err error) {
	ob.mu.Lock()
	if ob.ctx.Err() != nil {
		ob.mu.Unlock()
		return
	}
	ob.releasing = true
	ob.mu.Unlock()
	s.cfg.Logger.Warn("lost bundle ownership", "bundle", ob.id.String(), "err", err)
	for _, t := range s.topicsOf(ob.id) {
		t.lost(err)
	}
	ob.stop()
	s.mu.Lock()
	if s.owned[ob.id] == ob {
		delete(s.owned, ob.id)
	}
	s.mu.Unlock()
	s.kickPlacement()
}

// drain hands every owned bundle over before the broker stops (SIGTERM):
// the broker registers as draining so that placement puts nothing on it,
// then releases its bundles, all at once.
func (s *Service) drain(ctx context.Context) {
	s.mu.Lock()
	s.draining = true
	owned := make([]*ownedBundle, 0, len(s.owned))
	for _, ob := range s.owned {
		owned = append(owned, ob)
	}
	s.mu.Unlock()
	if l, err := s.liveLease(); err == nil {
		if err := s.register(ctx, l, true); err != nil {
			s.cfg.Logger.Warn("registering as draining failed", "err", err)
		}
	}
	var wg sync.WaitGroup
	for _, ob := range owned {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.release(ob, "broker stopping")
		}()
	}
	wg.Wait()
}

// topicAdded serves a topic new to the registry if this broker owns its
// bundle.
func (s *Service) topicAdded(n tenancy.Name) {
	if ob := s.ownedBundle(s.bundleOf(n)); ob != nil {
		s.serveTopic(ob, n)
	}
}

// topicRemoved stops serving a deleted topic.
func (s *Service) topicRemoved(n tenancy.Name) {
	s.mu.Lock()
	t := s.topics[n]
	s.mu.Unlock()
	if t != nil {
		t.deleted.Store(true)
		_ = t.shutdown(context.Background(), false)
	}
}

func (s *Service) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
