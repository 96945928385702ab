package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/status"
)

// This file is the quota side of `strata admin tenants`: the quota flags
// of create and update, and `tenants usage` (GET
// /admin/v1/tenants/{t}/usage).

// quotaFlags are the quota flags of `tenants create` and `tenants
// update`.
type quotaFlags struct {
	rate, byteRate, storage  string
	topics, conns, consumers int64
	regionRate, regionBytes  []string
}

// quotaFlagNames are the flags quotaFlags registers.
var quotaFlagNames = []string{"publish-rate", "publish-bytes", "storage", "topics", "connections", "consumers", "region-publish-rate", "region-publish-bytes"}

func (q *quotaFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&q.rate, "publish-rate", "", "messages per second, mesh-wide, e.g. 5000 or 5000/s (0: unlimited)")
	fs.StringVar(&q.byteRate, "publish-bytes", "", "bytes per second, mesh-wide, e.g. 10MiB/s (0: unlimited)")
	fs.StringVar(&q.storage, "storage", "", "bytes on bookies and tiers, every region's copy, e.g. 50GiB (0: unlimited)")
	fs.Int64Var(&q.topics, "topics", 0, "number of topics (0: unlimited)")
	fs.Int64Var(&q.conns, "connections", 0, "number of client connections (0: unlimited)")
	fs.Int64Var(&q.consumers, "consumers", 0, "number of consumers (0: unlimited)")
	fs.StringSliceVar(&q.regionRate, "region-publish-rate", nil, "cap of the publish rate in one region, REGION=RATE (e.g. us-east=600/s; REGION=0: no cap); repeat or comma-separate")
	fs.StringSliceVar(&q.regionBytes, "region-publish-bytes", nil, "cap of the publish bytes in one region, REGION=RATE (e.g. us-east=1MiB/s; REGION=0: no cap)")
}

// apply sets in dst the quotas whose flags fl says were given; a
// per-region cap of 0 drops that cap (and the region's entry once it
// caps nothing).
func (q *quotaFlags) apply(fl *pflag.FlagSet, dst *admin.Quotas) error {
	var err error
	if fl.Changed("publish-rate") {
		if dst.PublishRate, err = parseMsgRate("--publish-rate", q.rate); err != nil {
			return err
		}
	}
	if fl.Changed("publish-bytes") {
		if dst.PublishBytes, err = parseByteRate("--publish-bytes", q.byteRate); err != nil {
			return err
		}
	}
	if fl.Changed("storage") {
		if dst.Storage, err = parseSizeFlag("--storage", q.storage); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		name string
		v    int64
		dst  *int64
	}{{"topics", q.topics, &dst.Topics}, {"connections", q.conns, &dst.Connections}, {"consumers", q.consumers, &dst.Consumers}} {
		if fl.Changed(c.name) {
			if c.v < 0 {
				return fmt.Errorf("--%s: must be 0 (unlimited) or more, got %d", c.name, c.v)
			}
			*c.dst = c.v
		}
	}
	rates, err := parseRegionCaps("--region-publish-rate", q.regionRate, parseMsgRate)
	if err != nil {
		return err
	}
	bytes, err := parseRegionCaps("--region-publish-bytes", q.regionBytes, parseByteRate)
	if err != nil {
		return err
	}
	set := func(caps map[string]int64, field func(*admin.RegionQuotas) *int64) {
		for r, v := range caps {
			if dst.Regions == nil {
				dst.Regions = map[string]admin.RegionQuotas{}
			}
			rq := dst.Regions[r]
			*field(&rq) = v
			if rq == (admin.RegionQuotas{}) {
				delete(dst.Regions, r)
			} else {
				dst.Regions[r] = rq
			}
		}
	}
	set(rates, func(rq *admin.RegionQuotas) *int64 { return &rq.PublishRate })
	set(bytes, func(rq *admin.RegionQuotas) *int64 { return &rq.PublishBytes })
	if len(dst.Regions) == 0 {
		dst.Regions = nil
	}
	return nil
}

// parseRegionCaps parses the values of a per-region cap flag, each
// REGION=VALUE, VALUE parsed by parse ("0": no cap). Errors name the
// flag and the value: a missing "=", a bad region name, a region given
// twice, an empty or malformed value.
func parseRegionCaps(flag string, vals []string, parse func(flag, s string) (int64, error)) (map[string]int64, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	out := map[string]int64{}
	for _, v := range vals {
		region, val, ok := strings.Cut(v, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("%s %q: want REGION=VALUE, e.g. us-east=600/s", flag, v)
		case !validName(region):
			return nil, fmt.Errorf("%s %q: region name %q: use letters, digits, '-' and '_'", flag, v, region)
		case val == "":
			return nil, fmt.Errorf("%s %q: no value after '=' (0 drops the cap)", flag, v)
		}
		if _, dup := out[region]; dup {
			return nil, fmt.Errorf("%s: region %s given twice", flag, region)
		}
		n, err := parse(flag+" "+region, val)
		if err != nil {
			return nil, err
		}
		out[region] = n
	}
	return out, nil
}

// newTenantsUpdate is `strata admin tenants update T [flags]`.
func newTenantsUpdate(flags *adminFlags) *cobra.Command {
	var q quotaFlags
	var admins []string
	cmd := &cobra.Command{
		Use:   "update TENANT",
		Short: "Change a tenant's admins or quotas: only those the flags name, the others stay",
		Long: "Read the tenant (GET /admin/v1/tenants/{t}), change what the flags give, and write it back\n" +
			"whole (PUT): a change someone else makes in between is overwritten (last writer wins).\n" +
			"0 makes a quota unlimited; --region-publish-rate REGION=0 drops that region's cap. Per-region\n" +
			"caps must name regions of the mesh and stay within the mesh-wide limit.",
		Example: "  strata admin tenants update metered --publish-rate 2000/s\n" +
			"  strata admin tenants update metered --region-publish-rate us-east=600/s,eu-west=300/s",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTenantArg(args[0]); err != nil {
				return err
			}
			fl := cmd.Flags()
			changed := false
			for _, name := range append([]string{"admins"}, quotaFlagNames...) {
				changed = changed || fl.Changed(name)
			}
			if !changed {
				return errors.New("nothing to change: give --admins or a quota flag (see --help)")
			}
			c, err := flags.brokers()
			if err != nil {
				return err
			}
			var t admin.Tenant
			if err := c.do(cmd.Context(), false, func(ctx context.Context, base string) (err error) {
				t, err = c.client.Tenant(ctx, base, args[0])
				return err
			}); err != nil {
				return err
			}
			req := admin.TenantRequest{Admins: t.Admins, Quotas: t.Quotas}
			if fl.Changed("admins") {
				req.Admins = admins
			}
			if err := q.apply(fl, &req.Quotas); err != nil {
				return err
			}
			if err := c.do(cmd.Context(), true, func(ctx context.Context, base string) (err error) {
				t, _, err = c.client.PutTenant(ctx, base, args[0], req)
				return err
			}); err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, t)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "updated tenant %s\n", t.Name)
			return printTenant(cmd.OutOrStdout(), t)
		},
	}
	cmd.Flags().StringSliceVar(&admins, "admins", nil, "tenant-admin principals, comma-separated (replaces the list)")
	q.register(cmd.Flags())
	return cmd
}

// newTenantsUsage is `strata admin tenants usage T`.
func newTenantsUsage(flags *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "usage TENANT",
		Short: "Show a tenant's use of each quota: the limit, the mesh-wide use, and each region's use, share and cap",
		Long: "Ask a broker for the tenant's usage (GET /admin/v1/tenants/{t}/usage), as its region's quota\n" +
			"coordinator sees it. Rates are per second over about the last second, counted in the region a\n" +
			"message was published in; storage counts every region's copy. A region's share is, for the\n" +
			"rates, the allowance its brokers hold now, for the others its static share (limit / regions).\n" +
			"A region the coordinator does not hear from now is shown unreachable, with its last use.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTenantArg(args[0]); err != nil {
				return err
			}
			raw, err := brokerQuery(cmd.Context(), flags, func(ctx context.Context, c *admin.Client, base string) (json.RawMessage, error) {
				var raw json.RawMessage
				err := c.Get(ctx, base, "/admin/v1/tenants/"+url.PathEscape(args[0])+"/usage", &raw)
				return raw, err
			})
			if err != nil {
				return err
			}
			if flags.json {
				out := cmd.OutOrStdout()
				if _, err := out.Write(raw); err != nil {
					return err
				}
				if len(raw) > 0 && raw[len(raw)-1] != '\n' {
					_, err = io.WriteString(out, "\n")
				}
				return err
			}
			var u admin.Usage
			if err := json.Unmarshal(raw, &u); err != nil {
				return fmt.Errorf("the usage answer: %w", err)
			}
			return printUsage(cmd.OutOrStdout(), u)
		},
	}
}

// printUsage is the usage table: one row per quota and region.
func printUsage(w io.Writer, u admin.Usage) error {
	if len(u.Quotas) == 0 {
		_, err := fmt.Fprintf(w, "tenant %s has no quotas: every quota is unlimited\n", u.Tenant)
		return err
	}
	fmt.Fprintf(w, "tenant %s (use is mesh-wide: rates where published, storage in every region)\n", u.Tenant)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUOTA\tLIMIT\tUSE\tREGION\tREGION USE\tSHARE\tCAP\tREACHABLE")
	for _, q := range u.Quotas {
		head := fmt.Sprintf("%s\t%s\t%s (%s)", q.Quota, status.QuotaValue(q.Unit, q.Limit), status.QuotaValue(q.Unit, q.Use), status.Percent(q.Use, q.Limit))
		if len(q.Regions) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\n", head)
			continue
		}
		for i, r := range q.Regions {
			if i > 0 {
				head = "\t\t"
			}
			capText := "-"
			if r.Cap > 0 {
				capText = status.QuotaValue(q.Unit, r.Cap)
			}
			reach := "yes"
			if !r.Reachable {
				reach = "no (last report)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", head, r.Region, status.QuotaValue(q.Unit, r.Use), status.QuotaValue(q.Unit, r.Share), capText, reach)
		}
	}
	return tw.Flush()
}

// regionCapsText is a tenant's per-region caps in one line
// ("us-east: publish_rate 600/s; eu-west: publish_bytes 1.0 MiB/s"), or
// none.
func regionCapsText(q admin.Quotas, none string) string {
	if len(q.Regions) == 0 {
		return none
	}
	names := make([]string, 0, len(q.Regions))
	for r := range q.Regions {
		names = append(names, r)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, r := range names {
		c := q.Regions[r]
		var caps []string
		if c.PublishRate > 0 {
			caps = append(caps, "publish_rate "+rateText(c.PublishRate, ""))
		}
		if c.PublishBytes > 0 {
			caps = append(caps, "publish_bytes "+byteRateText(c.PublishBytes, ""))
		}
		if len(caps) == 0 {
			caps = append(caps, "no cap")
		}
		parts = append(parts, r+": "+strings.Join(caps, ", "))
	}
	return strings.Join(parts, "; ")
}
