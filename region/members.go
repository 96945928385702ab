package region

import (
	"context"
	"net/http"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stratamesh/strata/internal/adminhttp"
	"github.com/stratamesh/strata/internal/gossip"
)

// MembersView is the body of GET /admin/v1/members: this node's view of
// its pools.
type MembersView struct {
	Node   string          `json:"node"` // SerfName(region, id)
	Region string          `json:"region"`
	Role   string          `json:"role"`
	LAN    []gossip.Member `json:"lan"`
	WAN    []gossip.Member `json:"wan,omitempty"` // brokers only
	// PID is the node's process id, so that `strata status` shows the
	// process that answers (also one restarted by hand).
	PID int `json:"pid,omitempty"`
}

// Members returns the node's current view of its pools.
func (n *Node) Members() MembersView {
	v := MembersView{Node: n.name, Region: n.cfg.Region, Role: n.spec.Role, LAN: n.lan.Members(), PID: os.Getpid()}
	if n.wan != nil {
		v.WAN = n.wan.Members()
	}
	return v
}

func (n *Node) membersHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		adminhttp.WriteJSON(w, http.StatusOK, n.Members())
	})
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
