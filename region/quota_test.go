package region

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/gossip"
	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/tenancy/quota"
	"github.com/stratamesh/strata/topology"
)

const quotaRegion = `mesh: unit
regions:
  - name: r1
    brokers: 1
    bookies: 1
    ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}
tenants:
  - name: acme
    quotas: {publish_rate: 200/s, connections: 10}
`

// A broker node takes its tenants' quotas from the topology, elects
// itself the region's quota coordinator, answers usage, refuses a
// publish over its allowance, follows a live change of the tenant's
// quotas, and exports the quota metrics.
func TestBrokerNodeQuotas(t *testing.T) {
	m := parse(t, quotaRegion)
	base := NodeConfig{Mesh: m, Region: "r1", DataDir: t.TempDir(), Gossip: gossip.ProfileLoopback, RegistrationTTL: 2 * time.Second}
	mc := base
	mc.ID, mc.Role = "meta", topology.RoleMeta
	me := startNode(t, mc).Endpoints()
	bc := base
	bc.ID, bc.EtcdEndpoints, bc.LANJoin = "b1", []string{me.Etcd}, []string{me.SerfLAN}
	b := startNode(t, bc)

	if _, err := (&Node{name: "r1.meta", spec: topology.Node{Role: topology.RoleMeta}}).TenantUsage(context.Background(), "acme"); err == nil ||
		!strings.Contains(err.Error(), "not a broker") {
		t.Errorf("usage from a meta node: %v", err)
	}
	var u quota.Usage
	took := testutil.Eventually(t, "usage from the region's coordinator", 20*time.Second, func() bool {
		var err error
		u, err = b.TenantUsage(context.Background(), "acme")
		return err == nil
	})
	t.Logf("coordinator answered after %v: %+v", took, u)
	limits := map[string]float64{}
	for _, q := range u.Quotas {
		limits[q.Quota] = q.Limit
	}
	if len(limits) != 2 || limits["publish_rate"] != 200 || limits["connections"] != 10 {
		t.Fatalf("usage limits %v, want publish_rate 200 and connections 10", limits)
	}
	// The whole region's 200 msgs/s is this broker's: a burst of 1000
	// publishes at once is mostly refused, naming the quota.
	var refused error
	admitted := 0
	for range 1000 {
		if err := b.quota.agent.AdmitPublish("acme", 10); err != nil {
			refused = err
		} else {
			admitted++
		}
	}
	if refused == nil || admitted > 100 || !strings.Contains(refused.Error(), `tenant "acme" is over its publish_rate quota: limit 200 msgs/s`) {
		t.Errorf("burst of 1000: %d admitted, refusal %v", admitted, refused)
	}

	// A live change (as the admin API writes it) reaches the coordinator.
	tn, _ := b.cp.store.Tenant("acme")
	tn.Quotas = tenancy.Quotas{PublishRate: 500}
	if _, err := b.cp.store.PutTenant(context.Background(), tn); err != nil {
		t.Fatal(err)
	}
	took = testutil.Eventually(t, "the new quota in the usage", 10*time.Second, func() bool {
		u, err := b.TenantUsage(context.Background(), "acme")
		return err == nil && len(u.Quotas) == 1 && u.Quotas[0].Limit == 500
	})
	t.Logf("live change applied after %v", took)
	if a, ok := b.quota.agent.Allowance("acme", quota.PublishRate); !ok || a < 500 {
		t.Errorf("allowance %v (limited %v), want the whole 500 msgs/s", a, ok)
	}

	_, body := httpGet(t, b.Endpoints().Admin+"/metrics")
	for _, want := range []string{`strata_quota_allowance{`, `strata_quota_refusals_total{`, `strata_quota_limit{`, `quota="publish_rate"`, `tenant="acme"`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
