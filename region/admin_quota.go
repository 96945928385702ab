package region

import (
	"context"
	"errors"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/tenancy/quota"
)

// This file is the region side of GET /admin/v1/tenants/{t}/usage:
// admin.UsageBackend over the region's quota coordinator.

// quotaUsage is admin.UsageBackend for node n: the usage as n's quota
// driver gets it from the region's coordinator (Node.TenantUsage).
type quotaUsage struct{ n *Node }

func (a quotaUsage) TenantUsage(ctx context.Context, tenant string) (admin.Usage, error) {
	u, err := a.n.TenantUsage(ctx, tenant)
	if err != nil {
		return admin.Usage{}, usageError(a.n.cfg.Region, err)
	}
	return usageOf(u), nil
}

// usageError maps the coordinator's errors to the catalog: an
// *admin.Error as it is, a deadline to timeout, anything else to
// quota_unavailable with its text.
func usageError(region string, err error) error {
	var ae *admin.Error
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, context.DeadlineExceeded):
		return admin.Errorf(admin.CodeTimeout, "", "region %s: the quota coordinator did not answer in time: %v", region, err)
	}
	return admin.Errorf(admin.CodeQuotaUnavailable, "", "region %s: no quota coordinator answered: %v", region, err)
}

// usageOf is u as admin's wire type (the same JSON).
func usageOf(u quota.Usage) admin.Usage {
	out := admin.Usage{Tenant: u.Tenant, Quotas: make([]admin.QuotaUsage, len(u.Quotas))}
	for i, q := range u.Quotas {
		aq := admin.QuotaUsage{Quota: q.Quota, Unit: q.Unit, Limit: q.Limit, Use: q.Use, Regions: make([]admin.RegionUsage, len(q.Regions))}
		for j, r := range q.Regions {
			aq.Regions[j] = admin.RegionUsage{Region: r.Region, Use: r.Use, Share: r.Share, Cap: r.Cap, Reachable: r.Reachable}
		}
		out.Quotas[i] = aq
	}
	return out
}
