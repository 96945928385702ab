package jetstream_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/bookietest/cluster"
	"github.com/stratamesh/strata/broker"
	"github.com/stratamesh/strata/broker/jetstream"
	metapkg "github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/meta/metatest"
)

// strataRegion is one in-process Strata region for tests: a Store on the
// shared embedded etcd, real bookies, and brokers each running the NATS
// server with its JetStream layer.
type strataRegion struct {
	t       testing.TB
	store   *metapkg.Store
	bookies *cluster.Cluster
	tweak   func(*jetstream.Config)
	// brokerTweak, when set, edits each broker's Config (e.g. its Auth).
	brokerTweak func(*broker.Config)

	mu      sync.Mutex
	brokers []*strataBroker
}

type strataBroker struct {
	name      string
	listen    string
	routeAddr string
	srv       *broker.Server
	js        *jetstream.Service
	region    *strataRegion
	stopped   bool
}

// staticPeers is every other broker of the test region.
type staticPeers struct {
	r    *strataRegion
	self string
}

func (p staticPeers) Peers() []broker.Peer {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	var out []broker.Peer
	for _, b := range p.r.brokers {
		if b.name != p.self && !b.stopped && b.routeAddr != "" {
			out = append(out, broker.Peer{Name: b.name, RouteAddr: b.routeAddr})
		}
	}
	return out
}

func (p staticPeers) Changed() <-chan struct{} { return nil }

// newStrataRegion starts bookies (E3/Qw2/Qa2 over 4) and n brokers.
func newStrataRegion(t testing.TB, n int, tweak func(*jetstream.Config)) *strataRegion {
	return newStrataRegionWith(t, n, tweak, nil)
}

// newStrataRegionWith is newStrataRegion with each broker's Config edited
// by brokerTweak too.
func newStrataRegionWith(t testing.TB, n int, tweak func(*jetstream.Config), brokerTweak func(*broker.Config)) *strataRegion {
	t.Helper()
	r := &strataRegion{t: t, store: metatest.OpenStore(t), tweak: tweak, brokerTweak: brokerTweak}
	r.bookies = cluster.Start(t, r.store, 4)
	for i := 1; i <= n; i++ {
		b := &strataBroker{name: fmt.Sprintf("test.b%d", i), listen: "127.0.0.1:0", routeAddr: "127.0.0.1:0", region: r}
		r.mu.Lock()
		r.brokers = append(r.brokers, b)
		r.mu.Unlock()
		b.start(t)
	}
	return r
}

func testLogger() *slog.Logger {
	if os.Getenv("STRATA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func (b *strataBroker) start(t testing.TB) {
	t.Helper()
	r := b.region
	lc := r.bookies.Client(t)
	// Registered after the ledger client's cleanup, so it runs before it:
	// the broker closes its topics (and their ledgers) first.
	t.Cleanup(func() { b.stop(t) })
	cfg := jetstream.Config{
		Name: b.name, Store: r.store, Ledgers: lc,
		Ensemble: 3, WriteQuorum: 2, AckQuorum: 2,
		RolloverEntries: 100,
		Policies: jetstream.StaticPolicies{
			"demo": {"streams": {AutoCreateTopics: true}, "events": {AutoCreateTopics: true}},
		},
		DefaultTenant: "demo", DefaultNamespace: "streams",
		LeaseTTL: 2 * time.Second,
		Logger:   testLogger().With("broker", b.name),
	}
	if r.tweak != nil {
		r.tweak(&cfg)
	}
	js, err := jetstream.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bcfg := broker.Config{
		ServerName: b.name, Region: "test", Mesh: "test",
		ListenAddr: b.listen, RouteAddr: b.routeAddr,
		Peers: staticPeers{r: r, self: b.name}, Hook: js,
		Logger: testLogger().With("broker", b.name),
	}
	if r.brokerTweak != nil {
		r.brokerTweak(&bcfg)
	}
	srv, err := broker.Start(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := js.Start(ctx, srv); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	b.srv, b.js, b.stopped = srv, js, false
	b.listen, b.routeAddr = srv.Addr(), srv.RouteAddr()
	r.mu.Unlock()
}

func (b *strataBroker) stop(t testing.TB) {
	b.region.mu.Lock()
	if b.stopped || b.srv == nil {
		b.region.mu.Unlock()
		return
	}
	b.stopped = true
	b.region.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.js.Close(ctx); err != nil {
		t.Logf("closing jetstream of %s: %v", b.name, err)
	}
	if err := b.srv.Close(ctx); err != nil {
		t.Logf("closing broker %s: %v", b.name, err)
	}
}

// restart stops and starts broker b on the same ports.
func (b *strataBroker) restart(t testing.TB) {
	b.stop(t)
	b.start(t)
}

func (b *strataBroker) url() string { return "nats://" + b.listen }

func TestMain(m *testing.M) { metatest.Main(m) }
