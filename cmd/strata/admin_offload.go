package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/admin"

	"github.com/stratamesh/strata/internal/status"
	"github.com/stratamesh/strata/topology"
)

// offloadAnswer is a broker's answer on /admin/v1/topics/…/offload.
type offloadAnswer struct {
	Region  string               `json:"region"`
	Topic   string               `json:"topic"`
	Tier    admin.TierInfo       `json:"tier"`
	Offload *admin.OffloadStatus `json:"offload"`
}

// addOffloadCommands adds `offload` and `offload-status` to `strata admin
// topics` (ARCHITECTURE §6: tiered storage).
func addOffloadCommands(cmd *cobra.Command, flags *adminFlags) {
	var keep string
	var wait bool
	off := &cobra.Command{
		Use:   "offload TENANT/NAMESPACE/TOPIC",
		Short: "Offload a topic's closed ledgers to the region's tier now",
		Long: "Copy a topic's closed ledgers to its region's tier (fs, S3 or GCS), oldest first, until\n" +
			"at most --keep bytes of its data are not offloaded (default 0: every closed ledger),\n" +
			"whatever the namespace's offload threshold. Bookie copies are deleted after the\n" +
			"namespace's deletion lag (offload.deletion_lag; 4h in a namespace without an offload policy).\n" +
			"Only closed ledgers are offloaded: the open one once it rolls over. Consumers read offloaded\n" +
			"ledgers from the tier without noticing.\n" +
			"With --wait it shows the progress until the offload is done. Needs --region when the\n" +
			"mesh has several regions (each region has its own tier).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTopicArg(args[0]); err != nil {
				return err
			}
			size, err := topology.ParseSize(keep)
			if err != nil {
				return fmt.Errorf("--keep: %w", err)
			}
			urls, order, err := flags.roleTargets("broker")
			if err != nil {
				return err
			}
			if len(order) != 1 {
				return fmt.Errorf("the mesh has %d regions (%s): say which with --region", len(order), strings.Join(order, ", "))
			}
			path := "/admin/v1/topics/" + args[0] + "/offload"
			keepBytes := int64(size)
			client := flags.client()
			var a offloadAnswer
			if err := sendFirst(cmd.Context(), flags, client, http.MethodPost, urls[order[0]], path, admin.OffloadRequest{KeepBytes: &keepBytes}, &a); err != nil {
				return err
			}
			last := ""
			for wait && a.Offload != nil && (a.Offload.Requested || a.Offload.Running != nil) {
				if line := offloadProgress(a.Offload); !flags.json && line != last {
					fmt.Fprintln(cmd.OutOrStdout(), line)
					last = line
				}
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(500 * time.Millisecond):
				}
				a = offloadAnswer{} // a field left out of the answer is not the last one's
				if err := sendFirst(cmd.Context(), flags, client, http.MethodGet, urls[order[0]], path, nil, &a); err != nil {
					return err
				}
			}
			if flags.json {
				return printJSON(cmd, a)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			printOffload(tw, a)
			if err := tw.Flush(); err != nil {
				return err
			}
			if st := a.Offload; st != nil && st.Running == nil && !st.Requested && st.LastError == "" && onBookiesOnly(st) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "nothing (more) to offload: every closed ledger is in the tier; the open ledger is offloaded once it rolls over (the region's rollover limits)")
			}
			if a.Offload != nil && a.Offload.LastError != "" {
				return fmt.Errorf("offload of %s failed (will retry at %s): %s", args[0], a.Offload.NextRetry.UTC().Format(time.RFC3339), a.Offload.LastError)
			}
			return nil
		},
	}
	off.Flags().StringVar(&keep, "keep", "0", "bytes of the topic's newest data to leave on bookies (units B KB MB GB KiB MiB GiB)")
	off.Flags().BoolVar(&wait, "wait", false, "show the progress until the offload is done")
	cmd.AddCommand(off)
	cmd.AddCommand(&cobra.Command{
		Use:   "offload-status TENANT/NAMESPACE/TOPIC",
		Short: "Where a topic's ledgers are (bookies, tier) and the progress of its offloads, per region",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if err := checkTopicArg(args[0]); err != nil {
				return err
			}
			all, failed, err := perRegion[offloadAnswer](cmd, flags, "broker", "/admin/v1/topics/"+args[0]+"/offload", true)
			if err != nil {
				return err
			}
			if len(all) == 0 && failed == 0 {
				return fmt.Errorf("no region has topic %s", args[0])
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
			for i, a := range all {
				if i > 0 {
					fmt.Fprintln(tw)
				}
				printOffload(tw, a)
			}
			return tw.Flush()
		},
	})
}

// checkTopicArg checks a TENANT/NAMESPACE/TOPIC argument.
func checkTopicArg(arg string) error {
	p := strings.Split(arg, "/")
	if len(p) != 3 || !validName(p[0]) || !validName(p[1]) || !validName(p[2]) {
		return fmt.Errorf("%q is not TENANT/NAMESPACE/TOPIC (letters, digits, '-' and '_')", arg)
	}
	return nil
}

// sendFirst sends a request to the first of a region's brokers that
// answers (an API error is an answer).
func sendFirst(ctx context.Context, flags *adminFlags, client *admin.Client, method string, urls []string, path string, body, v any) error {
	var err error
	for _, u := range urls {
		c, cancel := context.WithTimeout(ctx, flags.timeout)
		err = client.Send(c, method, u, path, body, v)
		cancel()
		var apiErr *admin.APIError
		if err == nil || errors.As(err, &apiErr) {
			return err
		}
	}
	return err
}

// onBookiesOnly counts the closed ledgers without a tier copy.
func onBookiesOnly(st *admin.OffloadStatus) int {
	n := 0
	for _, l := range st.Ledgers {
		if l.Where == "bookies" {
			n++
		}
	}
	return n
}

func offloadProgress(st *admin.OffloadStatus) string {
	if r := st.Running; r != nil {
		pct := 0.0
		if r.Total > 0 {
			pct = 100 * float64(r.Bytes) / float64(r.Total)
		}
		return fmt.Sprintf("offloading ledger %d: %d entries, %d of %d bytes (%.0f%%)", r.Ledger, r.Entries, r.Bytes, r.Total, pct)
	}
	return fmt.Sprintf("offload requested: %d ledgers offloaded so far", st.OffloadedLedgers)
}

// printOffload prints one region's offload status of a topic.
func printOffload(tw *tabwriter.Writer, a offloadAnswer) {
	st := a.Offload
	if st == nil {
		return
	}
	policy := "on request only"
	if st.Threshold != nil {
		policy = "offload past " + status.BytesText(*st.Threshold) + " not offloaded"
	}
	tier := "none"
	if st.Tier {
		tier = a.Tier.Kind
		if where := a.Tier.Where; where != "" {
			tier += " " + where
		}
	}
	fmt.Fprintf(tw, "region\t%s\ntopic\t%s\ntier\t%s\npolicy\t%s, bookie copies deleted %s later\n", a.Region, a.Topic, tier, policy, st.DeletionLag)
	fmt.Fprintf(tw, "offloaded\t%d ledgers, %s in the tier\non bookies\t%s\n", st.OffloadedLedgers, status.BytesText(st.OffloadedBytes), status.BytesText(st.BookieBytes))
	if st.Running != nil || st.Requested {
		fmt.Fprintf(tw, "in progress\t%s\n", offloadProgress(st))
	}
	if st.LastError != "" {
		fmt.Fprintf(tw, "last error\t%s (at %s; next try %s)\n", st.LastError, st.LastErrorAt.UTC().Format(time.RFC3339), st.NextRetry.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(tw, "LEDGER\tFIRST SEQ\tMSGS\tBYTES\tWHERE\tOFFLOADED AT")
	for _, l := range st.Ledgers {
		at := ""
		if !l.At.IsZero() {
			at = l.At.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\n", l.ID, l.FirstSeq, l.Msgs, l.Bytes, l.Where, at)
	}
}
