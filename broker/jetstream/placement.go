package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stratamesh/strata/broker/bundle"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/tenancy"
)

// Ownership keys in the region's etcd (ARCHITECTURE §3 "Ownership"):
//
//	bundles/brokers/<broker>         brokerRec, under the broker's lease
//	bundles/owners/<t>/<ns>/<range>  ownerRec, under the owner's lease
//	bundles/unloads/<t>/<ns>/<range> unloadRec: an admin unload in progress
//
// A broker owns a bundle while its owner key exists with the mod revision
// it created it at; every etcd write for the bundle's topics is
// conditioned on exactly that (the managed ledger's and cursors' Cond).
const (
	bundlesPrefix      = "bundles/"
	brokersPrefix      = bundlesPrefix + "brokers/"
	bundleOwnersPrefix = bundlesPrefix + "owners/"
	unloadsPrefix      = bundlesPrefix + "unloads/"
)

// brokerRec registers a broker as a possible bundle owner.
type brokerRec struct {
	// Lease is the broker's ownership lease: revoking it releases every
	// bundle the broker owns.
	Lease meta.LeaseID `json:"lease"`
	// Instance is the broker's process run (Config.Instance).
	Instance string `json:"instance,omitempty"`
	// Draining: the broker is stopping (SIGTERM) and hands its bundles
	// over; nothing is placed on it.
	Draining bool      `json:"draining,omitempty"`
	Since    time.Time `json:"since"`
}

// ownerRec is the value of a bundle's owner key.
type ownerRec struct {
	Broker string       `json:"broker"`
	Lease  meta.LeaseID `json:"lease"`
	Since  time.Time    `json:"since"`
}

// unloadRec asks the owner of a bundle to hand it over: not back to From,
// to To when To is a live broker.
type unloadRec struct {
	From string    `json:"from"`
	To   string    `json:"to,omitempty"`
	At   time.Time `json:"at"`
}

func ownerKey(id bundle.ID) string  { return bundleOwnersPrefix + id.String() }
func unloadKey(id bundle.ID) string { return unloadsPrefix + id.String() }

// ownerEntry is an owner key as last seen.
type ownerEntry struct {
	ownerRec
	rev int64 // mod revision
}

// placement mirrors the bundles/ keys from a watch, so that finding a
// topic's owner on the publish path never waits for etcd.
type placement struct {
	mu      sync.RWMutex
	rev     int64 // the last revision applied
	brokers map[string]brokerRec
	owners  map[bundle.ID]ownerEntry
	unloads map[bundle.ID]unloadRec
	// unowned is when each bundle was first seen without an owner.
	unowned map[bundle.ID]time.Time
	changed chan struct{} // a token when anything changed
}

func newPlacement() *placement {
	p := &placement{changed: make(chan struct{}, 1)}
	p.reset()
	return p
}

func (p *placement) reset() {
	p.brokers = map[string]brokerRec{}
	p.owners = map[bundle.ID]ownerEntry{}
	p.unloads = map[bundle.ID]unloadRec{}
	if p.unowned == nil {
		p.unowned = map[bundle.ID]time.Time{}
	}
}

func (p *placement) signal() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// load lists bundles/ and replaces the mirror; it returns the revision
// listed at.
func (p *placement) load(ctx context.Context, st *meta.Store) (int64, error) {
	kvs, rev, err := st.ListWithRev(ctx, bundlesPrefix)
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	p.reset()
	for _, kv := range kvs {
		p.putLocked(kv)
	}
	p.rev = rev
	p.mu.Unlock()
	p.signal()
	return rev, nil
}

func (p *placement) putLocked(kv meta.KV) {
	switch {
	case strings.HasPrefix(kv.Key, brokersPrefix):
		var r brokerRec
		if json.Unmarshal(kv.Value, &r) == nil {
			p.brokers[strings.TrimPrefix(kv.Key, brokersPrefix)] = r
		}
	case strings.HasPrefix(kv.Key, bundleOwnersPrefix):
		id, err := bundle.ParseID(strings.TrimPrefix(kv.Key, bundleOwnersPrefix))
		var r ownerRec
		if err == nil && json.Unmarshal(kv.Value, &r) == nil {
			p.owners[id] = ownerEntry{ownerRec: r, rev: kv.ModRevision}
			delete(p.unowned, id)
		}
	case strings.HasPrefix(kv.Key, unloadsPrefix):
		id, err := bundle.ParseID(strings.TrimPrefix(kv.Key, unloadsPrefix))
		var r unloadRec
		if err == nil && json.Unmarshal(kv.Value, &r) == nil {
			p.unloads[id] = r
		}
	}
}

func (p *placement) deleteLocked(key string) {
	switch {
	case strings.HasPrefix(key, brokersPrefix):
		delete(p.brokers, strings.TrimPrefix(key, brokersPrefix))
	case strings.HasPrefix(key, bundleOwnersPrefix):
		if id, err := bundle.ParseID(strings.TrimPrefix(key, bundleOwnersPrefix)); err == nil {
			delete(p.owners, id)
		}
	case strings.HasPrefix(key, unloadsPrefix):
		if id, err := bundle.ParseID(strings.TrimPrefix(key, unloadsPrefix)); err == nil {
			delete(p.unloads, id)
		}
	}
}

func (p *placement) apply(ev meta.Event) {
	p.mu.Lock()
	if ev.Type == meta.EventPut {
		p.putLocked(ev.KV)
	} else {
		p.deleteLocked(ev.KV.Key)
	}
	p.rev = ev.Revision
	p.mu.Unlock()
	p.signal()
}

// watch follows bundles/ from rev until ctx ends, re-listing after a
// compaction or a broken watch.
func (p *placement) watch(ctx context.Context, st *meta.Store, rev int64, log *slog.Logger) {
	for ctx.Err() == nil {
		for ev := range st.Watch(ctx, bundlesPrefix, rev) {
			if ev.Type != meta.EventPut && ev.Type != meta.EventDelete {
				break
			}
			p.apply(ev)
			rev = ev.Revision + 1
		}
		if ctx.Err() != nil {
			return
		}
		log.Info("re-listing bundle ownership after the watch ended")
		r, err := p.load(ctx, st)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		rev = r + 1
	}
}

// owner returns the broker owning bundle id ("" when none).
func (p *placement) owner(id bundle.ID) string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.owners[id].Broker
}

// view returns the placement view over bundles, and the bundles seen
// without an owner with the time they were first seen so (recorded now
// for those new to it).
func (p *placement) view(bundles []bundle.ID, now time.Time) (bundle.View, map[bundle.ID]time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := bundle.View{Owners: map[bundle.ID]string{}, Unloads: map[bundle.ID]bundle.Unload{}}
	for name, b := range p.brokers {
		if !b.Draining {
			v.Brokers = append(v.Brokers, name)
		}
	}
	sort.Strings(v.Brokers)
	for id, o := range p.owners {
		v.Owners[id] = o.Broker
	}
	for id, u := range p.unloads {
		v.Unloads[id] = bundle.Unload{From: u.From, To: u.To}
	}
	unowned := map[bundle.ID]time.Time{}
	for _, id := range bundles {
		if _, ok := p.owners[id]; ok {
			continue
		}
		since, ok := p.unowned[id]
		if !ok {
			since = now
			p.unowned[id] = now
		}
		unowned[id] = since
	}
	return v, unowned
}

// BundleInfo is one bundle as `strata admin bundles list` shows it.
type BundleInfo struct {
	Bundle string    `json:"bundle"` // tenant/namespace/0xLLLLLLLL_0xHHHHHHHH
	Owner  string    `json:"owner,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	Topics int       `json:"topics"`
	// Unloading names the broker an admin unload moves it from.
	Unloading string `json:"unloading,omitempty"`
}

// Bundles lists the region's bundles (every namespace's) with their
// owners and the number of topics each holds, sorted by name.
func (s *Service) Bundles() []BundleInfo {
	counts := map[bundle.ID]int{}
	for _, n := range s.reg.all() {
		counts[s.bundleOf(n)]++
	}
	s.place.mu.RLock()
	defer s.place.mu.RUnlock()
	var out []BundleInfo
	for _, id := range s.allBundles() {
		o := s.place.owners[id]
		out = append(out, BundleInfo{Bundle: id.String(), Owner: o.Broker, Since: o.Since, Topics: counts[id], Unloading: s.place.unloads[id].From})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bundle < out[j].Bundle })
	return out
}

// bundleCount is namespace tenant/ns's number of bundles (its policy,
// default 4).
func (s *Service) bundleCount(tenant, ns string) int {
	if p, ok := s.namespace(tenant, ns); ok && p.Bundles > 0 {
		return p.Bundles
	}
	return DefaultBundles
}

// bundleOf is the bundle topic n belongs to.
func (s *Service) bundleOf(n tenancy.Name) bundle.ID {
	return bundle.Of(n.Tenant, n.Namespace, n.Topic, s.bundleCount(n.Tenant, n.Namespace))
}

// ownerOf is the broker owning topic n's bundle ("" when none).
func (s *Service) ownerOf(n tenancy.Name) string { return s.place.owner(s.bundleOf(n)) }

// allBundles is every bundle of the region: those of the configured
// namespaces and of the namespaces of known topics.
func (s *Service) allBundles() []bundle.ID {
	seen := map[[2]string]bool{}
	var out []bundle.ID
	add := func(t, ns string) {
		if seen[[2]string{t, ns}] {
			return
		}
		seen[[2]string{t, ns}] = true
		out = append(out, bundle.Namespace(t, ns, s.bundleCount(t, ns))...)
	}
	for _, k := range s.cfg.Policies.Namespaces() {
		add(k[0], k[1])
	}
	if s.cfg.DefaultTenant != "" {
		add(s.cfg.DefaultTenant, s.cfg.DefaultNamespace)
	}
	for _, n := range s.reg.all() {
		add(n.Tenant, n.Namespace)
	}
	// Sorted by String, each computed once (not twice per comparison).
	keys := make([]string, len(out))
	for i, id := range out {
		keys[i] = id.String()
	}
	sort.Sort(byKey{ids: out, keys: keys})
	return out
}

// byKey sorts bundle ids by their precomputed String keys.
type byKey struct {
	ids  []bundle.ID
	keys []string
}

func (b byKey) Len() int           { return len(b.ids) }
func (b byKey) Less(i, j int) bool { return b.keys[i] < b.keys[j] }
func (b byKey) Swap(i, j int) {
	b.ids[i], b.ids[j] = b.ids[j], b.ids[i]
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
}

// Errors of Unload.
var (
	// ErrUnknownBundle: the bundle is not one of the region's (no such
	// namespace, or not one of its ranges).
	ErrUnknownBundle = errors.New("jetstream: no such bundle")
	// ErrNotLive: the unload's target is not a live broker of the region.
	ErrNotLive = errors.New("jetstream: not a live broker")
	// ErrNoOwner: the bundle has no owner to move it from.
	ErrNoOwner = errors.New("jetstream: the bundle has no owner")
)

// Unload asks the owner of bundle id to hand it over (`strata admin
// bundles unload`): it records an unload in etcd, which the owner answers
// by closing the bundle's topics and deleting its owner key; the bundle
// then goes to broker to (when not "") or to the least loaded other live
// broker. It returns the owner it moves from. Errors: ErrUnknownBundle,
// ErrNotLive (to), ErrNoOwner, or etcd's.
func (s *Service) Unload(ctx context.Context, id bundle.ID, to string) (from string, err error) {
	known := false
	for _, b := range s.allBundles() {
		known = known || b == id
	}
	if !known {
		return "", fmt.Errorf("%w: %s", ErrUnknownBundle, id)
	}
	s.place.mu.RLock()
	from = s.place.owners[id].Broker
	target, live := s.place.brokers[to]
	s.place.mu.RUnlock()
	if to != "" && (!live || target.Draining) {
		return "", fmt.Errorf("%w: %s", ErrNotLive, to)
	}
	if from == "" {
		return "", fmt.Errorf("%w: %s", ErrNoOwner, id)
	}
	if from == to {
		return from, nil
	}
	_, err = meta.PutJSON(ctx, s.cfg.Store, unloadKey(id), unloadRec{From: from, To: to, At: s.cfg.Now().UTC()})
	return from, err
}

// WaitMoved waits until bundle id has an owner other than from and
// returns it. Errors: ctx's.
func (s *Service) WaitMoved(ctx context.Context, id bundle.ID, from string) (string, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if o := s.place.owner(id); o != "" && o != from {
			return o, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-tick.C:
		}
	}
}
