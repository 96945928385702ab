package region

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/storage"
	"github.com/stratamesh/strata/broker"
	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/internal/adminhttp"
	"github.com/stratamesh/strata/internal/gossip"
	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/nodedir"
	"github.com/stratamesh/strata/internal/telemetry"
	"github.com/stratamesh/strata/internal/tlsconf"
	"github.com/stratamesh/strata/topology"
)

// Node is one running node of a region.
type Node struct {
	cfg    NodeConfig
	spec   topology.Node
	region *topology.Region
	logger *slog.Logger
	name   string // Serf node name, SerfName(region, id)
	// run identifies this process's life (random): the Serf tag TagRun and
	// a broker's ownership registration carry it, so that a failure Serf
	// remembers of an earlier run is never taken for this one's.
	run string

	embedded *meta.Embedded // meta nodes only
	store    *meta.Store
	lan      *gossip.Pool
	wan      *gossip.Pool // brokers only
	admin    *adminhttp.Server
	tel      *telemetry.Telemetry
	reg      *registration
	broker   *broker.Server              // brokers only
	js       *jetstream.Service          // brokers only: the JetStream layer
	cp       *controlPlane               // brokers only: tenants, namespaces, policies
	nauth    *natsAuth                   // brokers only, with auth.nats: NATS accounts (accounts.go)
	quota    *quotas                     // brokers only: tenant quotas (quota.go)
	failover *failover                   // brokers only: client failover (failover.go)
	lanRef   atomic.Pointer[gossip.Pool] // n.lan, for the broker's peer source
	wanRef   atomic.Pointer[gossip.Pool] // n.wan, for replicator cursors
	bookie   *bookie.Bookie              // bookies only
	ledgerCl ledgerClient                // opened on first use by the ledger admin routes
	tier     regionTier                  // the region's tier, opened with the JetStream layer
	tls      *tlsconf.Bundle             // the topology's TLS material; nil without a tls section (tls.go)
	engine   *storage.Engine             // bookies only: the bookie's storage
	joins    []func()                    // pool joins, run after registration
	ports    rememberedPorts             // ports bound last time (ports.json)
	dirLock  io.Closer                   // the node directory's lock (lockDir), released last by Stop
	// readOnlyMu serializes operators' read-only settings (putReadOnly).
	readOnlyMu sync.Mutex

	fatal    chan error // capacity 1: the first fatal error
	stop     chan struct{}
	wg       sync.WaitGroup
	stopOnce sync.Once
	stopErr  error
}

// StartNode starts every part of the node and returns once it is serving:
// metadata reachable, registered, pools started (and a first join tried),
// admin HTTP listening. On error everything started so far is stopped.
func StartNode(ctx context.Context, cfg NodeConfig) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.RegistrationTTL == 0 {
		cfg.RegistrationTTL = DefaultRegistrationTTL
	}
	if cfg.Gossip == "" {
		cfg.Gossip = gossip.ProfileLAN
	}
	r, _ := cfg.Mesh.Region(cfg.Region)
	spec, _ := r.Node(cfg.ID)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{
		cfg: cfg, spec: spec, region: r,
		name:   SerfName(cfg.Region, cfg.ID),
		run:    newRunID(),
		logger: logger.With("region", cfg.Region, "node", cfg.ID, "role", spec.Role),
		stop:   make(chan struct{}),
		fatal:  make(chan error, 1),
	}
	if err := n.start(ctx); err != nil {
		n.Stop(context.Background())
		return nil, fmt.Errorf("region: start node %s: %w", n.name, err)
	}
	return n, nil
}

func (n *Node) start(ctx context.Context) error {
	var err error
	n.tel, err = telemetry.New(telemetry.Identity{Mesh: n.cfg.Mesh.Name, Region: n.cfg.Region, Node: n.cfg.ID, Role: n.spec.Role})
	if err != nil {
		return err
	}
	if err := n.lockDir(); err != nil {
		return err
	}
	n.ports = loadPorts(n.dir())
	if err := n.loadTLS(); err != nil {
		return err
	}
	endpoints := n.cfg.EtcdEndpoints
	if n.spec.Role == topology.RoleMeta {
		if err := n.startEmbedded(ctx); err != nil {
			return err
		}
		endpoints = []string{n.embedded.ClientURL()}
	}
	if len(endpoints) == 0 {
		endpoints = metadataEndpoints(n.region, n.tls != nil)
	}
	if len(endpoints) == 0 {
		return fmt.Errorf("no metadata endpoints for region %s: the meta node has no fixed client_port and none was given (--etcd)", n.cfg.Region)
	}
	n.store, err = meta.Open(ctx, n.metaConfig(meta.Config{
		Endpoints: endpoints,
		Prefix:    KeyPrefix(n.cfg.Mesh, n.region),
		Logger:    n.logger,
	}))
	if err != nil {
		return err
	}
	if n.spec.Role != topology.RoleBroker && n.cfg.Mesh.Auth != nil && n.cfg.Mesh.Auth.Enabled {
		// Admin tokens are in the region's configuration: other nodes
		// read it too (a broker seeds it and exchanges it).
		if n.cp, err = n.openControlPlane(ctx, false); err != nil {
			return err
		}
	}
	if n.spec.Role == topology.RoleBroker {
		if n.cp, err = n.openControlPlane(ctx, true); err != nil {
			return err
		}
		if err := n.newQuotas(); err != nil {
			return err
		}
		if n.nauth, err = n.openNATSAuth(); err != nil {
			return err
		}
		if n.js, err = n.newJetStream(); err != nil {
			return err
		}
		if err := n.startBroker(); err != nil {
			return err
		}
		if n.nauth != nil {
			n.nauth.start(n.cp.store)
		}
		if err := n.startJetStream(ctx); err != nil {
			return err
		}
	}
	if err := n.startPools(); err != nil {
		return err
	}
	n.lanRef.Store(n.lan)
	n.wanRef.Store(n.wan)
	if n.cp != nil && n.broker != nil {
		if err := n.cp.startSync(); err != nil {
			return err
		}
		if err := n.startQuotas(); err != nil {
			return err
		}
	}
	if n.spec.Role == topology.RoleBookie {
		if err := n.startBookie(ctx); err != nil {
			return err
		}
	}
	if err := n.startAdmin(); err != nil {
		return err
	}
	if err := n.rememberPorts(); err != nil {
		return err
	}
	n.reg = newRegistration(n.store, n.registrationKey(), n.cfg.RegistrationTTL, n.logger)
	n.reg.alive = n.adminProbe()
	if err := n.reg.register(ctx, n.Endpoints()); err != nil {
		return err
	}
	// Join only once registered: a duplicate of a live node must not meet
	// the pools, where Serf's name-conflict resolution could evict the
	// original.
	for _, join := range n.joins {
		join()
	}
	n.goLoop(func() {
		if err := n.reg.keep(n.stop, n.Endpoints()); err != nil {
			n.fail(err)
		}
	})
	n.watchPool(n.lan, "lan")
	n.watchPool(n.wan, "wan")
	if n.embedded != nil {
		n.goLoop(func() {
			select {
			case <-n.stop:
			case err := <-n.embedded.Err():
				n.fail(fmt.Errorf("embedded etcd: %w", err))
			}
		})
	}
	if n.engine != nil {
		if err := registerBookieMetrics(n); err != nil {
			return err
		}
	}
	if n.broker != nil {
		if err := registerBrokerMetrics(n); err != nil {
			return err
		}
		if n.js != nil {
			if err := registerReplicationMetrics(n); err != nil {
				return err
			}
		}
		if n.failover != nil && n.js != nil {
			n.goLoop(func() { n.failover.run(n.stop) })
		}
		if err := registerQuotaMetrics(n); err != nil {
			return err
		}
	}
	return registerMetrics(n)
}

func (n *Node) startEmbedded(ctx context.Context) error {
	cfg := meta.DefaultEmbeddedConfig()
	cfg.Name = n.cfg.Region + "-" + n.cfg.ID
	cfg.Dir = filepath.Join(n.dir(), "etcd")
	cfg.Host = n.host()
	cfg.ClientPort = n.spec.ClientPort
	cfg.PeerPort = n.spec.PeerPort
	cfg.Fast = n.cfg.Gossip == gossip.ProfileLoopback
	cfg.Logger = n.logger
	n.embeddedTLS(&cfg)
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return err
	}
	fixed := cfg.ClientPort + cfg.PeerPort
	e, err := withPort(fixed, n.ports.Client, func(port int) (*meta.Embedded, error) {
		c := cfg
		if port != 0 && fixed == 0 {
			c.ClientPort, c.PeerPort = n.ports.Client, n.ports.Peer
		}
		return meta.StartEmbedded(ctx, c)
	})
	if err != nil {
		return err
	}
	n.embedded = e
	return nil
}

func (n *Node) startPools() error {
	tags := map[string]string{"region": n.cfg.Region, "role": n.spec.Role, "id": n.cfg.ID, "mesh": n.cfg.Mesh.Name, TagRun: n.run}
	if n.broker != nil {
		tags[TagNATS] = n.broker.ClientURL()
		tags[TagRoute] = n.broker.RouteAddr()
	}
	lanProfile, wanProfile := n.cfg.Gossip, gossip.ProfileWAN
	if n.cfg.Gossip == gossip.ProfileLoopback {
		wanProfile = gossip.ProfileLoopback
	}
	var err error
	if n.lan, err = n.startPool("lan", lanProfile, n.spec.SerfLANPort, n.ports.SerfLAN, tags, n.lanSeeds()); err != nil {
		return err
	}
	if n.spec.Role != topology.RoleBroker {
		return nil
	}
	n.wan, err = n.startPool("wan", wanProfile, n.spec.SerfWANPort, n.ports.SerfWAN, tags, n.wanSeeds())
	return err
}

// startPool starts one Serf pool for the node (on its fixed, else its
// remembered port) and queues the join of its seeds.
func (n *Node) startPool(pool string, profile gossip.Profile, port, remembered int, tags map[string]string, seeds []string) (*gossip.Pool, error) {
	if err := os.MkdirAll(n.dir(), 0o755); err != nil {
		return nil, err
	}
	p, err := withPort(port, remembered, func(port int) (*gossip.Pool, error) {
		return gossip.Start(gossip.Config{
			NodeName: n.name, BindAddr: n.host(), BindPort: port,
			Tags: tags, Profile: profile, Logger: n.logger.With("pool", pool),
			// A restarted node rejoins the members it knew (a broker whose
			// WAN seeds were restarted too, or that had none).
			SnapshotPath: filepath.Join(n.dir(), "serf-"+pool+".snapshot"),
			SecretKey:    n.gossipKey(),
		})
	})
	if err != nil {
		return nil, err
	}
	n.joins = append(n.joins, func() { n.joinInBackground(p, pool, seeds) })
	return p, nil
}

// joinInBackground tries the seeds once now and, if none answered, again
// with backoff (0.5 s doubling to 5 s) until one does or the node stops.
// Seeds that are this node itself are dropped.
func (n *Node) joinInBackground(p *gossip.Pool, pool string, seeds []string) {
	var others []string
	for _, s := range seeds {
		if s != p.Addr() {
			others = append(others, s)
		}
	}
	if len(others) == 0 {
		return
	}
	if _, err := p.Join(others); err == nil {
		return
	}
	n.goLoop(func() {
		backoff := 500 * time.Millisecond
		for {
			select {
			case <-n.stop:
				return
			case <-time.After(backoff):
			}
			_, err := p.Join(others)
			if err == nil {
				n.logger.Info("joined pool", "pool", pool, "seeds", others)
				return
			}
			n.logger.Warn("join failed, retrying", "pool", pool, "err", err, "retry_in", backoff)
			backoff = min(2*backoff, 5*time.Second)
		}
	})
}

func (n *Node) startAdmin() error {
	n.admin = adminhttp.New(n.logger)
	if err := n.mountAdmin(); err != nil {
		return err
	}
	n.admin.AddReadyCheck("metadata", func(ctx context.Context) error {
		_, err := n.store.Get(ctx, n.registrationKey())
		return err
	})
	_, err := withPort(n.spec.AdminPort, n.ports.Admin, func(port int) (struct{}, error) {
		return struct{}{}, n.admin.StartTLS(net.JoinHostPort(n.host(), strconv.Itoa(port)), n.adminTLS())
	})
	return err
}

// rememberPorts saves the ports bound now for the next start.
func (n *Node) rememberPorts() error {
	e := n.Endpoints()
	p := rememberedPorts{Admin: portOf(e.Admin), SerfLAN: portOf(e.SerfLAN), SerfWAN: portOf(e.SerfWAN), GRPC: portOf(e.GRPC), NATS: portOf(e.NATS)}
	for home, u := range e.Failover {
		if p.Failover == nil {
			p.Failover = map[string]int{}
		}
		p.Failover[home] = portOf(u)
	}
	if n.embedded != nil {
		p.Client, p.Peer = portOf(n.embedded.ClientURL()), portOf(n.embedded.PeerURL())
	}
	return p.save(n.dir())
}

// portOf is the port of a host:port or URL (0 when there is none).
func portOf(addr string) int {
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		addr = u.Host
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(port)
	return p
}

func (n *Node) goLoop(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// dir is where the node keeps its data (nodedir.Dir).
func (n *Node) dir() string { return nodedir.Dir(n.cfg.DataDir, n.cfg.Region, n.spec) }

// host is the address the node binds, from the topology (default loopback).
func (n *Node) host() string {
	if n.spec.Host == "" {
		return "127.0.0.1"
	}
	return n.spec.Host
}

func (n *Node) registrationKey() string { return "nodes/" + n.spec.Role + "/" + n.cfg.ID }

// Endpoints reports the node's resolved addresses, as mesh.json lists them.
func (n *Node) Endpoints() meshfile.Node {
	e := meshfile.Node{ID: n.cfg.ID, Role: n.spec.Role, PID: os.Getpid()}
	if n.embedded != nil {
		e.Etcd = n.embedded.ClientURL()
	}
	if n.admin != nil {
		e.Admin = n.admin.URL()
	}
	if n.lan != nil {
		e.SerfLAN = n.lan.Addr()
	}
	if n.wan != nil {
		e.SerfWAN = n.wan.Addr()
	}
	if n.bookie != nil {
		e.GRPC = n.bookie.Addr()
	}
	if n.broker != nil {
		e.NATS = n.broker.ClientURL()
		e.GRPC = n.broker.RouteAddr()
		if g := n.broker.GuestURLs(); len(g) > 0 {
			e.Failover = g
		}
	}
	return e
}

// Routes returns the routes the node's admin HTTP server serves (for the OpenAPI
// check).
func (n *Node) Routes() []string { return n.admin.Routes() }

// Stop hands a broker's bundles over (jetstream.Service.Close), leaves
// the pools gracefully, drops the registration, and stops every part; it
// waits for all goroutines. Idempotent: later calls return
// the first call's result.
func (n *Node) Stop(ctx context.Context) error {
	n.stopOnce.Do(func() {
		close(n.stop)
		var errs []error
		// A broker hands its bundles over first, while its routes and
		// pools are up, so that its clients' work keeps flowing.
		if n.js != nil {
			errs = append(errs, n.js.Close(ctx))
		}
		// Then the quota coordinator candidacy goes and the connection
		// counts are handed over, while the routes are up and before the
		// broker closes its connections.
		errs = append(errs, n.quota.close(ctx))
		n.cp.close()
		for _, p := range []*gossip.Pool{n.wan, n.lan} {
			if p == nil {
				continue
			}
			if err := p.Leave(); err != nil {
				n.logger.Warn("leave failed", "pool", p.Name(), "err", err)
			}
			errs = append(errs, p.Close())
		}
		n.wg.Wait()
		if n.broker != nil {
			errs = append(errs, n.broker.Close(ctx))
		}
		if n.bookie != nil {
			errs = append(errs, n.bookie.Stop(ctx))
		}
		errs = append(errs, n.closeLedgers())
		errs = append(errs, n.closeTier())
		if n.reg != nil {
			errs = append(errs, n.reg.revoke(ctx))
		}
		if n.admin != nil {
			errs = append(errs, n.admin.Close(ctx))
		}
		if n.store != nil {
			errs = append(errs, n.store.Close())
		}
		if n.embedded != nil {
			errs = append(errs, n.embedded.Close())
		}
		if n.tel != nil {
			errs = append(errs, n.tel.Shutdown(ctx))
		}
		if n.dirLock != nil {
			errs = append(errs, n.dirLock.Close())
		}
		n.stopErr = errors.Join(errs...)
	})
	return n.stopErr
}

// lockDir locks the node's directory (nodedir.Lock) before the node
// touches anything in it — Serf snapshots, remembered ports, the
// bookie's cookie and storage, etcd's data — so that a second process
// for the same node (one restarted by hand while the old one lives)
// stops at once, naming the holder, instead of working on files the live
// one uses. A crash or kill releases it.
func (n *Node) lockDir() error {
	l, err := nodedir.Lock(n.dir())
	if errors.Is(err, nodedir.ErrInUse) {
		return fmt.Errorf("%w (probably another %s: stop it first): %w", ErrDuplicateNode, n.name, err)
	}
	if err != nil {
		return err
	}
	n.dirLock = l
	return nil
}

// Fatal delivers the first error after which the node cannot go on: its
// embedded etcd failed, Serf shut a pool down (it lost a name conflict to
// another process running the same node), or another live process took its
// registration. The caller should Stop the node and exit non-zero.
func (n *Node) Fatal() <-chan error { return n.fatal }

func (n *Node) fail(err error) {
	select {
	case n.fatal <- err:
	default:
	}
}

// watchPool reports a pool that Serf shut down by itself as fatal.
func (n *Node) watchPool(p *gossip.Pool, pool string) {
	if p == nil {
		return
	}
	n.goLoop(func() {
		select {
		case <-n.stop:
		case <-p.ShutdownCh():
			select {
			case <-n.stop: // our own Close
			default:
				n.fail(fmt.Errorf("serf %s pool shut down (another process may be running node %s)", pool, n.name))
			}
		}
	})
}

// SerfName is a node's name in its Serf pools: "<region>.<id>". Not
// "<region>/<id>": Serf rejoins failed members by joining "<name>/<addr>"
// and memberlist splits that at the first "/", so a "/" in the name breaks
// reconnection after a failure or partition. Tokens never contain ".".
func SerfName(region, id string) string { return region + "." + id }

// KeyPrefix is the etcd key prefix of a region's metadata:
// <metadata prefix>/<mesh>/<region>, so regions sharing one external etcd
// never collide.
func KeyPrefix(m *topology.Mesh, r *topology.Region) string { return m.KeyPrefix(r) }

// metadataEndpoints is where a region's metadata lives according to the
// topology alone: its external etcd, or its meta node at a fixed port.
func metadataEndpoints(r *topology.Region, secure bool) []string {
	if !r.Metadata.Embedded {
		return r.Metadata.Etcd
	}
	var out []string
	for _, m := range r.NodesOf(topology.RoleMeta) {
		if m.ClientPort != 0 {
			u := url.URL{Scheme: "http", Host: net.JoinHostPort(m.Host, strconv.Itoa(m.ClientPort))}
			if secure {
				u.Scheme = "https"
			}
			out = append(out, u.String())
		}
	}
	return out
}

// lanSeeds are the configured LAN seeds, or the region's other nodes with
// fixed Serf LAN ports.
func (n *Node) lanSeeds() []string {
	if len(n.cfg.LANJoin) > 0 {
		return n.cfg.LANJoin
	}
	var out []string
	for _, role := range []string{topology.RoleMeta, topology.RoleBookie, topology.RoleBroker} {
		for _, o := range n.region.NodesOf(role) {
			if o.ID != n.cfg.ID && o.SerfLANPort != 0 {
				out = append(out, net.JoinHostPort(o.Host, strconv.Itoa(o.SerfLANPort)))
			}
		}
	}
	return out
}

// wanSeeds are the configured WAN seeds, else the region's wan_join, else
// other regions' brokers with fixed Serf WAN ports.
func (n *Node) wanSeeds() []string {
	if len(n.cfg.WANJoin) > 0 {
		return n.cfg.WANJoin
	}
	if len(n.region.WANJoin) > 0 {
		return n.region.WANJoin
	}
	var out []string
	for i := range n.cfg.Mesh.Regions {
		r := &n.cfg.Mesh.Regions[i]
		for _, b := range r.NodesOf(topology.RoleBroker) {
			if (r.Name != n.cfg.Region || b.ID != n.cfg.ID) && b.SerfWANPort != 0 {
				out = append(out, net.JoinHostPort(b.Host, strconv.Itoa(b.SerfWANPort)))
			}
		}
	}
	return out
}
