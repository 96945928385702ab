package drill

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable prints r as the human table of `strata drill failover`,
// followed by one "WARN" line per warning and one "FAIL" line per
// violation (none: "PASS").
func WriteTable(w io.Writer, r Report, v []Violation) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	opt := func(p *float64) string {
		if p == nil {
			return "never"
		}
		return fmt.Sprintf("%.3fs", *p)
	}
	rows := [][2]string{
		{"drill", fmt.Sprintf("failover %s (%s), clients moved to %s, outage %.1fs", r.Region, r.Mode, r.Survivor, r.OutageS)},
		{"regions", strings.Join(r.Regions, " ")},
		{"published", fmt.Sprintf("%d acknowledged (%d in %s before the cut at %.1f msgs/s of %s asked, %d after in %s)",
			r.Published.Total, r.Published.InRegion, r.Region, r.Published.RatePerS, num(r.Load), r.Published.InSurvivors, r.Survivor)},
		{"RPO", fmt.Sprintf("%d msgs = %.3fs of traffic (oldest missing acked %.3fs before the cut)", r.RPO.Msgs, r.RPO.S, r.RPO.OldestAgeS)},
		{"RTO publish", opt(r.RTO.PublishS) + " (cut → first ack in " + r.Survivor + ")"},
		{"RTO consume", opt(r.RTO.ConsumeS) + " (cut → first delivery in " + r.Survivor + ")"},
		{"lost", fmt.Sprintf("%d", r.Lost) + lostDetail(r)},
		{"duplicates", fmt.Sprintf("%d delivered, %d redeliveries (bound %d = %.1f msgs/s × %.1fs + 1: %s), %d stored twice",
			r.Duplicates.Delivered, r.Duplicates.Redeliveries, r.Duplicates.Bound, r.Duplicates.ConsumeRatePerS,
			r.Duplicates.SyncIntervalS, within(r.Duplicates.WithinBound), r.Duplicates.StoredTwice)},
		{"catch-up", catchUp(r)},
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, x := range r.Warnings {
		if _, err := fmt.Fprintln(w, "WARN", x); err != nil {
			return err
		}
	}
	if len(v) == 0 {
		_, err := fmt.Fprintln(w, "PASS")
		return err
	}
	for _, x := range v {
		if _, err := fmt.Fprintln(w, "FAIL", x.String()); err != nil {
			return err
		}
	}
	return nil
}

func lostDetail(r Report) string {
	if r.Lost == 0 {
		return ""
	}
	var parts []string
	for _, reg := range r.Regions {
		if n := r.MissingByRegion[reg]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s lacks %d", reg, n))
		}
	}
	return " (" + strings.Join(parts, ", ") + "; e.g. " + strings.Join(r.LostIDs, " ") + ")"
}

func within(ok bool) string {
	if ok {
		return "within"
	}
	return "EXCEEDED"
}

func catchUp(r Report) string {
	if !r.CaughtUp {
		return "not caught up before the deadline"
	}
	return fmt.Sprintf("%.3fs (heal → every acknowledged message in every region)", *r.CatchUpS)
}
