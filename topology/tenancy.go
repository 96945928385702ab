package topology

import (
	"slices"

	"github.com/stratamesh/strata/tenancy"
)

// TenancyConfig is the file's tenants and namespaces as tenancy's model:
// the desired state that seeds a new mesh and that `strata apply`
// reconciles. m must have its defaults applied (Parse does).
func (m *Mesh) TenancyConfig() tenancy.Config {
	var c tenancy.Config
	regions := make([]string, len(m.Regions))
	for i := range m.Regions {
		regions[i] = m.Regions[i].Name
	}
	for _, t := range m.Tenants {
		c.Tenants = append(c.Tenants, tenancy.Tenant{
			Name: t.Name, Admins: slices.Clone(t.Admins),
			Quotas: tenancy.Quotas{
				PublishRate: int64(t.Quotas.PublishRate), PublishBytes: int64(t.Quotas.PublishBytes),
				Storage: int64(t.Quotas.Storage), Topics: t.Quotas.Topics, Connections: t.Quotas.Connections,
				Consumers: t.Quotas.Consumers, Regions: t.Quotas.regionCaps(),
			},
		})
		for i := range t.Namespaces {
			c.Namespaces = append(c.Namespaces, tenancy.Namespace{Tenant: t.Name, Name: t.Namespaces[i].Name,
				Policies: t.Namespaces[i].policies(regions)})
		}
	}
	return c
}

// regionCaps is q's per-region caps as tenancy's (nil when none).
func (q Quotas) regionCaps() map[string]tenancy.RegionQuotas {
	if len(q.Regions) == 0 {
		return nil
	}
	out := make(map[string]tenancy.RegionQuotas, len(q.Regions))
	for r, c := range q.Regions {
		out[r] = tenancy.RegionQuotas{PublishRate: int64(c.PublishRate), PublishBytes: int64(c.PublishBytes)}
	}
	return out
}

// policies is ns as tenancy's Policies.
func (ns *Namespace) policies(regions []string) tenancy.Policies {
	p := tenancy.DefaultPolicies(regions)
	if ns.Replication != nil {
		p.Replication = slices.Clone(ns.Replication)
	}
	if ns.Retention.Mode != "" {
		p.Retention.Mode = ns.Retention.Mode
	}
	p.Retention.Time = tenancy.Duration(ns.Retention.Time)
	p.Retention.Size = int64(ns.Retention.Size)
	if ns.Retention.Messages > 0 {
		p.Retention.Messages = ns.Retention.Messages
	}
	if b := ns.BacklogQuota; b != nil {
		p.BacklogQuota = &tenancy.BacklogQuota{Size: int64(b.Size), Time: tenancy.Duration(b.Time), Policy: b.Policy}
	}
	if o := ns.Offload; o != nil {
		p.Offload = &tenancy.Offload{Threshold: int64(o.Threshold), DeletionLag: tenancy.Duration(o.DeletionLag)}
	}
	p.MessageTTL = tenancy.Duration(ns.MessageTTL)
	switch {
	case ns.Dedup != nil && !*ns.Dedup:
		p.DedupWindow = 0
	case ns.DedupWindow > 0:
		p.DedupWindow = tenancy.Duration(ns.DedupWindow)
	}
	if ns.Bundles > 0 {
		p.Bundles = ns.Bundles
	}
	if ns.AutoCreateTopics != nil {
		p.AutoCreateTopics = *ns.AutoCreateTopics
	}
	p.MaxConsumers = ns.MaxConsumers
	p.SubscriptionExpiry = tenancy.Duration(ns.SubscriptionExpiry)
	return p
}
