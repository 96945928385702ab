package status

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/gossip"
	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/tenancy"
)

// Recovery is what `strata status` says of client failover and region
// decommission (issue 26 items 5 and 6): the regions that are not home
// (not caught up, guests held elsewhere, switching back), the
// decommissions in progress, and the replicator cursor positions whose
// deletion failed its round. Empty when all is settled.
type Recovery struct {
	Regions       []RegionAlert `json:"regions,omitempty"`
	Decommissions []DecomAlert  `json:"decommissions,omitempty"`
	Stale         []StaleAlert  `json:"stale_cursors,omitempty"`
	// Unanswered lists the brokers ("<region>.<id>: error") that did not
	// answer GET /admin/v1/regions or the decommission route.
	Unanswered []string `json:"unanswered,omitempty"`
}

// Empty reports whether r has nothing to say.
func (r Recovery) Empty() bool {
	return len(r.Regions) == 0 && len(r.Decommissions) == 0 && len(r.Stale) == 0 && len(r.Unanswered) == 0
}

// RegionAlert is one region as the other regions' brokers see it, merged
// over every broker that answered GET /admin/v1/regions.
type RegionAlert struct {
	Region string `json:"region"`
	// Behind is each viewing region whose replication toward Region is
	// not caught up (admin.RegionState.CatchUp other than caught-up; the
	// worst of its brokers), in name order.
	Behind []Viewer `json:"behind,omitempty"`
	// SwitchBack is the phase furthest from home among the viewers'
	// brokers (away > returned > settling > home); SwitchBackAt, while
	// settling, the latest time a broker sends the guests home.
	SwitchBack   string    `json:"switch_back"`
	SwitchBackAt time.Time `json:"switch_back_at,omitzero"`
	// Guests is how many of Region's clients the other regions' brokers
	// hold now; GuestsIn the regions holding them, in name order.
	Guests   int      `json:"guests"`
	GuestsIn []string `json:"guests_in,omitempty"`
}

// Viewer is one region's replication toward another: its catch-up state
// (admin.CatchUp…) and lag, summed (messages) and maxed (seconds) over
// its brokers.
type Viewer struct {
	From       string  `json:"from"`
	CatchUp    string  `json:"catch_up"`
	LagMsgs    uint64  `json:"lag_msgs"`
	LagSeconds float64 `json:"lag_seconds"`
}

// DecomAlert is a pending decommission (out of every replication list,
// cursor positions parked until confirm or cancel) as the brokers of
// the other regions answer it: the namespaces it changed, and the
// parked cursors with the local messages they hold back.
type DecomAlert struct {
	Region     string `json:"region"`
	State      string `json:"state"`
	Namespaces int    `json:"namespaces"`
	Parked     int    `json:"parked_cursors"`
	HeldMsgs   uint64 `json:"held_msgs"`
}

// StaleAlert is one broker's topic whose cursor positions towards
// regions no longer in its replication list were not deleted by the
// last round (admin.StaleCursor: the bounded, backed-off deletion
// rounds' error state).
type StaleAlert struct {
	Broker string `json:"broker"` // "<region>.<id>"
	admin.StaleCursor
}

// switchBackRank orders switch-back phases by distance from home.
var switchBackRank = map[string]int{"home": 0, "settling": 1, "returned": 2, "away": 3}

// catchUpRank orders catch-up states, worst last.
var catchUpRank = map[string]int{admin.CatchUpCaughtUp: 0, admin.CatchUpCatchingUp: 1, admin.CatchUpStalled: 2, admin.CatchUpUnreachable: 3}

// recoveryConcurrency bounds the requests CollectRecovery has in flight.
const recoveryConcurrency = 8

// brokerRef is one broker of mesh.json that CollectRecovery asks.
type brokerRef struct{ region, name, admin string }

// CollectRecovery asks every broker of f that is not known failed or
// left (f as Collect returned it; the node table says why the others
// are not asked) for GET /admin/v1/regions, and for each region of f the
// brokers of the other regions for GET /admin/v1/regions/{region}/
// decommission — a few requests at a time, each bounded by c's timeout —
// and folds the answers with MergeRecovery. A region no longer in
// mesh.json is not asked about.
func CollectRecovery(ctx context.Context, c *admin.Client, f *meshfile.File) Recovery {
	var brokers []brokerRef
	for _, r := range f.Regions {
		for _, n := range r.Nodes {
			if n.Role == "broker" && n.Admin != "" && n.State != gossip.StateFailed && n.State != gossip.StateLeft {
				brokers = append(brokers, brokerRef{r.Name, r.Name + "." + n.ID, n.Admin})
			}
		}
	}
	type decomAsk struct {
		b      brokerRef
		region string
	}
	var asks []decomAsk
	for _, r := range f.Regions {
		for _, b := range brokers {
			if b.region != r.Name {
				asks = append(asks, decomAsk{b, r.Name})
			}
		}
	}
	views := make([]*admin.RegionsView, len(brokers))
	decoms := make([]*admin.DecommissionView, len(asks))
	errs := make([]error, len(brokers)+len(asks))
	sem := make(chan struct{}, recoveryConcurrency)
	var wg sync.WaitGroup
	run := func(i int, do func() error) {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = do()
		}()
	}
	for i, b := range brokers {
		run(i, func() error {
			var v admin.RegionsView
			err := c.Get(ctx, b.admin, "/admin/v1/regions", &v)
			if err == nil {
				views[i] = &v
			}
			return err
		})
	}
	for i, a := range asks {
		run(len(brokers)+i, func() error {
			v, err := c.DecommissionStatus(ctx, a.b.admin, a.region)
			if err == nil {
				v.Broker = a.b.name
				decoms[i] = &v
			}
			return err
		})
	}
	wg.Wait()
	var rv []admin.RegionsView
	var dv []admin.DecommissionView
	failed := map[string]string{}
	for i, b := range brokers {
		if views[i] != nil {
			rv = append(rv, *views[i])
		} else if failed[b.name] == "" {
			failed[b.name] = errs[i].Error()
		}
	}
	for i, a := range asks {
		if decoms[i] != nil {
			dv = append(dv, *decoms[i])
		} else if failed[a.b.name] == "" {
			failed[a.b.name] = errs[len(brokers)+i].Error()
		}
	}
	out := MergeRecovery(rv, dv)
	for name, e := range failed {
		out.Unanswered = append(out.Unanswered, name+": "+e)
	}
	sort.Strings(out.Unanswered)
	return out
}

// MergeRecovery folds brokers' region views and decommission answers
// (each DecommissionView's Broker naming the broker that answered) into
// a Recovery: one RegionAlert per region that some viewer's replication
// has not caught up to, whose clients are held as guests, or whose
// switch-back phase is not home; one DecomAlert per pending
// decommission (its record from the first answer; parked cursors summed
// over the brokers); one StaleAlert per broker and topic, however many
// regions' answers list it. All in name order.
func MergeRecovery(views []admin.RegionsView, decoms []admin.DecommissionView) Recovery {
	type acc struct {
		viewers map[string]*Viewer
		phase   string
		at      time.Time
		guests  map[string]int
	}
	byRegion := map[string]*acc{}
	for _, v := range views {
		for _, s := range v.Regions {
			a := byRegion[s.Region]
			if a == nil {
				a = &acc{viewers: map[string]*Viewer{}, phase: "home", guests: map[string]int{}}
				byRegion[s.Region] = a
			}
			vw := a.viewers[v.Region]
			if vw == nil {
				vw = &Viewer{From: v.Region, CatchUp: s.CatchUp}
				a.viewers[v.Region] = vw
			}
			if catchUpRank[s.CatchUp] > catchUpRank[vw.CatchUp] {
				vw.CatchUp = s.CatchUp
			}
			vw.LagMsgs += s.LagMsgs
			vw.LagSeconds = max(vw.LagSeconds, s.LagSeconds)
			if switchBackRank[s.SwitchBack] > switchBackRank[a.phase] {
				a.phase = s.SwitchBack
			}
			if s.SwitchBack == "settling" && s.SwitchBackAt.After(a.at) {
				a.at = s.SwitchBackAt
			}
			if s.Guests > 0 {
				a.guests[v.Region] += s.Guests
			}
		}
	}
	var out Recovery
	for region, a := range byRegion {
		al := RegionAlert{Region: region, SwitchBack: a.phase}
		if a.phase == "settling" {
			al.SwitchBackAt = a.at
		}
		for _, vw := range a.viewers {
			if vw.CatchUp != admin.CatchUpCaughtUp {
				al.Behind = append(al.Behind, *vw)
			}
		}
		slices.SortFunc(al.Behind, func(x, y Viewer) int { return strings.Compare(x.From, y.From) })
		for from, n := range a.guests {
			al.Guests += n
			al.GuestsIn = append(al.GuestsIn, from)
		}
		slices.Sort(al.GuestsIn)
		if len(al.Behind) > 0 || al.Guests > 0 || a.phase != "home" {
			out.Regions = append(out.Regions, al)
		}
	}
	slices.SortFunc(out.Regions, func(x, y RegionAlert) int { return strings.Compare(x.Region, y.Region) })

	decomIdx := map[string]int{}
	seenStale := map[[2]string]bool{}
	for _, d := range decoms {
		if d.State == tenancy.DecomPending {
			i, ok := decomIdx[d.Region]
			if !ok {
				i = len(out.Decommissions)
				decomIdx[d.Region] = i
				out.Decommissions = append(out.Decommissions, DecomAlert{Region: d.Region, State: d.State, Namespaces: len(d.Namespaces)})
			}
			for _, p := range d.Parked {
				out.Decommissions[i].Parked++
				out.Decommissions[i].HeldMsgs += p.LagMsgs
			}
		}
		for _, s := range d.Stale {
			k := [2]string{d.Broker, s.Topic}
			if !seenStale[k] {
				seenStale[k] = true
				out.Stale = append(out.Stale, StaleAlert{Broker: d.Broker, StaleCursor: s})
			}
		}
	}
	slices.SortFunc(out.Decommissions, func(x, y DecomAlert) int { return strings.Compare(x.Region, y.Region) })
	slices.SortFunc(out.Stale, func(x, y StaleAlert) int {
		if c := strings.Compare(x.Broker, y.Broker); c != 0 {
			return c
		}
		return strings.Compare(x.Topic, y.Topic)
	})
	return out
}

// PrintRecovery writes r's alerts, one line each (times until a
// switch-back relative to now); nothing when r is empty.
func PrintRecovery(w io.Writer, r Recovery, now time.Time) {
	if r.Empty() {
		return
	}
	if len(r.Regions) > 0 {
		fmt.Fprintln(w, "\nregions not home (client failover):")
		for _, a := range r.Regions {
			fmt.Fprintf(w, "  %s: %s\n", a.Region, regionAlertText(a, now))
		}
	}
	if len(r.Decommissions) > 0 || len(r.Stale) > 0 {
		fmt.Fprintln(w, "\nregion decommission:")
		for _, d := range r.Decommissions {
			fmt.Fprintf(w, "  %s: decommission %s (out of %s; %s holding %d messages): confirm or cancel with strata admin regions decommission %s --confirm|--cancel\n",
				d.Region, d.State, countOf(d.Namespaces, "namespace"), countOf(d.Parked, "parked cursor"), d.HeldMsgs, d.Region)
		}
		for _, s := range r.Stale {
			retry := ""
			if !s.RetryAt.IsZero() {
				retry = ", next try in " + durationText(s.RetryAt.Sub(now))
			}
			tries := fmt.Sprintf("%d tries", s.Tries)
			if s.Tries == 1 {
				tries = "1 try"
			}
			fmt.Fprintf(w, "  %s %s: replicator cursor positions towards %s not deleted: %s given up in a row, %s in the last%s: %s\n",
				s.Broker, s.Topic, strings.Join(s.Remotes, ","), countOf(s.Rounds, "round"), tries, retry, s.LastError)
		}
	}
	if len(r.Unanswered) > 0 {
		names := make([]string, len(r.Unanswered))
		for i, u := range r.Unanswered {
			names[i], _, _ = strings.Cut(u, ": ")
		}
		_, first, _ := strings.Cut(r.Unanswered[0], ": ")
		fmt.Fprintf(w, "failover and decommission state unknown from %s: %s\n", strings.Join(names, ", "), first)
	}
}

// regionAlertText is one RegionAlert's line, e.g. "catching-up from
// eu-west (lag 12 msgs 0.4s), unreachable from ap-south; switch-back
// settling, guests go home in 4.0s; 3 guests held in eu-west".
func regionAlertText(a RegionAlert, now time.Time) string {
	var parts []string
	if len(a.Behind) > 0 {
		byState := map[string][]string{}
		var states []string
		for _, v := range a.Behind {
			if byState[v.CatchUp] == nil {
				states = append(states, v.CatchUp)
			}
			from := v.From
			if v.LagMsgs > 0 || v.LagSeconds > 0 {
				from += fmt.Sprintf(" (lag %d msgs %.1fs)", v.LagMsgs, v.LagSeconds)
			}
			byState[v.CatchUp] = append(byState[v.CatchUp], from)
		}
		sort.Slice(states, func(i, j int) bool { return catchUpRank[states[i]] < catchUpRank[states[j]] })
		var behind []string
		for _, s := range states {
			behind = append(behind, s+" from "+strings.Join(byState[s], ", "))
		}
		parts = append(parts, strings.Join(behind, ", "))
	}
	sb := "switch-back " + a.SwitchBack
	if !a.SwitchBackAt.IsZero() {
		sb += ", guests go home in " + durationText(a.SwitchBackAt.Sub(now))
	}
	parts = append(parts, sb)
	if a.Guests > 0 {
		g := countOf(a.Guests, "guest")
		parts = append(parts, g+" held in "+strings.Join(a.GuestsIn, ", "))
	}
	return strings.Join(parts, "; ")
}

// durationText is d rounded to a tenth of a second, never negative.
func durationText(d time.Duration) string {
	return max(d, 0).Round(100 * time.Millisecond).String()
}
