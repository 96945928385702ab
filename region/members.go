package region

import (
	"context"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/gossip"
)

// Members returns the node's current view of its pools (GET
// /admin/v1/members).
func (n *Node) Members() admin.MembersView {
	v := admin.MembersView{Node: n.name, Region: n.cfg.Region, Role: n.spec.Role, LAN: adminMembers(n.lan.Members()), PID: os.Getpid()}
	if n.wan != nil {
		v.WAN = adminMembers(n.wan.Members())
	}
	return v
}

func adminMembers(ms []gossip.Member) []admin.Member {
	out := make([]admin.Member, len(ms))
	for i, m := range ms {
		out[i] = admin.Member{Name: m.Name, Addr: m.Addr, State: m.State, Tags: m.Tags}
	}
	return out
}

// registerMetrics exports strata.gossip.members{pool, state}: how many
// members this node sees in each state.
func registerMetrics(n *Node) error {
	m := n.tel.Meter("github.com/stratamesh/strata/region")
	g, err := m.Int64ObservableGauge("strata.gossip.members",
		metric.WithDescription("Serf pool members seen by this node, by pool and state"))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		observePool(o, g, "lan", n.lan)
		if n.wan != nil {
			observePool(o, g, "wan", n.wan)
		}
		return nil
	}, g)
	return err
}

func observePool(o metric.Observer, g metric.Int64ObservableGauge, pool string, p *gossip.Pool) {
	counts := map[string]int64{gossip.StateAlive: 0, gossip.StateSuspect: 0, gossip.StateFailed: 0, gossip.StateLeft: 0}
	for _, m := range p.Members() {
		counts[m.State]++
	}
	for state, c := range counts {
		o.ObserveInt64(g, c, metric.WithAttributes(attribute.String("pool", pool), attribute.String("state", state)))
	}
}
