package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/tenancy"
)

// decomReport is what `strata admin regions decommission` prints: the
// decommission as a surviving region answered it, and every broker's
// cursors towards the region (parked, stale, and — for a dry run — the
// running ones with the backlog they hold).
type decomReport struct {
	admin.DecommissionView
	// Asked is the region whose admin API took the request.
	Asked string `json:"asked"`
	// Cursors are the running replicator cursors towards the region
	// (dry run: what start would park), HeldMsgs/HeldBytes their backlog.
	Cursors   []admin.ReplicationStats `json:"cursors"`
	HeldMsgs  uint64                   `json:"held_msgs"`
	HeldBytes uint64                   `json:"held_bytes"`
	// Unanswered lists brokers that did not answer.
	Unanswered []string `json:"unanswered,omitempty"`
}

// newAdminDecommission is `strata admin regions decommission R
// [--dry-run|--confirm|--cancel|--status]`.
func newAdminDecommission(flags *adminFlags) *cobra.Command {
	var dryRun, confirm, cancel, status bool
	cmd := &cobra.Command{
		Use:   "decommission REGION",
		Short: "Remove a region from every namespace's replication list (reversible until --confirm)",
		Long: `Decommission REGION in two steps. Without a flag: REGION leaves every
namespace's replication list; the replicator cursors towards it stop, but
their positions and the messages they have not sent are kept. Then either
--confirm (delete the positions, release the storage they hold) or
--cancel (put REGION back in each list; the cursors resume where they
were). --dry-run prints what the first step would change and changes
nothing; --status prints the decommission and every broker's cursors
towards REGION. The request goes to another region's admin API (the
change reaches every region with the mesh's configuration).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			region := args[0]
			if !tenancy.ValidToken(region) {
				return fmt.Errorf("decommission: %q is not a valid region name", region)
			}
			n := 0
			for _, b := range []bool{dryRun, confirm, cancel, status} {
				if b {
					n++
				}
			}
			if n > 1 {
				return fmt.Errorf("decommission: --dry-run, --confirm, --cancel and --status go one at a time")
			}
			req := admin.DecommissionRequest{Action: tenancy.DecomStart, DryRun: dryRun}
			switch {
			case confirm:
				req.Action = tenancy.DecomConfirm
			case cancel:
				req.Action = tenancy.DecomCancel
			}
			rep, err := runDecommission(cmd.Context(), flags, region, req, status)
			if err != nil {
				return err
			}
			if flags.json {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			printDecom(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "print what the decommission would change (namespaces, topics, cursors, backlog held) and change nothing")
	f.BoolVar(&confirm, "confirm", false, "confirm a pending decommission: delete the parked cursor positions and release the storage they hold")
	f.BoolVar(&cancel, "cancel", false, "cancel a pending decommission: put the region back in each list it was removed from")
	f.BoolVar(&status, "status", false, "print the decommission and the brokers' cursors towards the region")
	return cmd
}

// runDecommission sends req (unless status) to the first other region
// that answers, then asks every broker of the other regions for its
// cursors towards region.
func runDecommission(ctx context.Context, flags *adminFlags, region string, req admin.DecommissionRequest, status bool) (decomReport, error) {
	urls, order, err := flags.roleTargets("broker")
	if err != nil {
		return decomReport{}, err
	}
	if f := flags.region; f != "" && f == region {
		return decomReport{}, fmt.Errorf("decommission %s: ask another region (--region names the region being decommissioned)", region)
	}
	var others []string
	for _, r := range order {
		if r != region || flags.url != "" {
			others = append(others, r)
		}
	}
	if len(others) == 0 {
		return decomReport{}, fmt.Errorf("decommission %s: no other region to ask (regions: %s)", region, strings.Join(order, ", "))
	}
	client := flags.client()
	var rep decomReport
	var lastErr error
	for _, r := range others {
		cctx, cancel := context.WithTimeout(ctx, flags.timeout)
		var v admin.DecommissionView
		if status {
			err = client.GetFirst(cctx, urls[r], admin.DecommissionPath(region), &v)
		} else {
			v, err = client.StepDecommission(cctx, urls[r], region, req)
		}
		cancel()
		if _, isAPI := err.(*admin.APIError); isAPI {
			return decomReport{}, fmt.Errorf("decommission %s (asked region %s): %w", region, r, err)
		}
		if err != nil {
			lastErr = err
			continue
		}
		rep.DecommissionView, rep.Asked = v, r
		break
	}
	if rep.Asked == "" {
		return decomReport{}, fmt.Errorf("decommission %s: no other region answered: %w", region, lastErr)
	}
	rep.Parked, rep.Stale, rep.Broker = nil, nil, ""
	for _, r := range others {
		for _, u := range urls[r] {
			cctx, cancel := context.WithTimeout(ctx, flags.timeout)
			v, err := client.DecommissionStatus(cctx, u, region)
			var rv admin.ReplicationView
			if err == nil {
				err = client.Get(cctx, u, "/admin/v1/replication", &rv)
			}
			cancel()
			if err != nil {
				rep.Unanswered = append(rep.Unanswered, r+" "+u)
				continue
			}
			rep.Parked, rep.Stale = append(rep.Parked, v.Parked...), append(rep.Stale, v.Stale...)
			for _, c := range rv.Cursors {
				if c.Remote == region {
					rep.Cursors = append(rep.Cursors, c)
					rep.HeldMsgs += c.LagMsgs
					rep.HeldBytes += c.LagBytes
				}
			}
		}
	}
	rep.Parked, rep.Stale, rep.Cursors = nonNilS(rep.Parked), nonNilS(rep.Stale), nonNilS(rep.Cursors)
	return rep, nil
}

func nonNilS[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// printDecom prints rep for people.
func printDecom(w io.Writer, rep decomReport) {
	what := "decommission of " + rep.Region
	switch {
	case rep.DryRun:
		fmt.Fprintf(w, "dry run: %s would change (nothing changed):\n", what)
	case rep.State == "":
		fmt.Fprintf(w, "%s: none\n", what)
	default:
		fmt.Fprintf(w, "%s: %s (asked region %s)\n", what, rep.State, rep.Asked)
	}
	if len(rep.Namespaces) > 0 {
		if rep.State == "cancelled" {
			// The lists are the BEFORE column again.
			fmt.Fprintf(w, "cancelled: every namespace below has its replication list back as BEFORE shows\n")
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAMESPACE\tREPLICATION BEFORE\tAFTER")
		for _, n := range rep.Namespaces {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", n.Namespace, strings.Join(n.Before, ","), strings.Join(n.After, ","))
		}
		tw.Flush()
	}
	if len(rep.Cursors) > 0 {
		topics := map[string]bool{}
		for _, c := range rep.Cursors {
			topics[c.Topic] = true
		}
		fmt.Fprintf(w, "running cursors towards %s: %d on %d topics, holding %d messages (%d bytes)\n", rep.Region, len(rep.Cursors), len(topics), rep.HeldMsgs, rep.HeldBytes)
	}
	if len(rep.Parked) > 0 {
		var held uint64
		for _, p := range rep.Parked {
			held += p.LagMsgs
		}
		fmt.Fprintf(w, "parked cursors towards %s: %d, holding %d messages (released by --confirm)\n", rep.Region, len(rep.Parked), held)
	}
	if len(rep.Stale) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tSTALE POSITIONS\tROUNDS FAILED\tTRIES\tRETRY AT\tLAST ERROR")
		for _, s := range rep.Stale {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", s.Topic, strings.Join(s.Remotes, ","), s.Rounds, s.Tries, s.RetryAt.Format("15:04:05"), s.LastError)
		}
		tw.Flush()
	}
	if len(rep.Unanswered) > 0 {
		slices.Sort(rep.Unanswered)
		fmt.Fprintf(w, "brokers that did not answer: %s\n", strings.Join(rep.Unanswered, ", "))
	}
}
