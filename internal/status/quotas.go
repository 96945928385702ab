package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/gossip"
	"github.com/stratamesh/strata/internal/meshfile"
)

// NearFraction is when `strata status` calls a tenant near a limit: its
// mesh-wide use of some quota is at least 80% of the limit.
const NearFraction = 0.8

// Near is one quota of one tenant whose mesh-wide use is at least
// NearFraction of its limit (Unit as in admin.QuotaUsage).
type Near struct {
	Tenant string  `json:"tenant"`
	Quota  string  `json:"quota"`
	Unit   string  `json:"unit"`
	Limit  float64 `json:"limit"`
	Use    float64 `json:"use"`
}

// Quotas is what `strata status` says of the tenants' quotas: the
// quotas near their limit (tenants in name order, quotas in the API's
// order) and the tenants whose usage could not be read, with why.
type Quotas struct {
	Near    []Near            `json:"near_limit,omitempty"`
	Unknown map[string]string `json:"unknown,omitempty"`
}

// NearLimits lists the quotas of u whose mesh-wide use is at least frac
// of their limit, in u's order.
func NearLimits(u admin.Usage, frac float64) []Near {
	var out []Near
	for _, q := range u.Quotas {
		if q.Limit > 0 && q.Use >= frac*q.Limit {
			out = append(out, Near{Tenant: u.Tenant, Quota: q.Quota, Unit: q.Unit, Limit: q.Limit, Use: q.Use})
		}
	}
	return out
}

// hasQuotas reports whether t has any mesh-wide limit.
func hasQuotas(t admin.Tenant) bool {
	q := t.Quotas
	return q.PublishRate > 0 || q.PublishBytes > 0 || q.Storage > 0 || q.Topics > 0 || q.Connections > 0 || q.Consumers > 0
}

// brokerAdmins is the admin URLs of f's brokers, those alive first.
func brokerAdmins(f *meshfile.File) []string {
	var alive, rest []string
	for _, r := range f.Regions {
		for _, n := range r.Nodes {
			switch {
			case n.Role != "broker" || n.Admin == "":
			case n.State == gossip.StateAlive:
				alive = append(alive, n.Admin)
			default:
				rest = append(rest, n.Admin)
			}
		}
	}
	return append(alive, rest...)
}

// usageConcurrency bounds the usage requests in flight at once.
const usageConcurrency = 4

// CollectQuotas asks the first of f's brokers that answers for the
// mesh's tenants, then for the usage of each tenant with quotas (one
// request per tenant, a few at a time, to the broker that answered:
// tenants are mesh-wide, and each region's coordinator sees every
// region's use). A tenant whose usage cannot be read is listed in
// Unknown; err is set only when no broker answered the tenant list.
func CollectQuotas(ctx context.Context, c *admin.Client, f *meshfile.File) (Quotas, error) {
	var out Quotas
	urls := brokerAdmins(f)
	if len(urls) == 0 {
		return out, errors.New("status: no broker with an admin URL")
	}
	var base string
	var list admin.TenantList
	var err error
	for _, u := range urls {
		if err = c.Get(ctx, u, "/admin/v1/tenants", &list); err == nil {
			base = u
			break
		}
		var apiErr *admin.APIError
		if errors.As(err, &apiErr) {
			return out, err
		}
	}
	if base == "" {
		return out, err
	}
	var tenants []string
	for _, t := range list.Tenants {
		if hasQuotas(t) {
			tenants = append(tenants, t.Name)
		}
	}
	usages := make([]admin.Usage, len(tenants))
	errs := make([]error, len(tenants))
	sem := make(chan struct{}, usageConcurrency)
	var wg sync.WaitGroup
	for i, t := range tenants {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			usages[i], errs[i] = c.TenantUsage(ctx, base, t)
		}()
	}
	wg.Wait()
	for i, t := range tenants {
		if errs[i] != nil {
			if out.Unknown == nil {
				out.Unknown = map[string]string{}
			}
			out.Unknown[t] = errs[i].Error()
			continue
		}
		usages[i].Tenant = t
		out.Near = append(out.Near, NearLimits(usages[i], NearFraction)...)
	}
	return out, nil
}

// PrintQuotas writes the tenants near a limit, one line each, and the
// tenants whose usage is unknown; nothing when there are neither.
func PrintQuotas(w io.Writer, q Quotas) {
	if len(q.Near) == 0 && len(q.Unknown) == 0 {
		return
	}
	fmt.Fprintln(w)
	if len(q.Near) > 0 {
		fmt.Fprintf(w, "tenants near a limit (%.0f%% or more of a mesh-wide quota):\n", NearFraction*100)
		for _, n := range q.Near {
			fmt.Fprintf(w, "  %s: %s %s of %s (%s)\n", n.Tenant, n.Quota, QuotaValue(n.Unit, n.Use), QuotaValue(n.Unit, n.Limit), Percent(n.Use, n.Limit))
		}
	}
	if len(q.Unknown) > 0 {
		names := make([]string, 0, len(q.Unknown))
		for t := range q.Unknown {
			names = append(names, t)
		}
		sort.Strings(names)
		fmt.Fprintf(w, "quota usage unknown for %s: %s\n", strings.Join(names, ", "), q.Unknown[names[0]])
	}
}

// QuotaValue prints v in unit as `strata admin tenants usage` and
// `strata status` do: rates per second ("812/s", "1.5 MiB/s"), bytes
// ("1.0 GiB"), counts ("37"); fractions are rounded to whole units.
func QuotaValue(unit string, v float64) string {
	n := int64(math.Round(v))
	switch unit {
	case "msgs/s":
		return strconv.FormatInt(n, 10) + "/s"
	case "bytes/s":
		return BytesText(n) + "/s"
	case "bytes":
		return BytesText(n)
	}
	return strconv.FormatInt(n, 10)
}

// Percent is use as a whole percentage of limit ("81%"; "-" without a
// limit).
func Percent(use, limit float64) string {
	if limit <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", math.Floor(100*use/limit))
}
