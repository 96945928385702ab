package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/admin"
)

// newAdminRegions is `strata admin regions …`: the parent of the region
// commands (status here; others add their own subcommand).
func newAdminRegions(flags *adminFlags) *cobra.Command {
	cmd := commandGroup(&cobra.Command{Use: "regions", Aliases: []string{"region"}, Short: "Regions: reachability, catch-up and client failover as each region sees them; decommission"})
	cmd.AddCommand(newAdminRegionsStatus(flags), newAdminDecommission(flags))
	return cmd
}

// newAdminRegionsStatus is `strata admin regions status [--json]`: GET
// /admin/v1/regions on every broker of every region (or --region's).
func newAdminRegionsStatus(flags *adminFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Each region's view of the others: reachable, catch-up state and lag, guests held and when they switch back",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			urls, order, err := flags.roleTargets("broker")
			if err != nil {
				return err
			}
			client := flags.client()
			var views []admin.RegionsView
			failed := 0
			for _, r := range order {
				for _, u := range urls[r] {
					ctx, cancel := context.WithTimeout(cmd.Context(), flags.timeout)
					var v admin.RegionsView
					err := client.Get(ctx, u, "/admin/v1/regions", &v)
					cancel()
					if err != nil { // report it, go on with the other brokers
						fmt.Fprintf(cmd.ErrOrStderr(), "strata: region %s: broker %s: %v\n", r, u, err)
						failed++
						continue
					}
					views = append(views, v)
				}
			}
			defer func() {
				if failed > 0 && err == nil {
					err = exitError{code: 1}
				}
			}()
			if flags.json {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(nonNilViews(views))
			}
			return printRegionViews(cmd.OutOrStdout(), mergeRegionViews(views), time.Now())
		},
	}
}

func nonNilViews(v []admin.RegionsView) []admin.RegionsView {
	if v == nil {
		return []admin.RegionsView{}
	}
	return v
}

// regionRow is one (viewing region, remote region) pair, merged over the
// viewing region's brokers that answered.
type regionRow struct {
	From, To   string
	Brokers    int // answering brokers of From
	Reachable  int // of them, how many reach To
	CatchUp    string
	LagMsgs    uint64
	LagSeconds float64
	// SwitchBack is the phase of the broker furthest from home (a guest
	// there stays until its own broker switches back), SwitchBackAt the
	// latest switch-back time among brokers still settling.
	SwitchBack   string
	SwitchBackAt time.Time
	Guests       int
}

var catchUpRank = map[string]int{admin.CatchUpCaughtUp: 0, admin.CatchUpCatchingUp: 1, admin.CatchUpStalled: 2, admin.CatchUpUnreachable: 3}
var phaseRank = map[string]int{"home": 0, "settling": 1, "returned": 2, "away": 3}

// mergeRegionViews folds every broker's view into one row per (viewing
// region, remote region): lag messages and guests summed, lag seconds the
// largest, the worst catch-up state, the phase furthest from home.
func mergeRegionViews(views []admin.RegionsView) []regionRow {
	idx := map[[2]string]*regionRow{}
	var keys [][2]string
	for _, v := range views {
		for _, s := range v.Regions {
			k := [2]string{v.Region, s.Region}
			row := idx[k]
			if row == nil {
				row = &regionRow{From: v.Region, To: s.Region, CatchUp: s.CatchUp, SwitchBack: s.SwitchBack}
				idx[k] = row
				keys = append(keys, k)
			}
			row.Brokers++
			if s.Reachable {
				row.Reachable++
			}
			if catchUpRank[s.CatchUp] > catchUpRank[row.CatchUp] {
				row.CatchUp = s.CatchUp
			}
			if phaseRank[s.SwitchBack] > phaseRank[row.SwitchBack] {
				row.SwitchBack = s.SwitchBack
			}
			if s.SwitchBackAt.After(row.SwitchBackAt) {
				row.SwitchBackAt = s.SwitchBackAt
			}
			row.LagMsgs += s.LagMsgs
			row.LagSeconds = max(row.LagSeconds, s.LagSeconds)
			row.Guests += s.Guests
		}
	}
	out := make([]regionRow, 0, len(keys))
	for _, k := range keys {
		r := *idx[k]
		if r.SwitchBack != "settling" {
			r.SwitchBackAt = time.Time{}
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b regionRow) int { return strings.Compare(a.From, b.From) })
	return out
}

// printRegionViews writes the rows as a table.
func printRegionViews(w io.Writer, rows []regionRow, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FROM\tREGION\tREACHABLE\tCATCH-UP\tLAG\tSWITCH-BACK\tGUESTS")
	for _, r := range rows {
		reach := "yes"
		switch {
		case r.Reachable == 0:
			reach = "no"
		case r.Reachable < r.Brokers:
			reach = fmt.Sprintf("%d/%d brokers", r.Reachable, r.Brokers)
		}
		lag := "-"
		if r.LagMsgs > 0 || r.LagSeconds > 0 {
			lag = fmt.Sprintf("%d msgs %.1fs", r.LagMsgs, r.LagSeconds)
		}
		sb := r.SwitchBack
		if !r.SwitchBackAt.IsZero() {
			sb += fmt.Sprintf(" (guests go home in %s)", r.SwitchBackAt.Sub(now).Round(100*time.Millisecond).String())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.From, r.To, reach, r.CatchUp, lag, sb, r.Guests)
	}
	return tw.Flush()
}
