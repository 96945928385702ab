package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/topology"
)

// newApply is `strata apply -f FILE [--dry-run] [--prune] [--force]`:
// the topology file's tenants and namespaces reconciled into a running
// mesh through its admin API, like kubectl apply.
func newApply() *cobra.Command {
	var flags adminFlags
	var opts applyOptions
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Make a running mesh's tenants and namespaces those of a topology file",
		Long: "Reconcile the tenants and namespaces of a topology file into a running mesh through one\n" +
			"broker's admin API (found like 'strata admin' does: --url, or <data-dir>/mesh.json and\n" +
			"--region). apply reads the mesh's tenants and their namespaces, prints what differs, one\n" +
			"line per change and per changed field, like kubectl:\n\n" +
			"  + tenant payments\n" +
			"  ~ namespace payments/orders: policies.retention.time \"0s\" → \"7d\"\n" +
			"  - namespace old/x\n\n" +
			"and then makes those changes in that order: tenants created or replaced (PUT, with the\n" +
			"file's admins and quotas), namespaces created or replaced (PUT, with every policy as the\n" +
			"file gives it or defaults it), then, with --prune only, the namespaces and tenants the\n" +
			"file does not name deleted. A namespace that still holds topics is deleted only with\n" +
			"--force (with its topics). A second apply of the same file prints \"no changes\" and\n" +
			"writes nothing.\n\n" +
			"The file is validated as a whole first (problems print as FILE:LINE:COL: PATH: MESSAGE).\n" +
			"Its regions section serves only that validation (a replication list must name its\n" +
			"regions, and a namespace without one is replicated to all of them): apply never changes\n" +
			"regions or nodes, and the mesh checks replication against its own regions.",
		Example: "  strata apply -f mesh.yaml --dry-run\n  strata apply -f mesh.yaml\n  strata apply -f mesh.yaml --prune --force",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.json = flags.json
			return runApply(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), &flags, opts)
		},
	}
	flags.register(cmd)
	pf := cmd.PersistentFlags()
	pf.Lookup("json").Usage = "print the plan, and how many changes were applied, as JSON"
	pf.Lookup("region").Usage = "ask a broker of this region (default: the first broker of mesh.json that answers)"
	f := cmd.Flags()
	f.StringVarP(&opts.file, "file", "f", "", "topology YAML (required)")
	f.BoolVar(&opts.dryRun, "dry-run", false, "print the changes, make none")
	f.BoolVar(&opts.prune, "prune", false, "also delete the tenants and namespaces the file does not name")
	f.BoolVar(&opts.force, "force", false, "with --prune: delete namespaces that still hold topics, and their topics")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

type applyOptions struct {
	file                       string
	dryRun, prune, force, json bool
}

// runApply is `strata apply`: load, read the mesh, plan, print, apply.
func runApply(ctx context.Context, out, errOut io.Writer, flags *adminFlags, o applyOptions) error {
	m, warnings, err := topology.LoadFile(o.file)
	for _, w := range warnings {
		fmt.Fprintln(errOut, w.String())
	}
	if err != nil {
		return err // Problems: main prints them one FILE:LINE:COL line each
	}
	want := m.TenancyConfig()
	c, err := flags.brokers()
	if err != nil {
		return err
	}
	cur, err := meshConfig(ctx, c)
	if err != nil {
		return fmt.Errorf("reading the mesh's tenants: %w", err)
	}
	plan := tenancy.Plan(cur, want, o.prune)
	if !o.json {
		printPlan(out, plan)
	}
	if o.dryRun || len(plan) == 0 {
		if o.json {
			return writeJSON(out, applyReport{DryRun: o.dryRun, Changes: planJSON(plan), Applied: 0})
		}
		switch {
		case len(plan) == 0:
			fmt.Fprintln(out, "no changes")
		default:
			fmt.Fprintf(out, "dry run: %s, nothing applied\n", plural(len(plan), "change"))
		}
		return nil
	}
	applied := 0
	for _, ch := range plan {
		note, err := applyChange(ctx, c, ch, o.force)
		if err != nil {
			if o.json {
				_ = writeJSON(out, applyReport{Changes: planJSON(plan), Applied: applied, Error: err.Error()})
			} else if applied > 0 {
				fmt.Fprintf(out, "%s applied before the error\n", plural(applied, "change"))
			}
			return fmt.Errorf("%s %s %s: %w", ch.Op, ch.Kind, ch.Key, err)
		}
		if note != "" && !o.json {
			fmt.Fprintln(out, note)
		}
		applied++
	}
	if o.json {
		return writeJSON(out, applyReport{Changes: planJSON(plan), Applied: applied})
	}
	fmt.Fprintf(out, "%s applied\n", plural(applied, "change"))
	return nil
}

// meshConfig reads the mesh's tenants and each one's namespaces.
func meshConfig(ctx context.Context, c *brokerConn) (tenancy.Config, error) {
	var cfg tenancy.Config
	err := c.do(ctx, false, func(ctx context.Context, base string) (err error) {
		cfg.Tenants, err = c.client.Tenants(ctx, base)
		return err
	})
	if err != nil {
		return cfg, err
	}
	for _, t := range cfg.Tenants {
		var nss []admin.Namespace
		err := c.do(ctx, false, func(ctx context.Context, base string) (err error) {
			nss, err = c.client.Namespaces(ctx, base, t.Name)
			return err
		})
		if err != nil {
			return cfg, fmt.Errorf("namespaces of %s: %w", t.Name, err)
		}
		cfg.Namespaces = append(cfg.Namespaces, nss...)
	}
	return cfg, nil
}

// applyChange makes one change of a plan; note is anything to tell
// besides (a namespace delete's operation).
func applyChange(ctx context.Context, c *brokerConn, ch tenancy.Change, force bool) (note string, err error) {
	switch {
	case ch.Kind == tenancy.KindTenant && ch.Op != "delete":
		t := ch.Tenant
		err = c.do(ctx, true, func(ctx context.Context, base string) error {
			_, _, err := c.client.PutTenant(ctx, base, t.Name, admin.TenantRequest{Admins: t.Admins, Quotas: t.Quotas})
			return err
		})
	case ch.Kind == tenancy.KindNamespace && ch.Op != "delete":
		ns := ch.Namespace
		var pol json.RawMessage
		if pol, err = json.Marshal(ns.Policies); err != nil {
			return "", err
		}
		err = c.do(ctx, true, func(ctx context.Context, base string) error {
			_, _, err := c.client.PutNamespace(ctx, base, ns.NS(), pol)
			return err
		})
	case ch.Kind == tenancy.KindNamespace:
		var n tenancy.NSName
		if n, err = tenancy.ParseNSName(ch.Key); err != nil {
			return "", err
		}
		var op *admin.Operation
		err = c.do(ctx, true, func(ctx context.Context, base string) (err error) {
			op, err = c.client.DeleteNamespace(ctx, base, n, force)
			return err
		})
		if err == nil && op != nil {
			note = namespaceDeletedText(n.String(), op, c.base)
		}
	case ch.Kind == tenancy.KindTenant:
		err = c.do(ctx, true, func(ctx context.Context, base string) error {
			return c.client.DeleteTenant(ctx, base, ch.Key, force)
		})
	default:
		return "", fmt.Errorf("unknown change %s", ch)
	}
	var apiErr *admin.APIError
	if !force && ch.Op == "delete" && errors.As(err, &apiErr) && apiErr.Code == admin.CodeNotEmpty {
		return "", fmt.Errorf("%s (re-run with --force to delete it and its topics)", apiErr.Message)
	}
	return note, err
}

// printPlan prints plan like kubectl: "+ kind key" for a create, "~ kind
// key: path from → to" for each field an update changes, "- kind key"
// for a delete.
func printPlan(w io.Writer, plan []tenancy.Change) {
	for _, ch := range plan {
		switch ch.Op {
		case "create":
			fmt.Fprintf(w, "+ %s %s\n", ch.Kind, ch.Key)
		case "delete":
			fmt.Fprintf(w, "- %s %s\n", ch.Kind, ch.Key)
		default:
			for _, f := range ch.Fields {
				fmt.Fprintf(w, "~ %s %s: %s %s → %s\n", ch.Kind, ch.Key, f.Path, f.From, f.To)
			}
		}
	}
}

// applyReport is `strata apply --json`'s output.
type applyReport struct {
	DryRun  bool           `json:"dry_run"`
	Changes []changeReport `json:"changes"`
	Applied int            `json:"applied"`
	Error   string         `json:"error,omitempty"`
}

// changeReport is one change of a plan in JSON: from and to are the
// field's JSON values.
type changeReport struct {
	Op     string             `json:"op"`
	Kind   string             `json:"kind"`
	Key    string             `json:"key"`
	Fields []fieldReport      `json:"fields,omitempty"`
	Tenant *admin.Tenant      `json:"tenant,omitempty"`
	NS     *tenancy.Namespace `json:"namespace,omitempty"`
}

type fieldReport struct {
	Path string          `json:"path"`
	From json.RawMessage `json:"from"`
	To   json.RawMessage `json:"to"`
}

func planJSON(plan []tenancy.Change) []changeReport {
	out := []changeReport{}
	for _, ch := range plan {
		r := changeReport{Op: ch.Op, Kind: string(ch.Kind), Key: ch.Key, Tenant: ch.Tenant, NS: ch.Namespace}
		for _, f := range ch.Fields {
			r.Fields = append(r.Fields, fieldReport{Path: f.Path, From: json.RawMessage(f.From), To: json.RawMessage(f.To)})
		}
		out = append(out, r)
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
