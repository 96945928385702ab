package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/admin"
)

// newAdminTopics is `strata admin topics list [t[/ns]] | stats t/ns/topic |
// subscriptions t/ns/topic | create t/ns/topic | delete t/ns/topic |
// create-subscription | delete-subscription | reset-subscription …` (admin API: /admin/v1/topics…, served by
// brokers).
func newAdminTopics(flags *adminFlags) *cobra.Command {
	cmd := commandGroup(&cobra.Command{Use: "topics", Aliases: []string{"topic"}, Short: "Topics of each region: owners, state, ledgers, subscriptions"})
	cmd.AddCommand(&cobra.Command{
		Use:   "list [tenant[/namespace]]",
		Short: "List each region's topics with their stream name, subjects and owner",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			path, err := scopedPath("/admin/v1/topics", args)
			if err != nil {
				return err
			}
			type answer struct {
				Region string               `json:"region"`
				Topics []admin.TopicSummary `json:"topics"`
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
			fmt.Fprintln(tw, "REGION\tTOPIC\tSTREAM\tSUBJECTS\tOWNER")
			for _, a := range all {
				for _, t := range a.Topics {
					owner := t.Owner
					if owner == "" {
						owner = "(none)"
					}
					fmt.Fprintf(tw, "%s\t%s/%s/%s\t%s\t%s\t%s\n", a.Region, t.Tenant, t.Namespace, t.Topic, t.Stream, strings.Join(t.Subjects, ","), owner)
				}
			}
			return tw.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "stats TENANT/NAMESPACE/TOPIC",
		Short: "A topic's live state from its owner: messages, sequences, ledgers, subscriptions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return topicCommand(cmd, flags, args[0], "/stats", func(tw *tabwriter.Writer, region string, st *admin.TopicStats) {
				fmt.Fprintf(tw, "region\t%s\ntopic\t%s/%s/%s\nstream\t%s\nsubjects\t%s\nowner\t%s\nretention\t%s\n",
					region, st.Tenant, st.Namespace, st.Topic, st.Stream, strings.Join(st.Subjects, ","), st.Owner, st.Retention)
				fmt.Fprintf(tw, "messages\t%d\nbytes\t%d\nfirst seq\t%d\nlast seq\t%d\nsubjects seen\t%d\n", st.Messages, st.Bytes, st.FirstSeq, st.LastSeq, st.NumSubjects)
				var ls []string
				for _, l := range st.Ledgers {
					where := ""
					if o := l.Offload; o != nil && o.BookieDeleted {
						where = ", in the tier"
					} else if o != nil {
						where = ", on bookies and in the tier"
					}
					ls = append(ls, fmt.Sprintf("%d (%s, from seq %d%s)", l.ID, l.State, l.FirstSeq, where))
				}
				fmt.Fprintf(tw, "ledgers\t%s\n", strings.Join(ls, " "))
				if o := st.Offload; o != nil && o.OffloadedLedgers > 0 {
					fmt.Fprintf(tw, "offloaded\t%d ledgers in the tier (%d bytes); %d bytes on bookies (admin topics offload-status)\n", o.OffloadedLedgers, o.OffloadedBytes, o.BookieBytes)
				}
				fmt.Fprintf(tw, "subscriptions\t%d\n", len(st.Subscriptions))
				for _, s := range st.Subscriptions {
					fmt.Fprintf(tw, "  %s\tack floor %d, delivered %d, unacked %d, backlog %d\n", s.Name, s.AckFloor, s.Delivered, s.NumAckPending, s.Backlog)
				}
				printReplication(tw, st.Replication)
			})
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "subscriptions TENANT/NAMESPACE/TOPIC",
		Short: "A topic's durable subscriptions (cursors): ack floor, delivered, unacked, backlog",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return topicCommand(cmd, flags, args[0], "/stats", func(tw *tabwriter.Writer, region string, st *admin.TopicStats) {
				printSubscriptions(tw, region, st.Subscriptions)
			})
		},
	})
	var replicated bool
	var filter string
	create := &cobra.Command{
		Use:   "create-subscription TENANT/NAMESPACE/TOPIC SUBSCRIPTION",
		Short: "Create a durable subscription (pull, explicit acks); --replicated makes it mesh-wide",
		Long: "Create (or update) a durable subscription of a topic: a pull consumer with explicit acks,\n" +
			"which NATS clients consume as STREAM/SUBSCRIPTION. With --replicated it is a replicated\n" +
			"subscription: created in every region of the namespace's replication list, and what is\n" +
			"acknowledged in one region is acknowledged in the others within about a second (the\n" +
			"NATS API's way: consumer metadata strata.replicated=true). Needs --region when the mesh\n" +
			"has several regions.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return subscriptionWrite(cmd, flags, http.MethodPut, args[0], args[1], admin.SubscriptionRequest{Replicated: replicated, FilterSubject: filter})
		},
	}
	create.Flags().BoolVar(&replicated, "replicated", false, "replicate the subscription's acknowledgements to the other regions")
	create.Flags().StringVar(&filter, "filter", "", "only messages whose subject matches this filter")
	cmd.AddCommand(create)
	cmd.AddCommand(&cobra.Command{
		Use:   "delete-subscription TENANT/NAMESPACE/TOPIC SUBSCRIPTION",
		Short: "Delete a durable subscription (a replicated one in every region)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return subscriptionWrite(cmd, flags, http.MethodDelete, args[0], args[1], nil)
		},
	})
	addTopicWrites(cmd, flags)
	addOffloadCommands(cmd, flags)
	return cmd
}

// subscriptionWrite sends a subscription PUT or DELETE to a broker of the
// one region (--region) and prints the topic's subscriptions there.
func subscriptionWrite(cmd *cobra.Command, flags *adminFlags, method, topic, sub string, body any) error {
	if err := checkTopicArg(topic); err != nil {
		return err
	}
	if !validName(sub) {
		return fmt.Errorf("subscription name %q: use letters, digits, '-' and '_'", sub)
	}
	var a struct {
		Region        string                    `json:"region"`
		Subscriptions []admin.SubscriptionStats `json:"subscriptions"`
	}
	if err := regionSend(cmd, flags, method, "/admin/v1/topics/"+topic+"/subscriptions/"+sub, body, &a); err != nil {
		return err
	}
	if flags.json {
		return printJSON(cmd, a)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	printSubscriptions(tw, a.Region, a.Subscriptions)
	return tw.Flush()
}

// regionSend sends a write to the brokers of the one region (--region
// when the mesh has several), the next broker when one does not answer,
// and decodes the answer into out.
func regionSend(cmd *cobra.Command, flags *adminFlags, method, path string, body, out any) error {
	urls, order, err := flags.roleTargets("broker")
	if err != nil {
		return err
	}
	if len(order) != 1 {
		return fmt.Errorf("the mesh has %d regions (%s): say which with --region", len(order), strings.Join(order, ", "))
	}
	client := flags.client()
	for _, u := range urls[order[0]] {
		ctx, cancel := context.WithTimeout(cmd.Context(), flags.timeout)
		err = client.Send(ctx, method, u, path, body, out)
		cancel()
		var apiErr *admin.APIError
		if err == nil || errors.As(err, &apiErr) {
			break
		}
	}
	return err
}

// addTopicWrites adds `topics create`, `topics delete` and `topics
// reset-subscription` (PUT and DELETE /admin/v1/topics/{t}/{ns}/{topic},
// PUT …/subscriptions/{sub} with reset_to).
func addTopicWrites(cmd *cobra.Command, flags *adminFlags) {
	cmd.AddCommand(&cobra.Command{
		Use:   "create TENANT/NAMESPACE/TOPIC",
		Short: "Create a topic in its namespace, with the namespace's policies",
		Long: "Create a topic in its namespace with the namespace's policies (retention, limits, dedup\n" +
			"window), as publishing to it does when the namespace auto-creates topics; the other regions\n" +
			"of the namespace's replication list are told of it. Creating a topic that exists changes\n" +
			"nothing. Needs --region when the mesh has several regions.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTopicArg(args[0]); err != nil {
				return err
			}
			var a admin.TopicCreated
			if err := regionSend(cmd, flags, http.MethodPut, "/admin/v1/topics/"+args[0], nil, &a); err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, a)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "REGION\tTOPIC\tSTREAM\tSUBJECTS\tOWNER\tCREATED")
			if st := a.Topic; st != nil {
				owner := st.Owner
				if owner == "" {
					owner = "(none yet)"
				}
				fmt.Fprintf(tw, "%s\t%s/%s/%s\t%s\t%s\t%s\t%t\n", a.Region, st.Tenant, st.Namespace, st.Topic, st.Stream, strings.Join(st.Subjects, ","), owner, a.Created)
			}
			return tw.Flush()
		},
	})
	var force bool
	del := &cobra.Command{
		Use:   "delete TENANT/NAMESPACE/TOPIC",
		Short: "Delete a topic in every region; one with messages or subscriptions needs --force",
		Long: "Delete a topic: its subscriptions, cursors, ledgers and metadata, at its owner; the other\n" +
			"regions delete their copy when the deletion's tombstone reaches them. A topic that holds\n" +
			"messages or subscriptions is refused (not_empty) unless --force. Needs --region when the\n" +
			"mesh has several regions.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTopicArg(args[0]); err != nil {
				return err
			}
			path := "/admin/v1/topics/" + args[0]
			if force {
				path += "?force=true"
			}
			var a admin.TopicDeleted
			if err := regionSend(cmd, flags, http.MethodDelete, path, nil, &a); err != nil {
				return err
			}
			if flags.json {
				return printJSON(cmd, a)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "REGION\tTOPIC\tDELETED\tMESSAGES\tSUBSCRIPTIONS")
			fmt.Fprintf(tw, "%s\t%s\t%t\t%d\t%s\n", a.Region, a.Topic, a.Deleted, a.Messages, strings.Join(a.Subscriptions, ","))
			return tw.Flush()
		},
	}
	del.Flags().BoolVar(&force, "force", false, "delete it even when it holds messages or subscriptions")
	cmd.AddCommand(del)
	var seq uint64
	var at string
	reset := &cobra.Command{
		Use:   "reset-subscription TENANT/NAMESPACE/TOPIC SUBSCRIPTION (--seq N | --time T)",
		Short: "Reset a durable subscription's position: delivery restarts at a sequence or a time",
		Long: "Reset a durable subscription so that delivery restarts at stream sequence --seq, or at the\n" +
			"first message stored at or after --time (RFC 3339). The subscription is deleted and created\n" +
			"again there (deliver policy by_start_sequence or by_start_time), keeping its configuration;\n" +
			"unacknowledged deliveries are forgotten. A replicated subscription is reset in every region.\n" +
			"Needs --region when the mesh has several regions.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			seqSet, timeSet := cmd.Flags().Changed("seq"), cmd.Flags().Changed("time")
			if seqSet == timeSet {
				return errors.New("give one of --seq and --time")
			}
			var to admin.ResetTo
			if seqSet {
				if seq == 0 {
					return errors.New("--seq: stream sequences start at 1")
				}
				to.Seq = &seq
			} else {
				if _, err := time.Parse(time.RFC3339Nano, at); err != nil {
					return fmt.Errorf("--time %q is not an RFC 3339 time (e.g. 2025-01-02T15:04:05Z)", at)
				}
				to.Time = at
			}
			return subscriptionWrite(cmd, flags, http.MethodPut, args[0], args[1], admin.SubscriptionRequest{ResetTo: &to})
		},
	}
	reset.Flags().Uint64Var(&seq, "seq", 0, "restart delivery at this stream sequence")
	reset.Flags().StringVar(&at, "time", "", "restart delivery at the first message stored at or after this time (RFC 3339)")
	cmd.AddCommand(reset)
}

// printSubscriptions prints a region's subscriptions of a topic.
func printSubscriptions(tw *tabwriter.Writer, region string, subs []admin.SubscriptionStats) {
	fmt.Fprintln(tw, "REGION\tSUBSCRIPTION\tREPLICATED\tACK POLICY\tACK FLOOR\tDELIVERED\tUNACKED\tREDELIVERED\tBACKLOG")
	for _, s := range subs {
		fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%d\t%d\t%d\t%d\t%s\n", region, s.Name, s.Replicated, s.AckPolicy, s.AckFloor, s.Delivered, s.NumAckPending, s.NumRedelivered, strconv.FormatUint(s.Backlog, 10))
	}
}

// topicCommand fetches one topic's stats from each region that has it and
// prints them with show (or as JSON).
func topicCommand(cmd *cobra.Command, flags *adminFlags, arg, suffix string, show func(*tabwriter.Writer, string, *admin.TopicStats)) (err error) {
	p := strings.Split(arg, "/")
	if len(p) != 3 || !validName(p[0]) || !validName(p[1]) || !validName(p[2]) {
		return fmt.Errorf("%q is not TENANT/NAMESPACE/TOPIC (letters, digits, '-' and '_')", arg)
	}
	type answer struct {
		Region string            `json:"region"`
		Topic  *admin.TopicStats `json:"topic"`
	}
	// A 404 means the topic lives in other regions.
	all, failed, err := perRegion[answer](cmd, flags, "broker", "/admin/v1/topics/"+arg+suffix, true)
	if err != nil {
		return err
	}
	if len(all) == 0 && failed == 0 {
		return fmt.Errorf("no region has topic %s", arg)
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
	first := true
	for _, a := range all {
		if a.Topic == nil {
			continue
		}
		if !first && suffix == "/stats" {
			fmt.Fprintln(tw) // a blank line between regions' blocks
		}
		first = false
		show(tw, a.Region, a.Topic)
	}
	return tw.Flush()
}

// scopedPath is base, narrowed by an optional "tenant[/namespace]"
// argument to base/tenant[/namespace] (the list commands' scope).
func scopedPath(base string, args []string) (string, error) {
	if len(args) == 0 {
		return base, nil
	}
	t, ns, hasNS := strings.Cut(args[0], "/")
	if !validName(t) || (hasNS && !validName(ns)) {
		return "", fmt.Errorf("%q is not tenant or tenant/namespace", args[0])
	}
	if ns != "" {
		return base + "/" + t + "/" + ns, nil
	}
	return base + "/" + t, nil
}

// validName is Strata's name token: [A-Za-z0-9_-]+.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// printReplication prints a topic's replicator cursors (lag towards each
// remote region) and the origin streams replicated into it.
func printReplication(tw *tabwriter.Writer, r *admin.TopicReplication) {
	if r == nil {
		return
	}
	fmt.Fprintf(tw, "incarnation\t%s\nlocal origin seq\t%d\n", r.Incarnation, r.LastOriginSeq)
	fmt.Fprintf(tw, "replicating to\t%d regions\n", len(r.Cursors))
	for _, c := range r.Cursors {
		line := fmt.Sprintf("%s, acked %d, lag %d msgs %d bytes %.1fs", c.State, c.Position, c.LagMsgs, c.LagBytes, c.LagSeconds)
		if !c.LastSuccess.IsZero() {
			line += ", last success " + c.LastSuccess.UTC().Format(time.RFC3339)
		}
		if c.GapRecords > 0 {
			line += fmt.Sprintf(", %d gap records", c.GapRecords)
		}
		if c.LastError != "" {
			line += ", last error: " + c.LastError
		}
		fmt.Fprintf(tw, "  %s (%s)\t%s\n", c.Remote, c.Cursor, line)
	}
	fmt.Fprintf(tw, "replicated from\t%d origin streams, %d messages lost to retention at their origin\n", len(r.Origins), r.OriginsLost)
	for _, o := range r.Origins {
		fmt.Fprintf(tw, "  %s/%s\thigh-water mark %d, lost %d\n", o.Region, o.Incarnation, o.HWM, o.Lost)
	}
}
