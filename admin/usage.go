package admin

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Usage answers GET /admin/v1/tenants/{t}/usage: a tenant's quotas as
// the quota coordinator of the answering broker's region sees them (the
// JSON of tenancy/quota's Usage, field for field; region converts).
// Quotas lists only the quotas with a limit, in the order publish_rate,
// publish_bytes, storage, topics, connections, consumers; a tenant
// without quotas has none ([]).
type Usage struct {
	Tenant string       `json:"tenant"`
	Quotas []QuotaUsage `json:"quotas"`
}

// QuotaUsage is one quota of a tenant: its name ("publish_rate", as in
// the topology), unit ("msgs/s", "bytes/s", "bytes", "topics",
// "connections", "consumers"), the mesh-wide limit, the mesh-wide use
// (the sum of the regions'), and each region's part. Rates are units/s
// averaged over about the last second, counted at the origin region
// only; storage counts every region's copy; counts are current values.
type QuotaUsage struct {
	Quota   string        `json:"quota"`
	Unit    string        `json:"unit"`
	Limit   float64       `json:"limit"`
	Use     float64       `json:"use"`
	Regions []RegionUsage `json:"regions"`
}

// RegionUsage is one region's part of a quota: its use; its share (rates:
// the allowance its brokers hold now; counts and storage: its static
// share, limit ÷ regions, under its cap); its per-region cap (0, omitted:
// none); and whether the answering coordinator hears from it now (an
// unreachable region's use is its last report).
type RegionUsage struct {
	Region    string  `json:"region"`
	Use       float64 `json:"use"`
	Share     float64 `json:"share"`
	Cap       float64 `json:"cap,omitempty"`
	Reachable bool    `json:"reachable"`
}

// UsageTimeout bounds one usage request to the region's quota
// coordinator.
const UsageTimeout = 5 * time.Second

// UsageBackend answers a tenant's quota usage from the region's quota
// coordinator (which may be another broker of the region). The route
// has checked that the tenant exists. A tenant without quotas answers a
// Usage with no quotas. Errors are *Error: quota_unavailable when no
// coordinator answers (none elected yet, or none on this node), timeout
// when it answers too late.
type UsageBackend interface {
	TenantUsage(ctx context.Context, tenant string) (Usage, error)
}

func (b Backends) usageRoutes() []Route {
	tb, ub := b.Tenancy, b.Usage
	return []Route{
		{http.MethodGet, "/admin/v1/tenants/{t}/usage", TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			t, ok := tenantParam(w, r, tb)
			if !ok {
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), UsageTimeout)
			defer cancel()
			u, err := ub.TenantUsage(ctx, t.Name)
			if err != nil {
				WriteError(w, err)
				return
			}
			u.Tenant = t.Name
			u.Quotas = nonNil(u.Quotas)
			for i := range u.Quotas {
				u.Quotas[i].Regions = nonNil(u.Quotas[i].Regions)
			}
			WriteJSON(w, http.StatusOK, u)
		}},
	}
}

// TenantUsage asks base for tenant's quota usage (GET
// /admin/v1/tenants/{t}/usage).
func (c *Client) TenantUsage(ctx context.Context, base, tenant string) (Usage, error) {
	var u Usage
	err := c.Get(ctx, base, "/admin/v1/tenants/"+url.PathEscape(tenant)+"/usage", &u)
	return u, err
}
