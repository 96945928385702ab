package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/admin"
)

// newAdminLedgers is `strata admin ledgers list|show ID|read ID`.
func newAdminLedgers(flags *adminFlags) *cobra.Command {
	cmd := commandGroup(&cobra.Command{Use: "ledgers", Aliases: []string{"ledger"}, Short: "Ledgers of each region (metadata, LAC, entries)"})
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List each region's ledgers: id, state, quorums, last entry, length, ensembles",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			type answer struct {
				Region  string             `json:"region"`
				Ledgers []admin.LedgerView `json:"ledgers"`
			}
			all, failed, err := perRegion[answer](cmd, flags, "", "/admin/v1/ledgers", false)
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
			fmt.Fprintln(tw, "REGION\tLEDGER\tSTATE\tE/QW/QA\tLAST ENTRY\tLENGTH\tENSEMBLES")
			for _, a := range all {
				for _, l := range a.Ledgers {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%d/%d/%d\t%s\t%s\t%s\n", a.Region, l.LedgerID, l.State, l.EnsembleSize, l.WriteQuorum, l.AckQuorum,
						lastEntryText(l), lengthText(l), segmentsText(l))
				}
			}
			return tw.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "show ID",
		Short: "Show one ledger: metadata, segments and LAC (needs --region when the mesh has several)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseLedgerID(args[0])
			if err != nil {
				return err
			}
			urls, err := oneRegion(flags)
			if err != nil {
				return err
			}
			var l admin.LedgerView
			if err := getFirst(cmd.Context(), flags, flags.client(), urls, "/admin/v1/ledgers/"+strconv.FormatInt(id, 10), &l); err != nil {
				return err
			}
			if err := sameRegion(flags, l.Region); err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, l)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "region %s  ledger %d  state %s  ensemble %d  write quorum %d  ack quorum %d\n", l.Region, l.LedgerID, l.State, l.EnsembleSize, l.WriteQuorum, l.AckQuorum)
			lac := "-"
			if l.LAC != nil {
				lac = strconv.FormatInt(*l.LAC, 10)
			}
			length := lengthText(l)
			if length != "-" {
				length += " bytes"
			}
			fmt.Fprintf(out, "last entry %s  length %s  LAC %s\n", lastEntryText(l), length, lac)
			for _, s := range l.Segments {
				fmt.Fprintf(out, "  from entry %d: %s\n", s.FirstEntry, joinIDs(s.Ensemble))
			}
			return nil
		},
	})
	var from, to int64
	read := &cobra.Command{
		Use:   "read ID",
		Short: "Print entries --from..--to of a ledger (stops at the LAC; never fences)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseLedgerID(args[0])
			if err != nil {
				return err
			}
			if from < 0 {
				return fmt.Errorf("--from %d: entry ids start at 0", from)
			}
			if cmd.Flags().Changed("to") && to < from {
				return fmt.Errorf("--from %d --to %d: need from <= to", from, to)
			}
			urls, err := oneRegion(flags)
			if err != nil {
				return err
			}
			path := fmt.Sprintf("/admin/v1/ledgers/%d/entries?from=%d", id, from)
			if cmd.Flags().Changed("to") {
				path += fmt.Sprintf("&to=%d", to)
			}
			var v admin.EntriesView
			if err := getFirst(cmd.Context(), flags, flags.client(), urls, path, &v); err != nil {
				return err
			}
			if err := sameRegion(flags, v.Region); err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, v)
			}
			out := cmd.OutOrStdout()
			for _, e := range v.Entries {
				fmt.Fprintf(out, "%d\t%d B\t%s\n", e.ID, len(e.Payload), printable(e.Payload))
			}
			switch {
			case v.To < v.From:
				fmt.Fprintf(cmd.ErrOrStderr(), "region %s ledger %d: no entries from %d (LAC %d)\n", v.Region, v.Ledger, v.From, v.LAC)
			default:
				fmt.Fprintf(cmd.ErrOrStderr(), "region %s ledger %d: entries %d..%d of LAC %d\n", v.Region, v.Ledger, v.From, v.To, v.LAC)
			}
			if want := to; v.To < v.LAC && (!cmd.Flags().Changed("to") || v.To < want) && v.To >= v.From {
				fmt.Fprintf(cmd.ErrOrStderr(), "stopped at entry %d (at most 1000 entries or 4 MiB per call): continue with --from %d\n", v.To, v.To+1)
			}
			return nil
		},
	}
	read.Flags().Int64Var(&from, "from", 0, "first entry id")
	read.Flags().Int64Var(&to, "to", 0, "last entry id (default: from+999; always capped at the LAC)")
	cmd.AddCommand(read)
	return cmd
}

func getFirst(ctx context.Context, flags *adminFlags, client *admin.Client, urls []string, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, flags.timeout*time.Duration(max(1, len(urls))))
	defer cancel()
	return client.GetFirst(ctx, urls, path, v)
}

// sameRegion refuses an answer from another region than --region asked
// for (possible with --url, which names a node, not a region).
func sameRegion(flags *adminFlags, got string) error {
	if flags.region != "" && got != "" && got != flags.region {
		return fmt.Errorf("the node asked is in region %s, not %s (ledger ids are per region)", got, flags.region)
	}
	return nil
}

// oneRegion returns the admin URLs of the region a per-ledger command is
// about: --region, or the only region.
func oneRegion(flags *adminFlags) ([]string, error) {
	urls, order, err := flags.targets()
	if err != nil {
		return nil, err
	}
	if len(order) != 1 {
		return nil, fmt.Errorf("ledger ids are per region: give --region (one of %s)", strings.Join(order, ", "))
	}
	return urls[order[0]], nil
}

func parseLedgerID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 0 {
		return 0, fmt.Errorf("ledger id %q: want an integer from 0 to %d", s, int64(math.MaxInt64))
	}
	return id, nil
}

func lastEntryText(l admin.LedgerView) string {
	if l.State != admin.LedgerClosed && l.LastEntryID < 0 {
		return "-"
	}
	return strconv.FormatInt(l.LastEntryID, 10)
}

// lengthText is a ledger's length in bytes, "-" while it is open: the
// metadata records it when the ledger is closed (BookKeeper's ledger
// metadata likewise); `ledgers show` gives an open ledger's LAC.
func lengthText(l admin.LedgerView) string {
	if l.State != admin.LedgerClosed {
		return "-"
	}
	return strconv.FormatInt(l.Length, 10)
}

func segmentsText(l admin.LedgerView) string {
	var parts []string
	for _, s := range l.Segments {
		parts = append(parts, fmt.Sprintf("%d:[%s]", s.FirstEntry, joinIDs(s.Ensemble)))
	}
	return strings.Join(parts, " ")
}

func joinIDs[T ~string](ids []T) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	return strings.Join(s, ",")
}

// printable shows a payload as text when it is valid UTF-8 without control
// characters, else as a quoted Go string; long payloads are cut at 200 bytes.
func printable(p []byte) string {
	cut := ""
	if len(p) > 200 {
		p, cut = p[:200], "…"
	}
	if utf8.Valid(p) && !strings.ContainsFunc(string(p), func(r rune) bool { return r < 0x20 && r != '\t' }) {
		return string(p) + cut
	}
	return strconv.Quote(string(p)) + cut
}

func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
