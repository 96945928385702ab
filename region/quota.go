package region

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/tenancy/quota"
	"github.com/stratamesh/strata/tenancy/quota/quotanet"
	"github.com/stratamesh/strata/topology"
)

// quotas is a broker's share of the mesh-wide tenant quotas
// (ARCHITECTURE §5, issue 25): its Agent, the gate the JetStream layer
// consults, and its candidacy for the region's quota coordinator. The
// tenants' limits come from the region's configuration (tenancy.Quotas)
// and follow its changes.
type quotas struct {
	agent *quotanet.Agent
	coord *quotanet.Coordinator
}

// newQuotas makes the broker's quota drivers (not started) and feeds
// them the tenants' quotas, now and on every change of a tenant record.
// It runs once the control plane is open and before the JetStream layer
// is built (which takes the Agent as its gate).
func (n *Node) newQuotas() error {
	regions := make([]string, len(n.cfg.Mesh.Regions))
	for i, r := range n.cfg.Mesh.Regions {
		regions[i] = r.Name
	}
	cfg := quotanet.Config{
		Region: n.cfg.Region, Regions: regions, BrokerID: n.cfg.ID,
		Brokers: len(n.region.NodesOf(topology.RoleBroker)),
		Store:   n.store, WAN: n.quotaWAN, Clock: quotanet.NewClock(),
		Logger: n.logger,
	}
	agent, err := quotanet.NewAgent(cfg)
	if err != nil {
		return err
	}
	coord, err := quotanet.NewCoordinator(cfg)
	if err != nil {
		return err
	}
	n.quota = &quotas{agent: agent, coord: coord}
	n.applyQuotas()
	n.cp.store.OnChange(func(changed []tenancy.Record) {
		for _, r := range changed {
			if r.Kind == tenancy.KindTenant {
				n.applyQuotas()
				return
			}
		}
	})
	return nil
}

// applyQuotas gives the drivers every tenant's limits from the region's
// configuration, with its per-region caps of the publish rates.
func (n *Node) applyQuotas() {
	limits := map[string]quota.Limits{}
	n.cp.store.View(func(s *tenancy.State) {
		for _, t := range s.Tenants() {
			if l, ok := quotaLimits(t.Quotas); ok {
				limits[t.Name] = l
			}
		}
	})
	n.quota.agent.SetTenants(limits)
	n.quota.coord.SetTenants(limits)
}

// quotaLimits is a tenant's quotas as the quota core takes them; ok
// false when none is set.
func quotaLimits(q tenancy.Quotas) (quota.Limits, bool) {
	var l quota.Limits
	l.Mesh[quota.PublishRate] = float64(q.PublishRate)
	l.Mesh[quota.PublishBytes] = float64(q.PublishBytes)
	l.Mesh[quota.Storage] = float64(q.Storage)
	l.Mesh[quota.Topics] = float64(q.Topics)
	l.Mesh[quota.Connections] = float64(q.Connections)
	l.Mesh[quota.Consumers] = float64(q.Consumers)
	for r, c := range q.Regions {
		if c.PublishRate <= 0 && c.PublishBytes <= 0 {
			continue
		}
		if l.Regions == nil {
			l.Regions = map[string][quota.NumKinds]float64{}
		}
		var caps [quota.NumKinds]float64
		caps[quota.PublishRate], caps[quota.PublishBytes] = float64(c.PublishRate), float64(c.PublishBytes)
		l.Regions[r] = caps
	}
	for k := range quota.NumKinds {
		if l.Limited(k) {
			return l, true
		}
	}
	return quota.Limits{}, false
}

// quotaWAN publishes a coordinator's message to another region's
// brokers over the control plane's link to that region (the mesh's
// system user); it fails at once while the link is down.
func (n *Node) quotaWAN(region, subject string, data []byte) error {
	l, err := n.cp.linkTo(region)
	if err != nil {
		return err
	}
	return l.Publish(subject, "", data)
}

// startQuotas starts the drivers on the running broker, once the links
// to the other regions are made (cp.startSync).
func (n *Node) startQuotas() error {
	if n.quota == nil {
		return nil
	}
	if err := n.quota.agent.Start(n.broker); err != nil {
		return err
	}
	return n.quota.coord.Start(n.broker)
}

// close gives up the coordinator candidacy (another broker leads at
// once) and hands the broker's connection counts over; Node.Stop calls
// it before the broker closes its connections.
func (q *quotas) close(ctx context.Context) error {
	if q == nil {
		return nil
	}
	return errors.Join(q.coord.Close(ctx), q.agent.Close(ctx))
}

// TenantUsage is tenant's quota usage as the region's coordinator sees
// it: per quota, the mesh-wide limit and use and each region's use and
// share (GET /admin/v1/tenants/{t}/usage). A tenant without quotas has
// none listed. Errors: this node is not a broker; quotanet.ErrNoCoordinator
// when the region has no coordinator yet or it did not answer in time;
// an invalid tenant name.
func (n *Node) TenantUsage(ctx context.Context, tenant string) (quota.Usage, error) {
	if n.quota == nil {
		return quota.Usage{}, fmt.Errorf("region: node %s is a %s, not a broker: ask a broker for tenant usage", n.name, n.spec.Role)
	}
	return n.quota.agent.TenantUsage(ctx, tenant)
}

// registerQuotaMetrics exports the tenants' quotas: on every broker,
// strata.quota.allowance (its share of a rate quota), .refusals and
// .holds; on the broker that coordinates the region, the mesh-wide
// strata.quota.limit and .use and each region's strata.quota.region.use
// and .share. Labels: tenant, quota (and region).
func registerQuotaMetrics(n *Node) error {
	if n.quota == nil {
		return nil
	}
	m := n.tel.Meter("github.com/stratamesh/strata/tenancy/quota")
	allowance, err := m.Float64ObservableGauge("strata.quota.allowance",
		metric.WithDescription("this broker's allowance of a tenant's rate quota, in the quota's unit (msgs/s, bytes/s)"))
	if err != nil {
		return err
	}
	refusals, err := m.Int64ObservableCounter("strata.quota.refusals",
		metric.WithDescription("publishes, connections, topics, consumers or stores this broker refused over a tenant's quota"))
	if err != nil {
		return err
	}
	holds, err := m.Int64ObservableCounter("strata.quota.holds",
		metric.WithDescription("publishes this broker held back under a tenant's quota"))
	if err != nil {
		return err
	}
	limit, err := m.Float64ObservableGauge("strata.quota.limit",
		metric.WithDescription("a tenant's mesh-wide limit (reported by the region's quota coordinator)"))
	if err != nil {
		return err
	}
	use, err := m.Float64ObservableGauge("strata.quota.use",
		metric.WithDescription("a tenant's mesh-wide use of a quota, rates over about the last second (reported by the region's quota coordinator)"))
	if err != nil {
		return err
	}
	regionUse, err := m.Float64ObservableGauge("strata.quota.region.use",
		metric.WithDescription("a region's use of a tenant's quota as the region's quota coordinator knows it"))
	if err != nil {
		return err
	}
	share, err := m.Float64ObservableGauge("strata.quota.region.share",
		metric.WithDescription("a region's share of a tenant's quota: rates, the allowance its brokers hold; counts, its static share"))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, s := range n.quota.agent.Stats() {
			attrs := metric.WithAttributes(attribute.String("tenant", s.Tenant), attribute.String("quota", s.Kind.String()))
			if s.Kind.Rate() {
				o.ObserveFloat64(allowance, s.Allowance, attrs)
			}
			o.ObserveInt64(refusals, int64(s.Refusals), attrs)
			o.ObserveInt64(holds, int64(s.Holds), attrs)
		}
		for _, u := range n.quota.coord.Usage() {
			for _, q := range u.Quotas {
				attrs := metric.WithAttributes(attribute.String("tenant", u.Tenant), attribute.String("quota", q.Quota))
				o.ObserveFloat64(limit, q.Limit, attrs)
				o.ObserveFloat64(use, q.Use, attrs)
				for _, r := range q.Regions {
					ra := metric.WithAttributes(attribute.String("tenant", u.Tenant), attribute.String("quota", q.Quota), attribute.String("region", r.Region))
					o.ObserveFloat64(regionUse, r.Use, ra)
					o.ObserveFloat64(share, r.Share, ra)
				}
			}
		}
		return nil
	}, allowance, refusals, holds, limit, use, regionUse, share)
	return err
}
