package quota

import (
	"sort"
	"time"
)

// Usage is one tenant's quotas as a coordinator sees them: per quota,
// the mesh-wide limit and use, and each region's use and share (GET
// /admin/v1/tenants/{t}/usage).
type Usage struct {
	Tenant string       `json:"tenant"`
	Quotas []QuotaUsage `json:"quotas"`
}

// QuotaUsage is one quota of a tenant. Rates are units/s averaged over
// about the last second; counts are current values.
type QuotaUsage struct {
	Quota   string        `json:"quota"` // "publish_rate", …
	Unit    string        `json:"unit"`
	Limit   float64       `json:"limit"`
	Use     float64       `json:"use"`
	Regions []RegionUsage `json:"regions"`
}

// RegionUsage is one region's part of a quota: its use, its share (rates:
// the allowance its brokers hold now; counts: its static share), its
// per-region cap (0: none) and whether it is reachable from the
// coordinator that answered.
type RegionUsage struct {
	Region    string  `json:"region"`
	Use       float64 `json:"use"`
	Share     float64 `json:"share"`
	Cap       float64 `json:"cap,omitempty"`
	Reachable bool    `json:"reachable"`
}

// Usage is tenant's usage at now; ok false when tenant has no quotas.
func (c *Coordinator) Usage(tenant string, now time.Time) (Usage, bool) {
	l, ok := c.tenants[tenant]
	if !ok {
		return Usage{}, false
	}
	u := Usage{Tenant: tenant}
	r := c.round(now)
	for k := range NumKinds {
		if !l.Limited(k) {
			continue
		}
		v := c.view(r, tenant, l, k)
		q := QuotaUsage{Quota: k.String(), Unit: k.Unit(), Limit: l.Mesh[k]}
		for i, reg := range v.names {
			ru := RegionUsage{Region: reg, Use: v.rate[i], Cap: v.caps[i], Share: v.static[i]}
			if i == v.me {
				ru.Reachable = true
				if k.Rate() {
					var a float64
					for _, b := range r.fresh {
						if e := b.last[tenant]; e != nil {
							a += e.Allowance[k]
						}
					}
					ru.Share = a
				}
			} else if p := r.active[reg]; p != nil && c.fresh(p, now) {
				ru.Reachable = true
				if e := p.last[tenant]; e != nil && k.Rate() {
					ru.Share = e.Allowance[k]
				}
			}
			q.Use += ru.Use
			q.Regions = append(q.Regions, ru)
		}
		u.Quotas = append(u.Quotas, q)
	}
	return u, true
}

// Tenants lists the tenants with quotas, sorted.
func (c *Coordinator) Tenants() []string {
	out := make([]string, 0, len(c.tenants))
	for t := range c.tenants {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
