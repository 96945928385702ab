package status

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/stratamesh/strata/admin"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/stratamesh/strata/internal/gossip"
	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/region"
)

// Collect asks every node listed in f, all at once, for its pool views
// and readiness, and returns a copy of f with each node's State and Ready
// filled in and each region's WAN view (from one of its brokers that
// answered), plus how many nodes answered. Each request is bounded by the
// client's timeout, so one hung node never hides the others. A node that
// does not answer gets its state from the others' views.
func Collect(ctx context.Context, f *meshfile.File, client *http.Client) (*meshfile.File, int) {
	if client == nil {
		client = http.DefaultClient
	}
	type probe struct {
		view   *admin.MembersView
		ready  *bool
		bookie *meshfile.BookieState
		broker *meshfile.BrokerState
	}
	probes := make([][]probe, len(f.Regions))
	var wg sync.WaitGroup
	for i, reg := range f.Regions {
		probes[i] = make([]probe, len(reg.Nodes))
		for j, n := range reg.Nodes {
			if n.Admin == "" {
				continue
			}
			wg.Add(2)
			go func() {
				defer wg.Done()
				probes[i][j].view = fetchJSON[admin.MembersView](ctx, client, n.Admin+"/admin/v1/members")
				if n.Role == "bookie" {
					probes[i][j].bookie = fetchJSON[meshfile.BookieState](ctx, client, n.Admin+"/admin/v1/bookie")
				}
				if n.Role == "broker" {
					probes[i][j].broker = brokerState(ctx, client, n.Admin, reg.Name+"."+n.ID)
				}
			}()
			go func() {
				defer wg.Done()
				probes[i][j].ready = fetchReady(ctx, client, n.Admin)
			}()
		}
	}
	wg.Wait()
	out := *f
	out.Regions = make([]meshfile.Region, len(f.Regions))
	answered := 0
	for i, reg := range f.Regions {
		var views []admin.MembersView
		for _, p := range probes[i] {
			if p.view != nil {
				views = append(views, *p.view)
				answered++
			}
		}
		r := reg
		r.Nodes = append([]meshfile.Node(nil), reg.Nodes...)
		for j := range r.Nodes {
			r.Nodes[j].State = MergeState(region.SerfName(reg.Name, r.Nodes[j].ID), views)
			r.Nodes[j].Ready = probes[i][j].ready
			r.Nodes[j].Bookie = probes[i][j].bookie
			r.Nodes[j].Broker = probes[i][j].broker
			if v := probes[i][j].view; v != nil && v.Node == region.SerfName(reg.Name, r.Nodes[j].ID) && v.PID != 0 && v.PID != r.Nodes[j].PID {
				// Not the process `up` started: one restarted by hand.
				r.Nodes[j].PID, r.Nodes[j].Exited = v.PID, ""
			}
		}
		r.WAN = wanView(views)
		out.Regions[i] = r
	}
	tierUsage(ctx, client, out.Regions)
	return &out, answered
}

// tierUsage fills in each region's tier usage from the first of its
// brokers that answers GET /admin/v1/tier.
func tierUsage(ctx context.Context, client *http.Client, regions []meshfile.Region) {
	var wg sync.WaitGroup
	for i := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, n := range regions[i].Nodes {
				if n.Role != "broker" || n.Admin == "" || n.State != gossip.StateAlive {
					continue
				}
				if u := fetchJSON[meshfile.TierUsage](ctx, client, n.Admin+"/admin/v1/tier"); u != nil {
					regions[i].Tier.Usage = u
					return
				}
			}
		}()
	}
	wg.Wait()
}

// fetchReady asks /readyz; nil when the node did not answer at all.
func fetchReady(ctx context.Context, client *http.Client, admin string) *bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/readyz", nil)
	if err != nil {
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil
	}
	resp.Body.Close()
	ready := resp.StatusCode == http.StatusOK
	return &ready
}

// fetchJSON GETs url and decodes a 200 answer; nil on any failure.
func fetchJSON[T any](ctx context.Context, client *http.Client, url string) *T {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	var v T
	if json.NewDecoder(resp.Body).Decode(&v) != nil {
		return nil
	}
	return &v
}

// severity orders states for merging: a failure seen by anyone wins over
// "alive" seen by others, because detection spreads by gossip and the
// first detector is right more often than the last to hear.
var severity = map[string]int{gossip.StateAlive: 1, gossip.StateSuspect: 2, gossip.StateLeft: 3, gossip.StateFailed: 4}

// MergeState is a node's state from the LAN views of its region: the most
// severe state any *other* member reports (failed > left > suspect >
// alive). A node that no other member knows is "suspect" (not yet joined or
// unknown), unless it is the only view there is, then its own report
// counts. A node nobody reports at all is "failed".
func MergeState(name string, views []admin.MembersView) string {
	best, self := "", ""
	for _, v := range views {
		for _, m := range v.LAN {
			if m.Name != name {
				continue
			}
			if v.Node == name {
				self = m.State
				continue
			}
			if severity[m.State] > severity[best] {
				best = m.State
			}
		}
	}
	switch {
	case best != "":
		return best
	case self != "" && len(views) == 1:
		return self
	case self != "":
		return gossip.StateSuspect
	default:
		return gossip.StateFailed
	}
}

// wanView is the WAN pool as the first answering broker sees it.
func wanView(views []admin.MembersView) []meshfile.Member {
	for _, v := range views {
		if len(v.WAN) == 0 {
			continue
		}
		out := make([]meshfile.Member, 0, len(v.WAN))
		for _, m := range v.WAN {
			out = append(out, meshfile.Member{Name: m.Name, Addr: m.Addr, State: m.State})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out
	}
	return nil
}

// AllAlive reports whether every node is alive and every region's WAN view
// lists every broker of the mesh as alive.
func AllAlive(f *meshfile.File) bool {
	brokers := map[string]bool{}
	for _, r := range f.Regions {
		for _, n := range r.Nodes {
			if n.State != gossip.StateAlive {
				return false
			}
			if n.Role == "broker" {
				brokers[region.SerfName(r.Name, n.ID)] = true
			}
		}
	}
	for _, r := range f.Regions {
		alive := 0
		for _, m := range r.WAN {
			if brokers[m.Name] && m.State == gossip.StateAlive {
				alive++
			}
		}
		if alive != len(brokers) {
			return false
		}
	}
	return true
}

// PrintTable writes the human form of a collected status.
func PrintTable(w io.Writer, f *meshfile.File) {
	fmt.Fprintf(w, "mesh %s (up since %s)\n", f.Mesh, f.StartedAt.Format("2006-01-02 15:04:05Z07:00"))
	for _, r := range f.Regions {
		fmt.Fprintf(w, "\nregion %s (tier %s)\n", r.Name, tierText(r.Tier))
		if len(r.NATS) > 0 {
			fmt.Fprintf(w, "  NATS: %s\n", strings.Join(r.NATS, ","))
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  NODE\tROLE\tSTATE\tREADY\tPID\tADMIN\tDETAIL")
		for _, n := range r.Nodes {
			state := n.State
			if n.Exited != "" {
				state += " (exited: " + n.Exited + ")"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\t%s\n", n.ID, n.Role, state, readyText(n.Ready), n.PID, n.Admin, detail(n))
		}
		tw.Flush()
		alive := 0
		for _, m := range r.WAN {
			if m.State == gossip.StateAlive {
				alive++
			}
		}
		if len(r.WAN) > 0 {
			fmt.Fprintf(w, "  WAN pool seen from here: %d members, %d alive\n", len(r.WAN), alive)
		} else {
			fmt.Fprintln(w, "  WAN pool: no broker of this region answered")
		}
	}
}

// tierText is a region's tier in the table: its kind and, when a broker
// answered, the objects and bytes offloaded there.
func tierText(t meshfile.Tier) string {
	switch u := t.Usage; {
	case u == nil:
		return t.Kind
	case u.Error != "":
		return t.Kind + ", unreadable: " + u.Error
	default:
		return fmt.Sprintf("%s: %d ledgers offloaded, %s in %d objects", t.Kind, u.Ledgers, BytesText(u.Bytes), u.Objects)
	}
}

func readyText(r *bool) string {
	switch {
	case r == nil:
		return "no answer"
	case *r:
		return "yes"
	default:
		return "no"
	}
}

// brokerState asks a broker for its region's bundles and keeps those
// owned by name (the broker's name, "<region>.<id>"); nil when it does
// not answer.
func brokerState(ctx context.Context, client *http.Client, admin, name string) *meshfile.BrokerState {
	type bundles struct {
		Bundles []struct {
			Bundle, Owner string
			Topics        int
		}
	}
	a := fetchJSON[bundles](ctx, client, admin+"/admin/v1/bundles")
	if a == nil {
		return nil
	}
	st := &meshfile.BrokerState{Bundles: []string{}}
	for _, b := range a.Bundles {
		if b.Owner == name {
			st.Bundles = append(st.Bundles, b.Bundle)
			st.Topics += b.Topics
		}
	}
	st.Replication, st.Lost = replicationState(ctx, client, admin)
	return st
}

// replicationState sums a broker's GET /admin/v1/replication per remote
// region (nil when it does not answer or replicates nothing) and its
// messages lost to gap records.
func replicationState(ctx context.Context, client *http.Client, admin string) ([]meshfile.ReplicationState, uint64) {
	type view struct {
		Links []struct {
			Remote    string
			Connected bool
		}
		Cursors []struct {
			Remote     string
			State      string
			LagMsgs    uint64  `json:"lag_msgs"`
			LagSeconds float64 `json:"lag_seconds"`
		}
		Lost []struct {
			Lost uint64
		}
	}
	v := fetchJSON[view](ctx, client, admin+"/admin/v1/replication")
	if v == nil {
		return nil, 0
	}
	var lost uint64
	for _, l := range v.Lost {
		lost += l.Lost
	}
	byRemote := map[string]*meshfile.ReplicationState{}
	var order []string
	get := func(r string) *meshfile.ReplicationState {
		if byRemote[r] == nil {
			byRemote[r] = &meshfile.ReplicationState{Remote: r, State: "replicating"}
			order = append(order, r)
		}
		return byRemote[r]
	}
	for _, l := range v.Links {
		get(l.Remote).Connected = l.Connected
	}
	rank := map[string]int{"replicating": 0, "backing-off": 1, "stalled": 2}
	for _, c := range v.Cursors {
		r := get(c.Remote)
		r.Cursors++
		r.LagMsgs += c.LagMsgs
		r.LagSeconds = max(r.LagSeconds, c.LagSeconds)
		if rank[c.State] > rank[r.State] {
			r.State = c.State
		}
	}
	sort.Strings(order)
	out := make([]meshfile.ReplicationState, 0, len(order))
	for _, r := range order {
		if rs := byRemote[r]; rs.Cursors > 0 || !rs.Connected {
			out = append(out, *rs) // a link with no cursor left is nothing to show
		}
	}
	return out, lost
}

// detail is the role-specific column: a bookie's instance, ledgers and
// disk use; a broker's NATS URL and bundles.
func detail(n meshfile.Node) string {
	b := n.Bookie
	if b == nil {
		s := ""
		if n.NATS != "" {
			s = "NATS " + n.NATS
		}
		if br := n.Broker; br != nil {
			s += ", " + countOf(len(br.Bundles), "bundle") + " (" + countOf(br.Topics, "topic") + ")"
			for _, r := range br.Replication {
				s += ", " + replicationText(r)
			}
			if br.Lost > 0 {
				s += fmt.Sprintf(", %d replicated messages lost to retention at their origin", br.Lost)
			}
		}
		return s
	}
	inst := b.Instance
	if len(inst) > 8 {
		inst = inst[:8]
	}
	ro := ""
	if b.ReadOnly {
		ro = " READ-ONLY"
	}
	journal := ""
	switch {
	case b.JournalDir != "" && b.JournalTotalBytes == 0:
		journal = fmt.Sprintf(", journal %s (space unknown)", b.JournalDir)
	case b.JournalDir != "":
		journal = fmt.Sprintf(", journal %s %s free", b.JournalDir, BytesText(b.JournalFreeBytes))
	}
	return fmt.Sprintf("instance %s, %s, %s used, %s free%s%s", inst, countOf(b.Ledgers, "ledger"), BytesText(b.UsedBytes), BytesText(b.FreeBytes), journal, ro)
}

// countOf is n and noun, plural unless n is 1 ("1 ledger", "3 ledgers").
func countOf[N int | int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// replicationText is one remote's replication in the detail column, e.g.
// "→ eu-west: 3 topics, lag 0" or "→ ap-south: link down, 2 topics, lag
// 120 msgs 4.2s (backing-off)".
func replicationText(r meshfile.ReplicationState) string {
	s := "→ " + r.Remote + ": "
	if !r.Connected {
		s += "link down, "
	}
	s += fmt.Sprintf("%s, lag %d", countOf(r.Cursors, "topic"), r.LagMsgs)
	if r.LagMsgs > 0 {
		s += fmt.Sprintf(" msgs %.1fs", r.LagSeconds)
	}
	if r.State != "replicating" {
		s += " (" + r.State + ")"
	}
	return s
}

// BytesText prints a byte count in binary units, e.g. "75.5 GiB".
func BytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
