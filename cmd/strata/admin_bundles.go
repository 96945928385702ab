package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/admin"

	"github.com/stratamesh/strata/broker/bundle"
)

// newAdminBundles is `strata admin bundles list [t[/ns]] | unload
// t/ns/range [--to broker]` (admin API: /admin/v1/bundles…, served by
// brokers).
func newAdminBundles(flags *adminFlags) *cobra.Command {
	cmd := commandGroup(&cobra.Command{Use: "bundles", Aliases: []string{"bundle"}, Short: "Namespace bundles of each region: hash ranges, owning brokers, unload"})
	cmd.AddCommand(&cobra.Command{
		Use:   "list [tenant[/namespace]]",
		Short: "List each region's bundles with their owner and number of topics",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			path, err := scopedPath("/admin/v1/bundles", args)
			if err != nil {
				return err
			}
			type answer struct {
				Region  string             `json:"region"`
				Bundles []admin.BundleInfo `json:"bundles"`
			}
			all, failed, err := perRegion[answer](cmd, flags, "broker", path, false)
			if err != nil {
				return err
			}
			defer func() {
				if failed > 0 && err == nil {
					err = exitError{code: 1}
				}
			}()
			if flags.json {
				return printJSON(cmd, all)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "REGION\tBUNDLE\tOWNER\tTOPICS\tSINCE")
			for _, a := range all {
				for _, b := range a.Bundles {
					owner, since := b.Owner, "-"
					if owner == "" {
						owner = "(none)"
					}
					if b.Unloading != "" {
						owner += " (unloading from " + b.Unloading + ")"
					}
					if !b.Since.IsZero() {
						since = b.Since.Local().Format(time.DateTime)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", a.Region, b.Bundle, owner, b.Topics, since)
				}
			}
			return tw.Flush()
		},
	})
	var to string
	var noWait bool
	unload := &cobra.Command{
		Use:   "unload TENANT/NAMESPACE/RANGE",
		Short: "Move a bundle to another broker (its topics are closed and taken over; no data is copied)",
		Long: "Move a bundle to another broker of the region: its owner closes the bundle's topics (ledgers\n" +
			"closed, cursors persisted) and releases it, and the broker given by --to, or else the least\n" +
			"loaded other live broker, takes it over. RANGE is as 'bundles list' shows it\n" +
			"(0x00000000_0x40000000). Needs --region when the mesh has several regions.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := bundle.ParseID(args[0])
			if err != nil {
				return err
			}
			urls, order, err := flags.roleTargets("broker")
			if err != nil {
				return err
			}
			if len(order) != 1 {
				return fmt.Errorf("the mesh has %d regions (%s): say which with --region", len(order), strings.Join(order, ", "))
			}
			client := flags.client()
			var body any // none: placement picks the broker
			if to != "" {
				body = admin.UnloadRequest{To: to}
			}
			type answer struct {
				Region    string          `json:"region"`
				Operation admin.Operation `json:"operation"`
			}
			var a answer
			var base string
			for _, u := range urls[order[0]] {
				ctx, cancel := context.WithTimeout(cmd.Context(), flags.timeout)
				err = client.Post(ctx, u, "/admin/v1/bundles/"+id.String()+"/unload", body, &a)
				cancel()
				var apiErr *admin.APIError
				if err == nil || errors.As(err, &apiErr) {
					base = u
					break
				}
			}
			if err != nil {
				return err
			}
			for !noWait && a.Operation.State == "running" {
				time.Sleep(200 * time.Millisecond)
				ctx, cancel := context.WithTimeout(cmd.Context(), flags.timeout)
				err := client.Get(ctx, base, "/admin/v1/operations/"+a.Operation.ID, &a)
				cancel()
				if err != nil {
					return err
				}
			}
			if flags.json {
				return printJSON(cmd, a)
			}
			op := a.Operation
			switch op.State {
			case "done":
				if r, ok := op.Result.(map[string]any); ok && r["from"] == r["to"] {
					fmt.Fprintf(cmd.OutOrStdout(), "bundle %s is already owned by %v (region %s)\n", id, r["to"], a.Region)
				} else if ok {
					fmt.Fprintf(cmd.OutOrStdout(), "bundle %s moved from %v to %v (region %s)\n", id, r["from"], r["to"], a.Region)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "bundle %s moved (region %s)\n", id, a.Region)
				}
			case "running":
				fmt.Fprintf(cmd.OutOrStdout(), "unloading bundle %s: operation %s is running (GET %s/admin/v1/operations/%s)\n", id, op.ID, base, op.ID)
			default:
				return fmt.Errorf("unloading bundle %s failed: %s", id, op.Error)
			}
			return nil
		},
	}
	unload.Flags().StringVar(&to, "to", "", "broker to move the bundle to, by id (b2) or full name (us-east.b2); default: the least loaded other broker")
	unload.Flags().BoolVar(&noWait, "no-wait", false, "return once the unload is requested, without waiting for the move")
	cmd.AddCommand(unload)
	return cmd
}
