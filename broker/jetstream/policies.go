package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/tenancy"
)

// Policies is the service's view of the tenants and namespaces
// (ARCHITECTURE §5: the broker consults tenancy through interfaces it
// defines). Its methods are called on hot paths (every publish's
// routing): they must not block or do I/O.
type Policies interface {
	// Namespace returns tenant/ns's policies; false when there is no such
	// namespace (or its tenant is gone).
	Namespace(tenant, ns string) (Namespace, bool)
	// Tenant reports whether the tenant exists.
	Tenant(tenant string) bool
	// Namespaces lists every namespace as (tenant, namespace) pairs.
	Namespaces() [][2]string
}

// StaticPolicies is a fixed Policies: tenant → namespace → policy (tests,
// and meshes that never change at run time).
type StaticPolicies map[string]map[string]Namespace

// Namespace implements Policies.
func (p StaticPolicies) Namespace(tenant, ns string) (Namespace, bool) {
	n, ok := p[tenant][ns]
	return n, ok
}

// Tenant implements Policies.
func (p StaticPolicies) Tenant(tenant string) bool { _, ok := p[tenant]; return ok }

// Namespaces implements Policies.
func (p StaticPolicies) Namespaces() [][2]string {
	var out [][2]string
	for t, nss := range p {
		for ns := range nss {
			out = append(out, [2]string{t, ns})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0]+"/"+out[i][1] < out[j][0]+"/"+out[j][1] })
	return out
}

type noPolicies struct{}

func (noPolicies) Namespace(string, string) (Namespace, bool) { return Namespace{}, false }
func (noPolicies) Tenant(string) bool                         { return false }
func (noPolicies) Namespaces() [][2]string                    { return nil }

// nsOffload is topic n's namespace's offload policy (nil: none).
func (s *Service) nsOffload(n tenancy.Name) *mledger.OffloadPolicy {
	ns, _ := s.namespace(n.Tenant, n.Namespace)
	return ns.Offload
}

// namespace is tenant/ns's policies from Config.Policies.
func (s *Service) namespace(tenant, ns string) (Namespace, bool) {
	return s.cfg.Policies.Namespace(tenant, ns)
}

// PoliciesChanged tells the service that Config.Policies changed: every
// topic this broker owns applies its namespace's policies again (in the
// background, soon; changes in a burst are applied once). It never
// blocks.
func (s *Service) PoliciesChanged() {
	select {
	case s.policyKick <- struct{}{}:
	default:
	}
}

// policyLoop applies policy changes to the owned topics, one round at a
// time, until the service stops; a round also runs every
// policyRecheck, so that a step that failed is retried.
func (s *Service) policyLoop() {
	tick := time.NewTicker(policyRecheck)
	defer tick.Stop()
	for {
		changed := false
		select {
		case <-s.ctx.Done():
			return
		case <-s.policyKick:
			changed = true
		case <-tick.C:
		}
		s.mu.Lock()
		topics := make([]*topic, 0, len(s.topics))
		for _, t := range s.topics {
			topics = append(topics, t)
		}
		s.mu.Unlock()
		for _, t := range topics {
			if t.isReady() {
				t.applyPolicies(changed)
			}
		}
	}
}

// policyRecheck is how often owned topics re-apply their namespace's
// policies besides on a change (retrying a failed step).
const policyRecheck = 5 * time.Second

// policyState is a topic's last attempt to apply its namespace's
// policies: the error of a step that keeps failing, for its stats.
type policyState struct {
	mu       sync.Mutex
	err      string
	failures int
	since    time.Time
	next     time.Time // no retry before (backoff)
}

func (p *policyState) failed(now time.Time, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failures == 0 {
		p.since = now
	}
	p.failures++
	p.err = err.Error()
	p.next = now.Add(min(time.Second<<min(p.failures, 6), time.Minute))
}

func (p *policyState) ok() {
	p.mu.Lock()
	p.err, p.failures = "", 0
	p.mu.Unlock()
}

// status is the error of applying a topic's namespace policies while a
// step keeps failing ("" when they are applied), the failures in a row
// and when the first was.
func (p *policyState) status() (string, int, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err, p.failures, p.since
}

// applyPolicies brings topic t in line with its namespace's policies:
// its replicator cursors (a region added starts from the retained
// messages, a region removed stops), and — for a topic the namespace
// made (not a stream created through the JetStream API with limits of
// its own) — retention, TTL and the dedup window; the offload policy
// applies from its next check. A namespace that is gone deletes the
// topic in this region.
//
// A failing step is retried with a backoff, unless changed (the policies
// just changed: try at once).
func (t *topic) applyPolicies(changed bool) {
	now := t.s.cfg.Now()
	t.policy.mu.Lock()
	wait := !changed && t.policy.failures > 0 && now.Before(t.policy.next)
	t.policy.mu.Unlock()
	if wait {
		return
	}
	ns, ok := t.s.namespace(t.name.Tenant, t.name.Namespace)
	if !ok {
		if err := t.deleteOrphan(); err != nil {
			t.policy.failed(now, fmt.Errorf("deleting the topic of a deleted namespace: %w", err))
		}
		return
	}
	t.reconcileReplication()
	if t.ml != nil {
		t.ml.SetOffloadPolicy(ns.Offload)
	}
	if err := t.applyRetention(ns); err != nil {
		t.policy.failed(now, err)
		t.s.cfg.Logger.Warn("applying namespace policies failed", "topic", t.name.String(), "err", err)
		return
	}
	if !t.staleCursors.Load() {
		t.policy.ok()
	}
}

// deleteOrphan deletes the topic of a namespace that no longer exists
// (deleted here or in another region): its data, cursors and metadata
// in this region. Other regions delete their copies themselves when the
// namespace's tombstone reaches them, so no topic tombstone is sent.
func (t *topic) deleteOrphan() error {
	if t.deleted.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(t.s.ctx, apiTimeout)
	defer cancel()
	t.s.cfg.Logger.Info("deleting a topic whose namespace was deleted", "topic", t.name.String())
	return t.deleteStream(ctx, false)
}

// reconcileReplication starts replicator cursors towards regions the
// namespace now lists and stops those of regions it no longer lists
// (their persisted positions are removed by dropStaleCursors).
func (t *topic) reconcileReplication() {
	want := t.s.remotesOf(t.name)
	t.mu.Lock()
	if t.stopped || t.ml == nil {
		t.mu.Unlock()
		return
	}
	ml := t.ml
	parked := t.parkedOf()
	var keep []*replSender
	removed := false
	for _, r := range t.repl {
		switch {
		case slices.Contains(want, r.remote) && r.epoch == t.s.replEpoch(t.name.Tenant, t.name.Namespace, r.remote):
			keep = append(keep, r)
		case hasKey(parked, r.remote):
			r.stop() // a pending decommission: its position stays, held (repl_decom.go)
			t.parkLocked(r.remote, r.pos.Load())
			t.stopping = append(t.stopping, r)
			removed = true
		default:
			r.stop() // removed, or removed and added back (a new epoch)
			t.stopping = append(t.stopping, r)
			removed = true
		}
	}
	if len(t.parked) > 0 {
		removed = true // a parked cursor may have been confirmed or cancelled
	}
	var added []*replSender
	for _, remote := range want {
		if !slices.ContainsFunc(keep, func(r *replSender) bool { return r.remote == remote }) {
			r := t.newSender(ml, remote)
			keep = append(keep, r)
			added = append(added, r)
		}
	}
	t.repl = keep
	t.mu.Unlock()
	removed = removed || t.staleCursors.Load()
	for _, r := range added {
		t.s.cfg.Logger.Info("replicator cursor started: region added to the replication list", "topic", t.name.String(), "remote", r.remote)
		t.s.goRun(r.run)
	}
	if removed {
		t.s.goRun(t.dropStaleCursors)
	}
}

// namespaceManaged reports whether the topic's limits follow its
// namespace's retention: it was made by the namespace (auto-created or
// through the admin API), not through the JetStream API.
func namespaceManaged(st *stream) bool {
	n := st.name
	return st.stream == n.Namespace+":"+n.Topic && slices.Equal(st.config.Subjects, topicSubjects(n.Tenant, n.Namespace, n.Topic))
}

// nsStreamConfig is the stream configuration the namespace gives its
// topic n (retention, limits, dedup window).
func nsStreamConfig(n tenancy.Name, ns Namespace) jsapi.StreamConfig {
	cfg := jsapi.StreamConfig{
		Name: n.Namespace + ":" + n.Topic, Subjects: topicSubjects(n.Tenant, n.Namespace, n.Topic),
		MaxAge: ns.MaxAge, MaxBytes: ns.MaxBytes, MaxMsgs: ns.MaxMsgs, Duplicates: ns.DuplicateWindow,
	}
	switch ns.Retention {
	case "interest":
		cfg.Retention = jsapi.RetentionInterest
	case "workqueue":
		cfg.Retention = jsapi.RetentionWorkQueue
	}
	cfg.SetDefaults()
	return cfg
}

// errRetentionMode: a namespace's retention mode changed under existing
// topics (JetStream cannot change a stream's retention).
var errRetentionMode = errors.New("jetstream: a topic's retention mode cannot change")

// applyRetention updates a namespace-managed topic's limits to its
// namespace's.
func (t *topic) applyRetention(ns Namespace) error {
	cur := t.stream()
	if cur == nil || !namespaceManaged(cur) {
		return nil
	}
	want := nsStreamConfig(t.name, ns)
	have := cur.config
	if have.MaxAge == want.MaxAge && have.MaxBytes == want.MaxBytes && have.MaxMsgs == want.MaxMsgs &&
		have.Duplicates == want.Duplicates && have.Retention == want.Retention {
		return nil
	}
	if have.Retention != want.Retention {
		return fmt.Errorf("%w: topic %s keeps %s retention (the namespace now asks for %s); delete and re-create it to change",
			errRetentionMode, t.name, have.Retention, want.Retention)
	}
	next := have
	next.MaxAge, next.MaxBytes, next.MaxMsgs, next.Duplicates = want.MaxAge, want.MaxBytes, want.MaxMsgs, want.Duplicates
	ctx, cancel := context.WithTimeout(t.s.ctx, apiTimeout)
	defer cancel()
	if err := t.update(ctx, cur, &next); err != nil {
		return fmt.Errorf("applying the namespace's retention: %s", err.Description)
	}
	t.s.cfg.Logger.Info("namespace retention applied", "topic", t.name.String(),
		"max_age", next.MaxAge, "max_bytes", next.MaxBytes, "max_msgs", next.MaxMsgs, "duplicates", next.Duplicates)
	return nil
}
