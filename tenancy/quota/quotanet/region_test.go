package quotanet

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratamesh/strata/broker"
	"github.com/stratamesh/strata/internal/meta/metatest"
	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/tenancy/quota"
)

func limit(rate float64) map[string]quota.Limits {
	var l quota.Limits
	l.Mesh[quota.PublishRate] = rate
	return map[string]quota.Limits{"acme": l}
}

// One region, two brokers, a tenant limited to 200 msgs/s offered 400
// (250 at one broker, 150 at the other): the region admits 200 ± 15%,
// the busier broker more than its static share (leases moved allowance
// to it); the usage answers name the limit; a limit changed live reaches
// the coordinator; after the leader's broker is killed the other takes
// over and keeps admitting its static share (the dead broker's share
// stays reserved: it may still be admitting, for all the region knows).
func TestRegionAdmitsTheLimitAndFailsOver(t *testing.T) {
	store := metatest.OpenStore(t)
	nodes := startRegion(t, store, "r", []string{"r"}, 2, nil)
	setLimits(nodes, limit(200))
	lead := leaderOf(t, nodes, 0)

	pubs := []*publisher{offer(nodes[0].agent, "acme", 250), offer(nodes[1].agent, "acme", 150)}
	defer func() {
		for _, p := range pubs {
			p.close()
		}
	}()
	took := testutil.Eventually(t, "allowance moved to the busier broker", 10*time.Second, func() bool {
		a, _ := nodes[0].agent.Allowance("acme", quota.PublishRate)
		return a > 110
	})
	t.Logf("leases after %v", took)
	r := rates(pubs, 3*time.Second)
	total := r[0] + r[1]
	t.Logf("admitted %.1f msgs/s (b1 %.1f, b2 %.1f) of a 200 msgs/s limit", total, r[0], r[1])
	if total < 170 || total > 230 {
		t.Errorf("region admitted %.1f msgs/s, want 200 ± 15%%", total)
	}
	if r[0] <= 105 {
		t.Errorf("b1 (offering 250/s) admitted %.1f msgs/s, want more than its static share 100", r[0])
	}

	u, err := nodes[1].agent.TenantUsage(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Quotas) != 1 || u.Quotas[0].Quota != "publish_rate" || u.Quotas[0].Limit != 200 ||
		len(u.Quotas[0].Regions) != 1 || !u.Quotas[0].Regions[0].Reachable {
		t.Fatalf("usage %+v, want publish_rate limit 200 in reachable region r", u)
	}
	if use := u.Quotas[0].Use; use < 140 || use > 260 {
		t.Errorf("usage says %.1f msgs/s admitted, want about 200", use)
	}
	if u, err := nodes[0].agent.TenantUsage(context.Background(), "nobody"); err != nil || u.Tenant != "nobody" || len(u.Quotas) != 0 {
		t.Errorf("usage of a tenant without quotas: %+v, %v; want no quotas, no error", u, err)
	}

	// A live change reaches the coordinator within about an interval.
	setLimits(nodes, limit(300))
	took = testutil.Eventually(t, "the coordinator applies the new limit", 5*time.Second, func() bool {
		for _, u := range lead.coord.Usage() {
			if u.Tenant == "acme" && len(u.Quotas) == 1 && u.Quotas[0].Limit == 300 {
				return true
			}
		}
		return false
	})
	t.Logf("new limit applied after %v", took)
	setLimits(nodes, limit(200))

	// Failover.
	old := lead.coord.Term()
	var survivor *node
	var sp *publisher
	for i, nd := range nodes {
		if nd != lead {
			survivor, sp = nd, pubs[i]
		}
	}
	lead.kill(t)
	next := leaderOf(t, nodes, old)
	if next != survivor {
		t.Fatalf("leader %s after the kill, want the survivor %s", next.id, survivor.id)
	}
	// The dead term's leases have lapsed by now: the election lease
	// (2 s) outlasts the quota leases (1 s).
	got := rates([]*publisher{sp}, 1500*time.Millisecond)[0]
	t.Logf("survivor %s admits %.1f msgs/s under term %d", survivor.id, got, next.coord.Term())
	if got < 85 || got > 115 {
		t.Errorf("survivor admitted %.1f msgs/s, want its static share 100 ± 15%%", got)
	}
}

// Two regions of one broker each, a 200 msgs/s limit offered 300/s in
// r1 and 20/s in r2: the coordinators exchange demand over the WAN and
// r2 lends r1 most of its static share; the mesh stays within the limit.
func TestRegionsSplitByDemandOverTheWAN(t *testing.T) {
	store := metatest.OpenStore(t)
	regions := []string{"r1", "r2"}
	var srv [2]atomic.Pointer[broker.Server] // r1's, r2's
	wan := func(region, subject string, data []byte) error {
		dst := srv[0].Load()
		if region == "r2" {
			dst = srv[1].Load()
		}
		if dst == nil {
			return errors.New("not started")
		}
		// What a link's publish on a remote broker does: it reaches
		// that region's internal subscriptions.
		dst.PublishInternal([]byte(subject), nil, nil, data)
		return nil
	}
	// Each region campaigns in its own etcd prefix.
	r1 := startRegion(t, store, "r1", regions, 1, wan)
	srv[0].Store(r1[0].srv)
	r2 := startRegion(t, metatest.OpenStore(t), "r2", regions, 1, wan)
	srv[1].Store(r2[0].srv)
	all := append(append([]*node(nil), r1...), r2...)
	setLimits(all, limit(200))
	leaderOf(t, r1, 0)
	leaderOf(t, r2, 0)

	pubs := []*publisher{offer(r1[0].agent, "acme", 300), offer(r2[0].agent, "acme", 20)}
	defer func() {
		for _, p := range pubs {
			p.close()
		}
	}()
	took := testutil.Eventually(t, "r2 lends to r1", 10*time.Second, func() bool {
		a, _ := r1[0].agent.Allowance("acme", quota.PublishRate)
		return a > 150
	})
	t.Logf("WAN lease after %v", took)
	r := rates(pubs, 2*time.Second)
	t.Logf("admitted r1 %.1f, r2 %.1f msgs/s of a 200 msgs/s limit", r[0], r[1])
	if r[0] < 150 {
		t.Errorf("r1 admitted %.1f msgs/s, want well above its static share 100", r[0])
	}
	if r[0]+r[1] > 230 {
		t.Errorf("mesh admitted %.1f msgs/s, want at most 200 + 15%%", r[0]+r[1])
	}
	u, err := r2[0].agent.TenantUsage(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, ru := range u.Quotas[0].Regions {
		if !ru.Reachable {
			t.Errorf("usage from r2: region %s unreachable: %+v", ru.Region, u)
		}
	}
}

// Two regions of two brokers, one connection of acme open in each before
// it gets a connections quota of 4: clients of r1 (trying both brokers,
// as a NATS client tries its URLs) get the two connections left, r2's
// unused room moving to r1 over the WAN; the next is refused naming the
// quota; once one closes, a new one is admitted.
func TestConnectionsMoveBetweenRegions(t *testing.T) {
	regions := []string{"r1", "r2"}
	var srv [2]atomic.Pointer[broker.Server]
	wan := func(region, subject string, data []byte) error {
		dst := srv[0].Load()
		if region == "r2" {
			dst = srv[1].Load()
		}
		if dst == nil {
			return errors.New("not started")
		}
		dst.PublishInternal([]byte(subject), nil, nil, data)
		return nil
	}
	r1 := startRegion(t, metatest.OpenStore(t), "r1", regions, 2, wan)
	srv[0].Store(r1[0].srv)
	r2 := startRegion(t, metatest.OpenStore(t), "r2", regions, 2, wan)
	srv[1].Store(r2[0].srv)
	leaderOf(t, r1, 0)
	leaderOf(t, r2, 0)
	for _, nd := range []*node{r1[0], r2[0]} {
		if err := nd.agent.Connect("acme"); err != nil {
			t.Fatalf("a connection before the quota: %v", err)
		}
	}
	var l quota.Limits
	l.Mesh[quota.Connections] = 4
	setLimits(append(append([]*node(nil), r1...), r2...), map[string]quota.Limits{"acme": l})
	var held []*node
	connect := func() error {
		var err error
		for _, nd := range r1 {
			if err = nd.agent.Connect("acme"); err == nil {
				held = append(held, nd)
				return nil
			}
		}
		return err
	}
	took := testutil.Eventually(t, "two more connections in r1", 10*time.Second, func() bool {
		_ = connect()
		return len(held) == 2
	})
	t.Logf("two more connections after %v", took)
	for range 5 {
		err := connect()
		var rf *quota.Refusal
		if !errors.As(err, &rf) || rf.Kind != quota.Connections || rf.Limit != 4 {
			t.Fatalf("a fifth connection: %v, want a refusal of the connections quota of 4", err)
		}
		time.Sleep(testInterval)
	}
	held[0].agent.Disconnect("acme")
	held = held[1:]
	testutil.Eventually(t, "a connection once one closed", 5*time.Second, func() bool {
		return connect() == nil
	})
}
