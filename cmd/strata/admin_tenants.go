package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/status"
	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/topology"
)

// This file is `strata admin tenants|namespaces|tokens`: the control
// plane's objects (admin API: /admin/v1/tenants…, /admin/v1/namespaces…,
// /admin/v1/tokens…, served by brokers). They are mesh-wide, so any
// broker of any region answers for them.

// brokerConn is the broker a control-plane command asks: the first of
// --url, or of mesh.json's brokers (of --region, else of every region),
// that answers. Once one answered, the next requests go to it.
type brokerConn struct {
	flags  *adminFlags
	client *admin.Client
	urls   []string
	base   string // the broker that answered, once one did
}

// brokers finds the brokers to ask, like the other admin commands.
func (f *adminFlags) brokers() (*brokerConn, error) {
	urls, order, err := f.roleTargets("broker")
	if err != nil {
		return nil, err
	}
	c := &brokerConn{flags: f, client: f.client()}
	for _, r := range order {
		c.urls = append(c.urls, urls[r]...)
	}
	if len(c.urls) == 0 {
		return nil, errors.New("mesh.json lists no broker with an admin URL (give --url)")
	}
	return c, nil
}

// do runs fn against the brokers in turn until one answers (an API error
// is an answer). A read goes on to the next broker after any failure; a
// write only when it could not be sent at all (refused connection), so
// that it is never made twice.
// brokerQuery asks the first broker that answers (a read, through
// brokerConn.do) with fn and returns its answer.
func brokerQuery[T any](ctx context.Context, flags *adminFlags, fn func(ctx context.Context, c *admin.Client, base string) (T, error)) (T, error) {
	var v T
	c, err := flags.brokers()
	if err != nil {
		return v, err
	}
	err = c.do(ctx, false, func(ctx context.Context, base string) (err error) {
		v, err = fn(ctx, c.client, base)
		return err
	})
	return v, err
}

func (c *brokerConn) do(ctx context.Context, write bool, fn func(ctx context.Context, base string) error) error {
	urls := c.urls
	if c.base != "" {
		urls = []string{c.base}
	}
	var err error
	for _, u := range urls {
		err = fn(ctx, u)
		var apiErr *admin.APIError
		if err == nil || errors.As(err, &apiErr) {
			c.base = u
			return err
		}
		var op *net.OpError
		if write && !(errors.As(err, &op) && op.Op == "dial") {
			return err
		}
	}
	if len(urls) > 1 {
		return fmt.Errorf("no broker answered (%s): %w", strings.Join(urls, ", "), err)
	}
	return err
}

// parseNS parses a TENANT/NAMESPACE argument.
func parseNS(arg string) (tenancy.NSName, error) {
	n, err := tenancy.ParseNSName(arg)
	if err != nil {
		return n, fmt.Errorf("%q is not TENANT/NAMESPACE (letters, digits, '-' and '_')", arg)
	}
	return n, nil
}

func checkTenantArg(arg string) error {
	if !validName(arg) {
		return fmt.Errorf("tenant name %q: use letters, digits, '-' and '_'", arg)
	}
	return nil
}

// newAdminTenants is `strata admin tenants list|get|create|delete`.
func newAdminTenants(flags *adminFlags) *cobra.Command {
	cmd := commandGroup(&cobra.Command{Use: "tenants", Aliases: []string{"tenant"}, Short: "Tenants of the mesh: their admins, mesh-wide quotas and quota usage"})
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the tenants with their admins and quotas (- is unlimited)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ts, err := brokerQuery(cmd.Context(), flags, func(ctx context.Context, c *admin.Client, base string) ([]admin.Tenant, error) {
				return c.Tenants(ctx, base)
			})
			if err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, admin.TenantList{Tenants: nonNilSlice(ts)})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TENANT\tADMINS\tPUBLISH RATE\tPUBLISH BYTES\tSTORAGE\tTOPICS\tCONNECTIONS\tCONSUMERS")
			for _, t := range ts {
				q := t.Quotas
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, listText(t.Admins, "-"), rateText(q.PublishRate, "-"),
					byteRateText(q.PublishBytes, "-"), bytesText(q.Storage, "-"), countText(q.Topics, "-"), countText(q.Connections, "-"), countText(q.Consumers, "-"))
			}
			return tw.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "get TENANT",
		Short: "Show one tenant: admins and quotas",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTenantArg(args[0]); err != nil {
				return err
			}
			t, err := brokerQuery(cmd.Context(), flags, func(ctx context.Context, c *admin.Client, base string) (admin.Tenant, error) {
				return c.Tenant(ctx, base, args[0])
			})
			if err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, t)
			}
			return printTenant(cmd.OutOrStdout(), t)
		},
	})
	var admins []string
	var quotas quotaFlags
	create := &cobra.Command{
		Use:   "create TENANT",
		Short: "Create a tenant (an existing one is replaced: its admins and quotas become those given)",
		Long: "Create a tenant with the admins and quotas given (PUT /admin/v1/tenants/{t}). Quotas are\n" +
			"mesh-wide, all regions together; an omitted quota is unlimited. The API's PUT creates or\n" +
			"replaces: on an existing tenant every admin and quota becomes what this command gives\n" +
			"('tenants update' changes only what its flags name). Sizes take units (B KB MB GB TB,\n" +
			"KiB MiB GiB TiB); rates are per second. --region-publish-rate and --region-publish-bytes\n" +
			"cap a rate in one region (REGION=RATE): the region must be one of the mesh's, and the cap at\n" +
			"most the mesh-wide limit.",
		Example: "  strata admin tenants create payments --publish-rate 5000/s --storage 50GiB --connections 500\n" +
			"  strata admin tenants create payments --publish-rate 1000/s --region-publish-rate us-east=600/s",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTenantArg(args[0]); err != nil {
				return err
			}
			req := admin.TenantRequest{Admins: admins}
			if err := quotas.apply(cmd.Flags(), &req.Quotas); err != nil {
				return err
			}
			c, err := flags.brokers()
			if err != nil {
				return err
			}
			var t admin.Tenant
			var created bool
			if err := c.do(cmd.Context(), true, func(ctx context.Context, base string) (err error) {
				t, created, err = c.client.PutTenant(ctx, base, args[0], req)
				return err
			}); err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, t)
			}
			verb := "created"
			if !created {
				verb = "replaced"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s tenant %s\n", verb, t.Name)
			return printTenant(cmd.OutOrStdout(), t)
		},
	}
	create.Flags().StringSliceVar(&admins, "admins", nil, "tenant-admin principals, comma-separated")
	quotas.register(create.Flags())
	cmd.AddCommand(create)
	var force bool
	del := &cobra.Command{
		Use:   "delete TENANT",
		Short: "Delete a tenant; one with namespaces needs --force, which deletes them and their topics too",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTenantArg(args[0]); err != nil {
				return err
			}
			c, err := flags.brokers()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), true, func(ctx context.Context, base string) error {
				return c.client.DeleteTenant(ctx, base, args[0], force)
			}); err != nil {
				return withForceHint(err, force)
			}
			if flags.json {
				return printJSON(cmd, map[string]string{"deleted": args[0]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted tenant %s\n", args[0])
			return nil
		},
	}
	del.Flags().BoolVar(&force, "force", false, "also delete the tenant's namespaces and their topics")
	cmd.AddCommand(del)
	cmd.AddCommand(newTenantsUpdate(flags), newTenantsUsage(flags))
	cmd.AddCommand(newAdminUsers(flags))
	return cmd
}

// withForceHint adds "re-run with --force" to a not_empty refusal.
func withForceHint(err error, force bool) error {
	var apiErr *admin.APIError
	if !force && errors.As(err, &apiErr) && apiErr.Code == admin.CodeNotEmpty {
		return fmt.Errorf("%w (re-run with --force to delete it anyway)", err)
	}
	return err
}

func printTenant(w io.Writer, t admin.Tenant) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	q := t.Quotas
	fmt.Fprintf(tw, "tenant\t%s\nadmins\t%s\n", t.Name, listText(t.Admins, "none"))
	fmt.Fprintf(tw, "publish rate\t%s\npublish bytes\t%s\nstorage\t%s\n", rateText(q.PublishRate, "unlimited"),
		byteRateText(q.PublishBytes, "unlimited"), bytesText(q.Storage, "unlimited"))
	fmt.Fprintf(tw, "topics\t%s\nconnections\t%s\nconsumers\t%s\n", countText(q.Topics, "unlimited"),
		countText(q.Connections, "unlimited"), countText(q.Consumers, "unlimited"))
	fmt.Fprintf(tw, "region caps\t%s\n", regionCapsText(q, "none"))
	return tw.Flush()
}

// newAdminNamespaces is `strata admin namespaces list|get|create|delete|
// policies|set-policies`.
func newAdminNamespaces(flags *adminFlags) *cobra.Command {
	cmd := commandGroup(&cobra.Command{Use: "namespaces", Aliases: []string{"namespace", "ns"}, Short: "Namespaces of a tenant and their policies"})
	cmd.AddCommand(&cobra.Command{
		Use:   "list TENANT",
		Short: "List a tenant's namespaces with their main policies",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTenantArg(args[0]); err != nil {
				return err
			}
			nss, err := brokerQuery(cmd.Context(), flags, func(ctx context.Context, c *admin.Client, base string) ([]admin.Namespace, error) {
				return c.Namespaces(ctx, base, args[0])
			})
			if err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, admin.NamespaceList{Tenant: args[0], Namespaces: nonNilSlice(nss)})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAMESPACE\tREPLICATION\tRETENTION\tBUNDLES\tMESSAGE TTL\tDEDUP WINDOW\tAUTO-CREATE")
			for _, n := range nss {
				p := n.Policies
				fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%d\t%s\t%s\t%t\n", n.Tenant, n.Name, listText(p.Replication, "-"), retentionText(p.Retention),
					p.Bundles, durationText(p.MessageTTL, "never"), durationText(p.DedupWindow, "off"), p.AutoCreateTopics)
			}
			return tw.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "get TENANT/NAMESPACE",
		Short: "Show one namespace and its policies",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseNS(args[0])
			if err != nil {
				return err
			}
			ns, err := brokerQuery(cmd.Context(), flags, func(ctx context.Context, c *admin.Client, base string) (admin.Namespace, error) {
				return c.Namespace(ctx, base, n)
			})
			if err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, ns)
			}
			return printPolicies(cmd.OutOrStdout(), ns.NS().String(), ns.Policies)
		},
	})
	var replication []string
	var retTime, retSize, policiesJSON string
	var retMsgs int64
	var bundles int
	create := &cobra.Command{
		Use:   "create TENANT/NAMESPACE",
		Short: "Create a namespace (an existing one is replaced: its policies become the defaults and those given)",
		Long: "Create a namespace (PUT /admin/v1/namespaces/{t}/{ns}) with the default policies (replicated\n" +
			"to every region, limits retention without limits, 4 bundles, topics auto-created, a two-minute\n" +
			"dedup window) merged with --policies (a JSON object of policies) and then the flags. The API's\n" +
			"PUT creates or replaces: on an existing namespace the policies become exactly those; change\n" +
			"single policies with 'namespaces set-policies' instead.",
		Example: "  strata admin namespaces create payments/orders --replication us-east,eu-west --retention-time 7d\n" +
			`  strata admin namespaces create payments/audit --policies '{"retention": {"mode": "workqueue"}, "dedup_window": "0s"}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseNS(args[0])
			if err != nil {
				return err
			}
			pol := map[string]any{}
			if policiesJSON != "" {
				if err := json.Unmarshal([]byte(policiesJSON), &pol); err != nil || pol == nil {
					return fmt.Errorf("--policies: want a JSON object of policies, e.g. '{\"bundles\": 8}'")
				}
			}
			ret, _ := pol["retention"].(map[string]any)
			if ret == nil {
				ret = map[string]any{}
			}
			fl := cmd.Flags()
			if fl.Changed("replication") {
				pol["replication"] = replication
			}
			if fl.Changed("retention-time") {
				d, err := tenancy.ParseDuration(retTime)
				if err != nil {
					return fmt.Errorf("--retention-time: %w", err)
				}
				ret["time"] = d.String()
			}
			if fl.Changed("retention-size") {
				s, err := parseSizeFlag("--retention-size", retSize)
				if err != nil {
					return err
				}
				ret["size"] = s
			}
			if fl.Changed("retention-messages") {
				ret["messages"] = retMsgs
			}
			if len(ret) > 0 {
				pol["retention"] = ret
			}
			if fl.Changed("bundles") {
				pol["bundles"] = bundles
			}
			var body json.RawMessage
			if len(pol) > 0 {
				if body, err = json.Marshal(pol); err != nil {
					return err
				}
			}
			c, err := flags.brokers()
			if err != nil {
				return err
			}
			var ns admin.Namespace
			var created bool
			if err := c.do(cmd.Context(), true, func(ctx context.Context, base string) (err error) {
				ns, created, err = c.client.PutNamespace(ctx, base, n, body)
				return err
			}); err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, ns)
			}
			verb := "created"
			if !created {
				verb = "replaced"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s namespace %s\n", verb, n)
			return printPolicies(cmd.OutOrStdout(), n.String(), ns.Policies)
		},
	}
	create.Flags().StringSliceVar(&replication, "replication", nil, "regions to replicate the namespace to, comma-separated (default every region)")
	create.Flags().StringVar(&retTime, "retention-time", "", "keep messages this long, e.g. 7d (default unlimited)")
	create.Flags().StringVar(&retSize, "retention-size", "", "keep at most this many bytes per topic, e.g. 100GiB (default unlimited)")
	create.Flags().Int64Var(&retMsgs, "retention-messages", 0, "keep at most this many messages per topic (default unlimited)")
	create.Flags().IntVar(&bundles, "bundles", 0, "number of hash bundles (default 4)")
	create.Flags().StringVar(&policiesJSON, "policies", "", "policies as a JSON object, merged over the defaults before the flags")
	cmd.AddCommand(create)
	var force bool
	del := &cobra.Command{
		Use:   "delete TENANT/NAMESPACE",
		Short: "Delete a namespace; one that holds topics needs --force, which deletes them too",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseNS(args[0])
			if err != nil {
				return err
			}
			c, err := flags.brokers()
			if err != nil {
				return err
			}
			var op *admin.Operation
			if err := c.do(cmd.Context(), true, func(ctx context.Context, base string) (err error) {
				op, err = c.client.DeleteNamespace(ctx, base, n, force)
				return err
			}); err != nil {
				return withForceHint(err, force)
			}
			if flags.json {
				if op != nil {
					return printJSON(cmd, op)
				}
				return printJSON(cmd, map[string]string{"deleted": n.String()})
			}
			fmt.Fprintln(cmd.OutOrStdout(), namespaceDeletedText(n.String(), op, c.base))
			return nil
		},
	}
	del.Flags().BoolVar(&force, "force", false, "also delete the namespace's topics")
	cmd.AddCommand(del)
	cmd.AddCommand(&cobra.Command{
		Use:   "policies TENANT/NAMESPACE",
		Short: "Show a namespace's policies",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseNS(args[0])
			if err != nil {
				return err
			}
			p, err := brokerQuery(cmd.Context(), flags, func(ctx context.Context, c *admin.Client, base string) (admin.Policies, error) {
				return c.Policies(ctx, base, n)
			})
			if err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, p)
			}
			return printPolicies(cmd.OutOrStdout(), n.String(), p)
		},
	})
	var patchFile string
	setPolicies := &cobra.Command{
		Use:   "set-policies TENANT/NAMESPACE [JSON]",
		Short: "Change a namespace's policies with a JSON merge patch (the argument, or --file)",
		Long: "Change some of a namespace's policies (PATCH …/policies) with a JSON merge patch (RFC 7386):\n" +
			"the policies it names are replaced, objects merge, null resets a policy to its zero value;\n" +
			"the others stay. The patch is the argument, or the file given by --file (- for stdin).",
		Example: `  strata admin namespaces set-policies payments/orders '{"retention": {"time": "14d"}, "backlog_quota": null}'` + "\n" +
			"  strata admin namespaces set-policies payments/orders --file patch.json",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseNS(args[0])
			if err != nil {
				return err
			}
			var patch []byte
			switch {
			case len(args) == 2 && patchFile != "":
				return errors.New("give the patch as the argument or with --file, not both")
			case len(args) == 2:
				patch = []byte(args[1])
			case patchFile == "-":
				if patch, err = io.ReadAll(cmd.InOrStdin()); err != nil {
					return err
				}
			case patchFile != "":
				if patch, err = os.ReadFile(patchFile); err != nil {
					return err
				}
			default:
				return errors.New("no patch: give it as the argument (a JSON object) or with --file")
			}
			var obj map[string]any
			if err := json.Unmarshal(patch, &obj); err != nil || obj == nil {
				return fmt.Errorf("the patch is not a JSON object: %s", strings.TrimSpace(string(patch)))
			}
			c, err := flags.brokers()
			if err != nil {
				return err
			}
			var p admin.Policies
			if err := c.do(cmd.Context(), true, func(ctx context.Context, base string) (err error) {
				p, err = c.client.PatchPolicies(ctx, base, n, patch)
				return err
			}); err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, p)
			}
			return printPolicies(cmd.OutOrStdout(), n.String(), p)
		},
	}
	setPolicies.Flags().StringVarP(&patchFile, "file", "f", "", "read the patch from this file (- for stdin)")
	cmd.AddCommand(setPolicies)
	return cmd
}

// namespaceDeletedText words a namespace delete's answer: done, or an
// operation following the deletion of its topics in base's region.
func namespaceDeletedText(ns string, op *admin.Operation, base string) string {
	if op == nil {
		return "deleted namespace " + ns
	}
	return fmt.Sprintf("deleted namespace %s; its %d topic(s) are being deleted: operation %s (follow it with GET %s/admin/v1/operations/%s)",
		ns, op.Total, op.ID, base, op.ID)
}

func printPolicies(w io.Writer, ns string, p admin.Policies) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "namespace\t%s\n", ns)
	fmt.Fprintf(tw, "replication\t%s\n", listText(p.Replication, "none"))
	fmt.Fprintf(tw, "retention\t%s\n", retentionText(p.Retention))
	if b := p.BacklogQuota; b != nil {
		fmt.Fprintf(tw, "backlog quota\tsize %s, time %s, %s\n", bytesText(b.Size, "unlimited"), durationText(b.Time, "unlimited"), b.Policy)
	} else {
		fmt.Fprintf(tw, "backlog quota\tnone\n")
	}
	if o := p.Offload; o != nil {
		fmt.Fprintf(tw, "offload\tabove %s on bookies, bookie copies deleted after %s\n", bytesText(o.Threshold, "0 B"), o.DeletionLag)
	} else {
		fmt.Fprintf(tw, "offload\ton request only\n")
	}
	fmt.Fprintf(tw, "message ttl\t%s\n", durationText(p.MessageTTL, "never"))
	fmt.Fprintf(tw, "dedup window\t%s\n", durationText(p.DedupWindow, "off"))
	fmt.Fprintf(tw, "bundles\t%d\n", p.Bundles)
	fmt.Fprintf(tw, "auto-create topics\t%t\n", p.AutoCreateTopics)
	fmt.Fprintf(tw, "max consumers\t%s\n", countText(int64(p.MaxConsumers), "unlimited"))
	fmt.Fprintf(tw, "subscription expiry\t%s\n", durationText(p.SubscriptionExpiry, "never"))
	return tw.Flush()
}

// newAdminTokens is `strata admin tokens list|create|revoke`.
func newAdminTokens(flags *adminFlags) *cobra.Command {
	cmd := commandGroup(&cobra.Command{Use: "tokens", Aliases: []string{"token"}, Short: "Admin tokens: superuser and tenant-admin bearer tokens"})
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the admin tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ts, err := brokerQuery(cmd.Context(), flags, func(ctx context.Context, c *admin.Client, base string) ([]admin.TokenInfo, error) {
				return c.Tokens(ctx, base)
			})
			if err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, admin.TokenList{Tokens: nonNilSlice(ts)})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTENANT\tCREATED\tDESCRIPTION")
			for _, t := range ts {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, tokenTenantText(t.Tenant), t.Created.Local().Format(time.DateTime), t.Description)
			}
			return tw.Flush()
		},
	})
	var tenant, description string
	create := &cobra.Command{
		Use:   "create",
		Short: "Make an admin token: of a tenant (--tenant) or a superuser one; its secret is printed once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tenant != "" {
				if err := checkTenantArg(tenant); err != nil {
					return err
				}
			}
			c, err := flags.brokers()
			if err != nil {
				return err
			}
			var t admin.TokenCreated
			if err := c.do(cmd.Context(), true, func(ctx context.Context, base string) (err error) {
				t, err = c.client.CreateToken(ctx, base, admin.TokenRequest{Tenant: tenant, Description: description})
				return err
			}); err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, t)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "created token %s (%s)\n", t.ID, tokenTenantText(t.Tenant))
			fmt.Fprintf(out, "secret: %s\n", t.Secret)
			fmt.Fprintln(out, "The secret is shown only once (the mesh keeps only its hash): store it now. Use it as --token or $"+tokenEnv+".")
			return nil
		},
	}
	create.Flags().StringVar(&tenant, "tenant", "", "make a tenant-admin token of this tenant (default: a superuser token, or a tenant admin's own tenant)")
	create.Flags().StringVar(&description, "description", "", "what the token is for (at most 256 bytes)")
	cmd.AddCommand(create)
	cmd.AddCommand(&cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an admin token mesh-wide",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !validName(args[0]) {
				return fmt.Errorf("token id %q: use the ID 'tokens list' shows", args[0])
			}
			c, err := flags.brokers()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), true, func(ctx context.Context, base string) error {
				return c.client.RevokeToken(ctx, base, args[0])
			}); err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, map[string]string{"revoked": args[0]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked token %s\n", args[0])
			return nil
		},
	})
	return cmd
}

func tokenTenantText(t string) string {
	if t == "" {
		return "superuser"
	}
	return "tenant " + t
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func listText(s []string, none string) string {
	if len(s) == 0 {
		return none
	}
	return strings.Join(s, ",")
}

func countText(n int64, zero string) string {
	if n == 0 {
		return zero
	}
	return strconv.FormatInt(n, 10)
}

func rateText(n int64, zero string) string {
	if n == 0 {
		return zero
	}
	return strconv.FormatInt(n, 10) + "/s"
}

func bytesText(n int64, zero string) string {
	if n == 0 {
		return zero
	}
	return status.BytesText(n)
}

func byteRateText(n int64, zero string) string {
	if n == 0 {
		return zero
	}
	return status.BytesText(n) + "/s"
}

func durationText(d tenancy.Duration, zero string) string {
	if d == 0 {
		return zero
	}
	return d.String()
}

// retentionText is a retention policy in one line: its mode and limits.
func retentionText(r admin.Retention) string {
	var limits []string
	if r.Time > 0 {
		limits = append(limits, "time "+r.Time.String())
	}
	if r.Size > 0 {
		limits = append(limits, "size "+status.BytesText(r.Size))
	}
	if r.Messages > 0 {
		limits = append(limits, "messages "+strconv.FormatInt(r.Messages, 10))
	}
	if len(limits) == 0 {
		return r.Mode + ", no limit"
	}
	return r.Mode + ", " + strings.Join(limits, ", ")
}

// parseMsgRate parses a messages-per-second flag given on the command
// line: "5000" or "5000/s"; 0 is unlimited. An empty value is an error
// (an unset shell variable must not lift a limit).
func parseMsgRate(flag, s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("%s: empty; give a rate such as 5000/s (0: unlimited)", flag)
	}
	in := s
	if !strings.HasSuffix(s, "/s") {
		s += "/s"
	}
	r, err := topology.ParseMsgRate(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a message rate (e.g. 5000 or 5000/s; 0: unlimited)", flag, in)
	}
	return int64(r), nil
}

// parseByteRate parses a bytes-per-second flag given on the command
// line: "10MiB/s", "10MiB" or a number of bytes; 0 is unlimited. An
// empty value is an error.
func parseByteRate(flag, s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("%s: empty; give a rate such as 10MiB/s (0: unlimited)", flag)
	}
	in := s
	if !strings.HasSuffix(s, "/s") {
		s += "/s"
	}
	r, err := topology.ParseByteRate(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a byte rate (e.g. 10MiB/s or 1048576; 0: unlimited)", flag, in)
	}
	return int64(r), nil
}

// parseSizeFlag parses a size flag given on the command line: "50GiB"
// or a number of bytes; 0 is unlimited. An empty value is an error.
func parseSizeFlag(flag, s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("%s: empty; give a size such as 50GiB (0: unlimited)", flag)
	}
	n, err := topology.ParseSize(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", flag, err)
	}
	return int64(n), nil
}
