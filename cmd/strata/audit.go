package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/audit"
	"github.com/stratamesh/strata/tenancy"
)

const auditLong = `Compare the regions of a running mesh end to end (issue 26).

For every replicated topic (namespaces whose replication list names at
least two regions; or the --namespace or --topic given) and every origin
stream (region, topic incarnation), each region's owner of the topic
reads its managed ledger once and answers the ranges of origin sequences
it holds with a checksum per span of 4096 (CRC-64 over origin sequence,
header block and payload; local sequences and times are not in it). Only
these summaries cross the network. A span whose checksums differ is
asked for again in finer spans, of that span only, until the differing
messages are named.

What is compared: a region's copy of an origin stream against the
origin region's own, from the lowest origin sequence both still hold
(lower ones count as trimmed by retention) up to what that region has
acknowledged — the origin's replicator cursor position towards it at the
first reading, or the highest sequence it holds when higher (copies are
stored gap-free, so holding n means holding everything up to n). Newer
messages are in flight (the replicator's lag) and are not differences.

Replicator cursors are read twice, --watch apart: a cursor that had a
backlog at the first reading and whose position did not move by the
second is reported stalled, whatever lag it reports; towards a region
that does not answer the audit it is reported unreachable instead.
--watch 0 reads them once: stall detection is off (said in the report).

Regions are asked in parallel. A region none of whose nodes answers a
cursor reading within --timeout (per node) is asked nothing more, and
the audit is incomplete; --max-time bounds the whole audit. Progress
lines go to stderr.

Findings: missing (the origin holds it, the region does not), missing at
origin, extra (above the origin's last origin sequence), differing
(content differs), duplicate, stalled.

Exit status: 0 the regions agree; 1 a difference or a stalled cursor was
found; 2 no difference was found but the audit is incomplete (a region
did not answer, or --max-time ran out), the arguments are wrong, or the
namespace or topic asked for does not exist or is not replicated.`

func newAudit() *cobra.Command {
	var flags adminFlags
	var nsFlag, topicFlag string
	var watch, summaryTimeout, maxTime time.Duration
	cmd := &cobra.Command{
		Use:   "audit [--namespace T/NS] [--topic T/NS/TOPIC] [--watch D] [--json]",
		Short: "Compare the regions' copies of replicated topics; report missing, extra and differing messages and stalled replicator cursors",
		Long:  auditLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bad := func(format string, a ...any) error {
				fmt.Fprintf(cmd.ErrOrStderr(), "strata audit: "+format+"\n", a...)
				return exitError{code: 2}
			}
			var scope auditScope
			if nsFlag != "" {
				n, err := tenancy.ParseNSName(nsFlag)
				if err != nil {
					return bad("--namespace %q: %v (want TENANT/NAMESPACE)", nsFlag, err)
				}
				scope.ns = &n
			}
			if topicFlag != "" {
				n, err := tenancy.ParseName(topicFlag)
				if err != nil {
					return bad("--topic %q: %v (want TENANT/NAMESPACE/TOPIC)", topicFlag, err)
				}
				if scope.ns != nil && (scope.ns.Tenant != n.Tenant || scope.ns.Namespace != n.Namespace) {
					return bad("--topic %s is not in --namespace %s", n, nsFlag)
				}
				scope.topic = &n
			}
			if watch < 0 {
				return bad("--watch %v: want a duration of 0 or more", watch)
			}
			if flags.timeout <= 0 || summaryTimeout <= 0 || maxTime <= 0 {
				return bad("--timeout, --summary-timeout and --max-time want a duration above 0")
			}
			urls, order, err := flags.roleTargets("broker")
			if err != nil {
				return bad("%v", err)
			}
			client := flags.client()
			counter := &countingTransport{next: client.HTTP.Transport}
			if counter.next == nil {
				counter.next = http.DefaultTransport
			}
			client.HTTP.Transport = counter
			sumClient := *client
			sumHTTP := *client.HTTP
			sumHTTP.Timeout = summaryTimeout
			sumClient.HTTP = &sumHTTP
			m := &adminMesh{cmd: cmd, flags: &flags, client: client, sumClient: &sumClient, sumTimeout: summaryTimeout, urls: urls, order: order, scope: scope}
			start := time.Now()
			ctx, cancel := context.WithTimeout(cmd.Context(), maxTime)
			defer cancel()
			progress := func(line string) {
				fmt.Fprintf(cmd.ErrOrStderr(), "strata audit: %s (%.1fs)\n", line, time.Since(start).Seconds())
			}
			rep, err := audit.Run(ctx, m, audit.Options{Watch: watch, Sleep: sleepCtx, Progress: progress})
			if err != nil {
				return bad("%v", err)
			}
			took := time.Since(start)
			if flags.json {
				out := struct {
					*audit.Report
					Exit        int     `json:"exit"`
					BytesMoved  int64   `json:"bytes_moved"`
					Seconds     float64 `json:"seconds"`
					WatchSecond float64 `json:"watch_seconds"`
				}{rep, rep.Exit(), counter.n.Load(), took.Seconds(), watch.Seconds()}
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(out); err != nil {
					return err
				}
			} else {
				printAudit(cmd.OutOrStdout(), rep, counter.n.Load(), took, watch)
			}
			if code := rep.Exit(); code != 0 {
				return exitError{code: code}
			}
			return nil
		},
	}
	flags.register(cmd)
	if f := cmd.PersistentFlags().Lookup("timeout"); f != nil {
		f.Usage = "how long to wait for one node's answer to a topic list or a cursor reading (a region none of whose nodes answers in time is asked nothing more; summaries: --summary-timeout)"
	}
	cmd.Flags().DurationVar(&summaryTimeout, "summary-timeout", 60*time.Second, "how long to wait for one node's summary of a topic (its owner reads the whole topic)")
	cmd.Flags().DurationVar(&maxTime, "max-time", 2*time.Minute, "bound on the whole audit: when it runs out, what was read is reported, incomplete (exit 2 unless a difference was found)")
	cmd.Flags().StringVar(&nsFlag, "namespace", "", "audit only this namespace's topics (TENANT/NAMESPACE)")
	cmd.Flags().StringVar(&topicFlag, "topic", "", "audit only this topic (TENANT/NAMESPACE/TOPIC)")
	cmd.Flags().DurationVar(&watch, "watch", 5*time.Second, "time between the two readings of the replicator cursors (a cursor with a backlog that does not move across it is stalled; 0 turns stall detection off)")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprintf(c.ErrOrStderr(), "strata audit: %v\n", err)
		return exitError{code: 2}
	})
	return cmd
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func printAudit(w io.Writer, rep *audit.Report, moved int64, took, watch time.Duration) {
	apart := fmt.Sprintf("cursors read %v apart", watch)
	if !rep.StallDetection {
		apart = "stall detection off: --watch 0, cursors read once"
	}
	fmt.Fprintf(w, "audited %d replicated topic(s): %d copies of origin streams compared, %d messages read at the owners, %d summary requests, %s moved, %.1fs (%s)\n",
		rep.Topics, len(rep.Compared), rep.Scanned, rep.Requests, byteText(moved), took.Seconds(), apart)
	for _, c := range rep.Compared {
		fmt.Fprintf(w, "  %s origin %s in %s: origin seqs %s compared, %d in flight\n", c.Topic, c.Origin, c.Region, c.Window, c.InFlight)
	}
	for _, f := range rep.Findings {
		rs := ""
		for i, r := range f.Ranges {
			if i == 20 {
				rs += fmt.Sprintf(" … (%d ranges)", len(f.Ranges))
				break
			}
			if i > 0 {
				rs += ","
			}
			rs += r.String()
		}
		fmt.Fprintf(w, "%s  %s origin %s in %s: origin seqs %s\n", upper(f.Kind), f.Topic, f.Origin, f.Region, rs)
	}
	for _, s := range rep.Stalled {
		fmt.Fprintf(w, "STALLED  %s cursor __repl.%s in %s: position %d did not move in %v while the origin had %d unreplicated (last origin seq %d → %d); it reports lag %d msgs %.1fs\n",
			s.Second.Topic, s.Second.Remote, s.Second.Region, s.Second.Position, watch, s.First.LastOriginSeq-s.First.Position,
			s.First.LastOriginSeq, s.Second.LastOriginSeq, s.Second.LagMsgs, s.Second.LagSeconds)
	}
	for _, c := range rep.Unreachable {
		fmt.Fprintf(w, "UNREACHABLE  %s cursor __repl.%s in %s: remote not answering the audit; position %d, %d unreplicated (last origin seq %d)\n",
			c.Topic, c.Remote, c.Region, c.Position, c.LastOriginSeq-min(c.Position, c.LastOriginSeq), c.LastOriginSeq)
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(w, "ERROR  %s\n", e)
	}
	incomplete := ""
	if rep.Incomplete() {
		incomplete = "; INCOMPLETE"
		if len(rep.NoAnswer) > 0 {
			incomplete += fmt.Sprintf(": region(s) %s did not answer", strings.Join(rep.NoAnswer, ", "))
		}
		if n := len(rep.Errors); n > 0 {
			incomplete += fmt.Sprintf(" (%d error(s) above)", n)
		}
	}
	switch rep.Exit() {
	case 0:
		fmt.Fprintln(w, "result: the regions agree (exit 0)")
	case 1:
		fmt.Fprintf(w, "result: %d difference(s), %d stalled cursor(s)%s (exit 1)\n", len(rep.Findings), len(rep.Stalled), incomplete)
	default:
		fmt.Fprintf(w, "result: no difference found in what was read%s (exit 2)\n", incomplete)
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

func byteText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// countingTransport counts the response bytes read through it.
type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err == nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.n}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

type auditScope struct {
	ns    *tenancy.NSName
	topic *tenancy.Name
}

// adminMesh is audit.Mesh over the admin API of each region's brokers.
type adminMesh struct {
	cmd        *cobra.Command
	flags      *adminFlags
	client     *admin.Client
	sumClient  *admin.Client // with --summary-timeout per request
	sumTimeout time.Duration
	urls       map[string][]string
	order      []string
	scope      auditScope
}

func (m *adminMesh) get(ctx context.Context, region, path string, v any) error {
	return m.send(ctx, m.client, m.flags.timeout, region, path, v)
}

// send asks region's nodes in turn, each for up to per; no answer from
// any (not an API error) is audit.ErrNoAnswer.
func (m *adminMesh) send(ctx context.Context, c *admin.Client, per time.Duration, region, path string, v any) error {
	urls := m.urls[region]
	ctx, cancel := context.WithTimeout(ctx, per*time.Duration(max(1, len(urls))))
	defer cancel()
	err := c.GetFirst(ctx, urls, path, v)
	var ae *admin.APIError
	if err != nil && !errors.As(err, &ae) {
		return fmt.Errorf("%w: %v", audit.ErrNoAnswer, err)
	}
	return err
}

func (m *adminMesh) any(ctx context.Context, path string, v any) error {
	var last error
	for _, r := range m.order {
		if last = m.get(ctx, r, path, v); last == nil {
			return nil
		}
	}
	return last
}

func (m *adminMesh) Topics(ctx context.Context) ([]audit.Topic, error) {
	var nss []admin.Namespace
	switch {
	case m.scope.topic != nil || m.scope.ns != nil:
		n := m.scope.ns
		if n == nil {
			n = &tenancy.NSName{Tenant: m.scope.topic.Tenant, Namespace: m.scope.topic.Namespace}
		}
		var ns admin.Namespace
		if err := m.any(ctx, "/admin/v1/namespaces/"+n.Tenant+"/"+n.Namespace, &ns); err != nil {
			if notFound(err) {
				return nil, fmt.Errorf("no such namespace %s", n)
			}
			return nil, fmt.Errorf("namespace %s: %w", n, err)
		}
		nss = append(nss, ns)
	default:
		var tl struct {
			Tenants []admin.Tenant `json:"tenants"`
		}
		if err := m.any(ctx, "/admin/v1/tenants", &tl); err != nil {
			return nil, fmt.Errorf("listing tenants: %w", err)
		}
		for _, t := range tl.Tenants {
			var nl admin.NamespaceList
			if err := m.any(ctx, "/admin/v1/namespaces/"+t.Name, &nl); err != nil {
				return nil, fmt.Errorf("listing the namespaces of %s: %w", t.Name, err)
			}
			nss = append(nss, nl.Namespaces...)
		}
	}
	var out []audit.Topic
	for _, ns := range nss {
		regions := slices.Compact(slices.Sorted(slices.Values(ns.Policies.Replication)))
		if len(regions) < 2 {
			if m.scope.topic != nil || m.scope.ns != nil {
				return nil, fmt.Errorf("namespace %s/%s is not replicated: its replication list names %d region(s) %v, an audit needs two or more", ns.Tenant, ns.Name, len(regions), regions)
			}
			continue
		}
		if m.scope.topic != nil {
			if err := m.topicExists(ctx, regions); err != nil {
				return nil, err
			}
			out = append(out, audit.Topic{Name: m.scope.topic.String(), Regions: regions})
			continue
		}
		names := map[string]bool{}
		for _, r := range regions {
			var tl admin.TopicList
			if err := m.get(ctx, r, "/admin/v1/topics/"+ns.Tenant+"/"+ns.Name, &tl); err != nil {
				fmt.Fprintf(m.cmd.ErrOrStderr(), "strata audit: region %s: listing %s/%s: %v\n", r, ns.Tenant, ns.Name, err)
				continue
			}
			for _, t := range tl.Topics {
				names[t.Tenant+"/"+t.Namespace+"/"+t.Topic] = true
			}
		}
		for _, n := range slices.Sorted(mapKeys(names)) {
			out = append(out, audit.Topic{Name: n, Regions: regions})
		}
	}
	if len(out) == 0 && m.scope.topic != nil {
		return nil, fmt.Errorf("topic %s: its namespace does not replicate across two regions or more", m.scope.topic)
	}
	return out, nil
}

// topicExists asks regions in parallel for --topic's stats: an error
// when every region that answered says it has no such topic.
func (m *adminMesh) topicExists(ctx context.Context, regions []string) error {
	name := m.scope.topic.String()
	errs := make([]error, len(regions))
	var wg sync.WaitGroup
	for i, r := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var a admin.TopicAnswer
			errs[i] = m.get(ctx, r, "/admin/v1/topics/"+name+"/stats", &a)
		}()
	}
	wg.Wait()
	answered := 0
	for _, err := range errs {
		switch {
		case err == nil:
			return nil
		case notFound(err):
			answered++
		}
	}
	if answered > 0 {
		return fmt.Errorf("no such topic %s (%d of %d region(s) answered)", name, answered, len(regions))
	}
	return nil // nobody answered: the audit says which regions did not
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func notFound(err error) bool {
	var ae *admin.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

func (m *adminMesh) Replication(ctx context.Context, region, topic string) (audit.Replication, error) {
	var a admin.TopicAnswer
	if err := m.get(ctx, region, "/admin/v1/topics/"+topic+"/stats", &a); err != nil {
		if notFound(err) {
			return audit.Replication{}, nil // no copy there: its summary is empty, so all is missing
		}
		return audit.Replication{}, err
	}
	var out audit.Replication
	if a.Topic == nil || a.Topic.Replication == nil {
		return out, fmt.Errorf("the topic's owner did not report its replication")
	}
	rp := a.Topic.Replication
	out.Incarnation, out.LastOriginSeq = rp.Incarnation, rp.LastOriginSeq
	for _, c := range rp.Cursors {
		out.Cursors = append(out.Cursors, audit.Cursor{Topic: topic, Region: region, Remote: c.Remote, Position: c.Position,
			LastOriginSeq: c.LastOriginSeq, LagMsgs: c.LagMsgs, LagSeconds: c.LagSeconds})
	}
	return out, nil
}

func (m *adminMesh) Summary(ctx context.Context, region, topic string, q audit.Request) (*audit.Summary, error) {
	v := url.Values{}
	set := func(k string, n uint64) {
		if n != 0 {
			v.Set(k, strconv.FormatUint(n, 10))
		}
	}
	set("from", q.From)
	if q.To != 0 && q.To != ^uint64(0) {
		set("to", q.To)
	}
	set("span", q.Span)
	set("local_from", q.LocalFrom)
	set("local_to", q.LocalTo)
	if q.Origin != nil {
		v.Set("origin_region", q.Origin.Region)
		v.Set("origin_incarnation", q.Origin.Incarnation)
	}
	var a admin.OriginsAnswer
	if err := m.send(ctx, m.sumClient, m.sumTimeout, region, "/admin/v1/topics/"+topic+"/origins?"+v.Encode(), &a); err != nil {
		if notFound(err) {
			return &audit.Summary{Region: region}, nil
		}
		return nil, err
	}
	if a.Summary == nil {
		return nil, fmt.Errorf("region %s sent no summary", region)
	}
	return a.Summary, nil
}
