package quotanet

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratamesh/strata/broker"
	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/meta/metatest"
	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/tenancy/quota"
)

func TestMain(m *testing.M) { metatest.Main(m) }

var (
	_ broker.Quotas    = (*Agent)(nil)
	_ jetstream.Quotas = (*Agent)(nil)
)

// Test timing: reports every 100 ms, quota leases of 1 s, election
// leases of 2 s (etcd's floor).
const (
	testInterval    = 100 * time.Millisecond
	testLeaseTTL    = time.Second
	testElectionTTL = 2 * time.Second
)

// staticPeers is a broker.PeerSource over a fixed list.
type staticPeers struct {
	mu      sync.Mutex
	peers   []broker.Peer
	changed chan struct{}
}

func (p *staticPeers) Peers() []broker.Peer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]broker.Peer(nil), p.peers...)
}
func (p *staticPeers) Changed() <-chan struct{} { return p.changed }

// node is one in-process broker with its quota Agent and Coordinator.
type node struct {
	id    string
	srv   *broker.Server
	agent *Agent
	coord *Coordinator
	dead  bool
}

// kill stops the node as a crash would: no hand-over, no resignation
// (its election lease expires on its own), its broker closed.
func (n *node) kill(t *testing.T) {
	t.Helper()
	n.dead = true
	n.coord.crashed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.coord.Close(ctx); err != nil {
		t.Fatal(err)
	}
	n.agent.stopOnce.Do(func() { close(n.agent.stop); <-n.agent.done; n.agent.unsubscribe() })
	if err := n.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// startRegion starts brokers b1..bn of region (of regions), routed to
// each other, each with an Agent and a Coordinator campaigning in store;
// wan, when set, is every coordinator's Config.WAN.
func startRegion(t *testing.T, store *meta.Store, region string, regions []string, n int, wan func(region, subject string, data []byte) error) []*node {
	t.Helper()
	peers := &staticPeers{changed: make(chan struct{}, 1)}
	var nodes []*node
	for i := range n {
		id := fmt.Sprintf("b%d", i+1)
		srv, err := broker.Start(broker.Config{ServerName: region + "." + id, Mesh: "m", Region: region,
			ListenAddr: "127.0.0.1:0", RouteAddr: "127.0.0.1:0", Peers: peers})
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Region: region, Regions: regions, BrokerID: id, Brokers: n, Store: store, WAN: wan,
			Interval: testInterval, LeaseTTL: testLeaseTTL, ElectionTTL: testElectionTTL, Clock: NewClock()}
		a, err := NewAgent(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewCoordinator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		nd := &node{id: id, srv: srv, agent: a, coord: c}
		nodes = append(nodes, nd)
		t.Cleanup(func() {
			if nd.dead {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, err := range []error{c.Close(ctx), a.Close(ctx), srv.Close(ctx)} {
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	var ps []broker.Peer
	for _, nd := range nodes {
		ps = append(ps, broker.Peer{Name: nd.srv.Name(), RouteAddr: nd.srv.RouteAddr()})
	}
	peers.mu.Lock()
	peers.peers = ps
	peers.mu.Unlock()
	peers.changed <- struct{}{}
	testutil.Eventually(t, "full route mesh", 10*time.Second, func() bool {
		for _, nd := range nodes {
			if len(nd.srv.Routes()) != n-1 {
				return false
			}
		}
		return true
	})
	for _, nd := range nodes {
		if err := nd.agent.Start(nd.srv); err != nil {
			t.Fatal(err)
		}
		if err := nd.coord.Start(nd.srv); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

func setLimits(nodes []*node, limits map[string]quota.Limits) {
	for _, nd := range nodes {
		nd.agent.SetTenants(limits)
		nd.coord.SetTenants(limits)
	}
}

// leaderOf waits for one live node to coordinate and every live node's
// agent to follow that term; it returns the leader.
func leaderOf(t *testing.T, nodes []*node, older uint64) *node {
	t.Helper()
	var lead *node
	took := testutil.Eventually(t, "a coordinator followed by every broker", 15*time.Second, func() bool {
		lead = nil
		for _, nd := range nodes {
			if !nd.dead && nd.coord.Term() > older {
				lead = nd
			}
		}
		if lead == nil {
			return false
		}
		for _, nd := range nodes {
			if !nd.dead && nd.agent.Term() != lead.coord.Term() {
				return false
			}
		}
		return true
	})
	t.Logf("coordinator %s (term %d) after %v", lead.id, lead.coord.Term(), took)
	return lead
}

// publisher offers rate publishes/s of tenant to an agent, paced by
// elapsed time (it catches up after a slow scheduling), and counts what
// is admitted.
type publisher struct {
	admitted atomic.Int64
	offered  atomic.Int64
	stop     chan struct{}
	done     chan struct{}
}

func offer(a *Agent, tenant string, rate float64) *publisher {
	p := &publisher{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		start := time.Now()
		var n int64
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			for want := int64(time.Since(start).Seconds() * rate); n < want; n++ {
				p.offered.Add(1)
				if a.AdmitPublish(tenant, 100) == nil {
					p.admitted.Add(1)
				}
			}
		}
	}()
	return p
}

func (p *publisher) close() { close(p.stop); <-p.done }

// rates measures the admitted rate of each publisher over d.
func rates(ps []*publisher, d time.Duration) []float64 {
	before := make([]int64, len(ps))
	for i, p := range ps {
		before[i] = p.admitted.Load()
	}
	start := time.Now()
	time.Sleep(d)
	secs := time.Since(start).Seconds()
	out := make([]float64, len(ps))
	for i, p := range ps {
		out[i] = float64(p.admitted.Load()-before[i]) / secs
	}
	return out
}
