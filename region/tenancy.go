package region

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/replicator/link"
	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/tenancy/store"
	"github.com/stratamesh/strata/topology"
)

// controlPlane is a broker's share of the control plane (ARCHITECTURE
// §5): the region's configuration records (tenancy/store), their
// exchange with the other regions over the WAN, and the decoded view of
// the namespaces' policies that the JetStream layer reads on its hot
// paths.
type controlPlane struct {
	n      *Node
	store  *store.Store
	syncer *store.Syncer
	view   policyView

	linksMu sync.Mutex
	links   map[string]*link.Link
	unsub   func()
}

// openControlPlane opens the region's configuration and (seed) seeds it
// with the topology's tenants where the region has no record of them.
func (n *Node) openControlPlane(ctx context.Context, seed bool) (*controlPlane, error) {
	st, err := store.Open(ctx, store.Config{Meta: n.store, Region: n.cfg.Region, Logger: n.logger})
	if err != nil {
		return nil, err
	}
	c := &controlPlane{n: n, store: st, links: map[string]*link.Link{}}
	if !seed {
		return c, nil
	}
	if _, err := st.Seed(ctx, n.cfg.Mesh.TenancyConfig()); err != nil {
		st.Close()
		return nil, fmt.Errorf("seed the region's configuration from the topology: %w", err)
	}
	c.view.rebuild(st)
	st.OnChange(func(changed []tenancy.Record) {
		c.view.update(st, changed)
		if js := n.js; js != nil {
			js.PoliciesChanged()
		}
	})
	return c, nil
}

// startSync starts the exchange with the other regions once the broker
// and the WAN pool run: pushes go over a link per remote region to any
// of its brokers; batches from other regions arrive on store.Subject.
func (c *controlPlane) startSync() error {
	unsub, err := c.n.broker.SubscribeInternal(store.Subject, func(_, _, _, payload []byte) {
		if c.syncer != nil {
			c.syncer.Receive(bytes.Clone(payload))
		}
	})
	if err != nil {
		return err
	}
	unsubTopics, err := c.n.broker.SubscribeInternal(topicsSubject, c.answerTopics)
	if err != nil {
		unsub()
		return err
	}
	c.unsub = func() { unsub(); unsubTopics() }
	for _, r := range c.remotes() {
		if _, err := c.linkTo(r); err != nil { // dial every region now, not on the first push
			return err
		}
	}
	sy, err := store.StartSync(store.SyncConfig{
		Store: c.store, Region: c.n.cfg.Region, Logger: c.n.logger,
		Remotes: c.remotes, Publish: c.publish, Key: c.syncKey(),
		Interval: time.Duration(c.n.region.Replicator.ConfigSyncInterval),
	})
	if err != nil {
		return err
	}
	c.syncer = sy
	return nil
}

// syncKey signs the configuration exchanged between regions when admin
// auth is on: the superuser token's hash, which every node of the mesh
// has and NATS clients do not (nil with auth off: anyone may change the
// configuration then anyway).
func (c *controlPlane) syncKey() []byte {
	a := c.n.cfg.Mesh.Auth
	if a == nil || !a.Enabled {
		return nil
	}
	h := a.SuperuserTokenSHA256
	if h == "" {
		h = os.Getenv(topology.EnvSuperuserTokenSHA256)
	}
	return []byte("strata config sync " + strings.ToLower(h))
}

// topicsSubject asks a region's brokers which topics of a namespace the
// region holds (before a namespace is deleted without force): a sealed
// "tenant/namespace", answered with a sealed topicsAnswer.
const topicsSubject = "$STRATA.CONFIG.TOPICS"

// topicsAnswer is a region's answer on topicsSubject.
type topicsAnswer struct {
	Region string   `json:"region"`
	Topics []string `json:"topics"`
}

// answerTopics answers a topics query (an internal subscription's
// handler: it must not block; the broker's registry is in memory).
func (c *controlPlane) answerTopics(_, reply, _, payload []byte) {
	if len(reply) == 0 || c.n.js == nil {
		return
	}
	body, err := store.Unseal(c.syncKey(), payload)
	if err != nil {
		return
	}
	n, err := tenancy.ParseNSName(string(body))
	if err != nil {
		return
	}
	a := topicsAnswer{Region: c.n.cfg.Region, Topics: []string{}}
	for _, t := range c.n.js.Topics(n.Tenant, n.Namespace) {
		a.Topics = append(a.Topics, t.Topic)
	}
	b, _ := json.Marshal(a)
	c.n.broker.PublishInternal(bytes.Clone(reply), nil, nil, store.Seal(c.syncKey(), b))
}

// remoteTopics asks every other region which topics of namespace n it
// holds. Errors name the regions that did not answer within timeout.
func (c *controlPlane) remoteTopics(ctx context.Context, n tenancy.NSName, timeout time.Duration) (map[string][]string, error) {
	out := map[string][]string{}
	var missing []string
	for _, r := range c.remotes() {
		l, err := c.linkTo(r)
		if err != nil {
			missing = append(missing, r)
			continue
		}
		prefix, answers, unregister := l.Register()
		got := false
		if err := l.Publish(topicsSubject, prefix+"1", store.Seal(c.syncKey(), []byte(n.String()))); err == nil {
			wait := time.NewTimer(timeout)
			select {
			case b := <-answers:
				var a topicsAnswer
				if body, err := store.Unseal(c.syncKey(), b); err == nil && json.Unmarshal(body, &a) == nil {
					out[r], got = a.Topics, true
				}
			case <-wait.C:
			case <-ctx.Done():
			}
			wait.Stop()
		}
		unregister()
		if !got {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return out, fmt.Errorf("region(s) %s did not answer", strings.Join(missing, ", "))
	}
	return out, nil
}

// remotes is every other region of the mesh.
func (c *controlPlane) remotes() []string {
	var out []string
	for _, r := range c.n.cfg.Mesh.Regions {
		if r.Name != c.n.cfg.Region {
			out = append(out, r.Name)
		}
	}
	return out
}

func (c *controlPlane) publish(region string, data []byte) error {
	l, err := c.linkTo(region)
	if err != nil {
		return err
	}
	return l.Publish(store.Subject, "", data)
}

// linkTo is the link to region's brokers, made on first use.
func (c *controlPlane) linkTo(region string) (*link.Link, error) {
	c.linksMu.Lock()
	defer c.linksMu.Unlock()
	if l := c.links[region]; l != nil {
		return l, nil
	}
	l, err := link.New(link.Config{
		Remote: region, Name: "strata-config " + c.n.cfg.Region + "/" + c.n.name,
		Brokers: func() []string { return c.n.remoteBrokers(region) }, Logger: c.n.logger,
		Options: c.n.nauth.natsOptions(),
		TLS:     c.n.clientTLS(),
	})
	if err != nil {
		return nil, err
	}
	c.links[region] = l
	return l, nil
}

// close stops the exchange and the store.
func (c *controlPlane) close() {
	if c == nil {
		return
	}
	if c.unsub != nil {
		c.unsub()
	}
	if c.syncer != nil {
		c.syncer.Close()
	}
	c.linksMu.Lock()
	for _, l := range c.links {
		l.Close()
	}
	c.links = map[string]*link.Link{}
	c.linksMu.Unlock()
	c.store.Close()
}

// policyView is the namespaces' policies decoded for the JetStream layer
// (jetstream.Policies), updated whenever a record changes (only what
// changed is decoded again: a bulk creation of N namespaces costs O(N)
// decodes, not O(N²)); reads never lock.
type policyView struct {
	cur atomic.Pointer[policySnapshot]
}

type policySnapshot struct {
	tenants map[string]bool
	nss     map[[2]string]jetstream.Namespace
	list    [][2]string
}

// stateViewer is what the view reads: the store's cached State.
type stateViewer interface{ View(func(*tenancy.State)) }

func (v *policyView) rebuild(st stateViewer) {
	snap := &policySnapshot{tenants: map[string]bool{}, nss: map[[2]string]jetstream.Namespace{}}
	st.View(func(s *tenancy.State) {
		for _, t := range s.Tenants() {
			snap.tenants[t.Name] = true
		}
		for _, ns := range s.Namespaces("") {
			k := [2]string{ns.Tenant, ns.Name}
			snap.nss[k] = jsNamespaceIn(s, ns)
			snap.list = append(snap.list, k)
		}
	})
	v.cur.Store(snap)
}

// update applies changed records to a copy of the current snapshot: a
// namespace record decodes that namespace again, a tenant record its
// tenant and every namespace of it (their visibility follows the
// tenant's).
func (v *policyView) update(st stateViewer, changed []tenancy.Record) {
	old := v.cur.Load()
	if old == nil {
		v.rebuild(st)
		return
	}
	snap := &policySnapshot{tenants: maps.Clone(old.tenants), nss: maps.Clone(old.nss)}
	st.View(func(s *tenancy.State) {
		setNS := func(n tenancy.NSName) {
			k := [2]string{n.Tenant, n.Namespace}
			if ns, ok := s.Namespace(n); ok {
				snap.nss[k] = jsNamespaceIn(s, ns)
			} else {
				delete(snap.nss, k)
			}
		}
		for _, r := range changed {
			switch r.Kind {
			case tenancy.KindTenant:
				_, live := s.Tenant(r.Key)
				if live {
					snap.tenants[r.Key] = true
				} else {
					delete(snap.tenants, r.Key)
				}
				for _, rec := range s.Records() {
					if n, err := tenancy.ParseNSName(rec.Key); rec.Kind == tenancy.KindNamespace && err == nil && n.Tenant == r.Key {
						setNS(n)
					}
				}
			case tenancy.KindNamespace:
				if n, err := tenancy.ParseNSName(r.Key); err == nil {
					setNS(n)
				}
			}
		}
	})
	snap.list = make([][2]string, 0, len(snap.nss))
	for k := range snap.nss {
		snap.list = append(snap.list, k)
	}
	v.cur.Store(snap)
}

// Namespace implements jetstream.Policies.
func (v *policyView) Namespace(tenant, ns string) (jetstream.Namespace, bool) {
	s := v.cur.Load()
	if s == nil {
		return jetstream.Namespace{}, false
	}
	p, ok := s.nss[[2]string{tenant, ns}]
	return p, ok
}

// Tenant implements jetstream.Policies.
func (v *policyView) Tenant(tenant string) bool {
	s := v.cur.Load()
	return s != nil && s.tenants[tenant]
}

// Namespaces implements jetstream.Policies.
func (v *policyView) Namespaces() [][2]string {
	if s := v.cur.Load(); s != nil {
		return s.list
	}
	return nil
}

// jsNamespaceIn is namespace ns of state s as the JetStream layer
// applies it: its policies (jsNamespace), the replication epochs and
// the regions a pending decommission parked.
func jsNamespaceIn(_ *tenancy.State, ns tenancy.Namespace) jetstream.Namespace {
	out := jsNamespace(ns.Policies)
	if len(ns.ReplicationEpochs) > 0 {
		out.ReplicationEpochs = make(map[string]string, len(ns.ReplicationEpochs))
		for r, e := range ns.ReplicationEpochs {
			out.ReplicationEpochs[r] = epochString(e)
		}
	}
	if p := ns.Parked; len(p) > 0 {
		out.Parked = make(map[string]string, len(p))
		for r, e := range p {
			out.Parked[r] = epochString(e)
		}
	}
	return out
}

// epochString is a replication epoch as the broker compares it ("" for
// the zero epoch of a seeded namespace's regions).
func epochString(e tenancy.HLC) string {
	if e.IsZero() {
		return ""
	}
	return e.String()
}

// jsNamespace is a namespace's policies as the JetStream layer applies
// them: message_ttl bounds the retention time (JetStream's max_age).
func jsNamespace(p tenancy.Policies) jetstream.Namespace {
	maxAge := time.Duration(p.Retention.Time)
	if ttl := time.Duration(p.MessageTTL); ttl > 0 && (maxAge == 0 || ttl < maxAge) {
		maxAge = ttl
	}
	out := jetstream.Namespace{
		AutoCreateTopics:   p.AutoCreateTopics,
		Retention:          p.Retention.Mode,
		MaxAge:             maxAge,
		MaxBytes:           p.Retention.Size,
		MaxMsgs:            p.Retention.Messages,
		DuplicateWindow:    time.Duration(p.DedupWindow),
		Bundles:            p.Bundles,
		Replication:        p.Replication,
		MaxConsumers:       p.MaxConsumers,
		SubscriptionExpiry: time.Duration(p.SubscriptionExpiry),
	}
	if o := p.Offload; o != nil {
		out.Offload = &mledger.OffloadPolicy{Threshold: o.Threshold, DeletionLag: time.Duration(o.DeletionLag)}
	}
	if b := p.BacklogQuota; b != nil {
		out.BacklogQuota = &jetstream.BacklogQuota{Size: b.Size, Age: time.Duration(b.Time), Policy: b.Policy}
	}
	return out
}
