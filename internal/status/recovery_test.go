package status

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/tenancy"
)

// fakeBroker serves GET /admin/v1/regions and the decommission route of
// one broker and records the paths asked.
type fakeBroker struct {
	mu      sync.Mutex
	paths   []string
	regions admin.RegionsView
	decom   map[string]admin.DecommissionView // by region asked
}

func (b *fakeBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.paths = append(b.paths, r.URL.Path)
	b.mu.Unlock()
	if r.URL.Path == "/admin/v1/regions" {
		admin.WriteJSON(w, 200, b.regions)
		return
	}
	for region, v := range b.decom {
		if r.URL.Path == admin.DecommissionPath(region) {
			admin.WriteJSON(w, 200, v)
			return
		}
	}
	admin.WriteJSON(w, 200, admin.DecommissionView{Region: "?", Namespaces: []tenancy.DecomNamespace{}})
}

func (b *fakeBroker) asked() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(slices.Values(b.paths))
}

// recoveryMesh: east is coming back after a loss — west's broker sees it
// catching up and settling with 3 of its clients as guests, south's
// still sees it unreachable (away); south's decommission is pending
// (east parks one cursor holding 5 messages) and west's deletion of a
// topic's positions towards east and south keeps failing; ap's broker
// is failed (not asked) and north's answers 500.
func recoveryMesh(t *testing.T, now time.Time) (*meshfile.File, map[string]*fakeBroker) {
	pending := func(parked []admin.ParkedCursor, stale []admin.StaleCursor) admin.DecommissionView {
		return admin.DecommissionView{Region: "south", State: tenancy.DecomPending,
			Namespaces: []tenancy.DecomNamespace{{Namespace: "demo/geo"}, {Namespace: "demo/eu"}}, Parked: parked, Stale: stale}
	}
	stale := admin.StaleCursor{Topic: "demo.geo.t", Remotes: []string{"east", "south"}, Rounds: 2, Tries: 3,
		LastError: "test hook decom-fail", RetryAt: now.Add(2 * time.Second)}
	brokers := map[string]*fakeBroker{
		"east": {regions: admin.RegionsView{Region: "east", Regions: []admin.RegionState{
			{Region: "west", CatchUp: admin.CatchUpCaughtUp, SwitchBack: "home"},
			{Region: "south", CatchUp: admin.CatchUpCaughtUp, SwitchBack: "home"},
		}}, decom: map[string]admin.DecommissionView{
			"south": pending([]admin.ParkedCursor{{Topic: "demo.geo.t", Remote: "south", Position: 7, LagMsgs: 5}}, nil),
		}},
		"west": {regions: admin.RegionsView{Region: "west", Regions: []admin.RegionState{
			{Region: "east", CatchUp: admin.CatchUpCatchingUp, LagMsgs: 12, LagSeconds: 0.4, SwitchBack: "settling", SwitchBackAt: now.Add(4 * time.Second), Guests: 3},
			{Region: "south", CatchUp: admin.CatchUpCaughtUp, SwitchBack: "home"},
		}}, decom: map[string]admin.DecommissionView{
			"south": pending(nil, []admin.StaleCursor{stale}),
			"east":  {Region: "east", Stale: []admin.StaleCursor{stale}},
		}},
		"south": {regions: admin.RegionsView{Region: "south", Regions: []admin.RegionState{
			{Region: "east", CatchUp: admin.CatchUpUnreachable, SwitchBack: "away"},
			{Region: "west", CatchUp: admin.CatchUpCaughtUp, SwitchBack: "home"},
		}}},
	}
	f := &meshfile.File{Mesh: "m"}
	for _, r := range []string{"east", "west", "south"} {
		srv := httptest.NewServer(brokers[r])
		t.Cleanup(srv.Close)
		f.Regions = append(f.Regions, meshfile.Region{Name: r, Nodes: []meshfile.Node{
			{ID: "k1", Role: "bookie", Admin: "http://bookie.invalid", State: "alive"},
			{ID: "b1", Role: "broker", Admin: srv.URL, State: "alive"},
		}})
	}
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		admin.WriteError(w, admin.Errorf(admin.CodeInternal, "", "broken"))
	}))
	t.Cleanup(failing.Close)
	f.Regions = append(f.Regions,
		meshfile.Region{Name: "ap", Nodes: []meshfile.Node{{ID: "b1", Role: "broker", Admin: "http://failed.invalid", State: "failed"}}},
		meshfile.Region{Name: "north", Nodes: []meshfile.Node{{ID: "b1", Role: "broker", Admin: failing.URL, State: "suspect"}}})
	return f, brokers
}

// TestCollectRecovery: status asks every broker not known failed for
// its region view, and the brokers of the other regions for each
// region's decommission; it shows one line per region not home, the
// pending decommission with the parked cursors summed, each broker's
// topic with stale positions once (however many regions list it), and
// the brokers that did not answer.
func TestCollectRecovery(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	f, brokers := recoveryMesh(t, now)
	rec := CollectRecovery(context.Background(), &admin.Client{HTTP: &http.Client{Timeout: 2 * time.Second}}, f)

	wantRegions := []RegionAlert{{Region: "east",
		Behind: []Viewer{
			{From: "south", CatchUp: admin.CatchUpUnreachable},
			{From: "west", CatchUp: admin.CatchUpCatchingUp, LagMsgs: 12, LagSeconds: 0.4},
		},
		SwitchBack: "away", Guests: 3, GuestsIn: []string{"west"}}}
	if !reflect.DeepEqual(rec.Regions, wantRegions) {
		t.Errorf("regions %+v\nwant %+v", rec.Regions, wantRegions)
	}
	if want := []DecomAlert{{Region: "south", State: "pending", Namespaces: 2, Parked: 1, HeldMsgs: 5}}; !reflect.DeepEqual(rec.Decommissions, want) {
		t.Errorf("decommissions %+v", rec.Decommissions)
	}
	if len(rec.Stale) != 1 || rec.Stale[0].Broker != "west.b1" || rec.Stale[0].Topic != "demo.geo.t" || rec.Stale[0].Rounds != 2 {
		t.Errorf("stale %+v", rec.Stale)
	}
	if len(rec.Unanswered) != 1 || !strings.HasPrefix(rec.Unanswered[0], "north.b1: admin API: 500") {
		t.Errorf("unanswered %q", rec.Unanswered)
	}
	// Every broker is asked about every region but its own (ap's
	// failed broker counts as a region to ask about).
	for r, b := range brokers {
		want := []string{"/admin/v1/regions"}
		for _, other := range []string{"ap", "east", "north", "south", "west"} {
			if other != r {
				want = append(want, admin.DecommissionPath(other))
			}
		}
		slices.Sort(want)
		if got := b.asked(); !slices.Equal(got, want) {
			t.Errorf("%s asked %v, want %v", r, got, want)
		}
	}

	var out bytes.Buffer
	PrintRecovery(&out, rec, now)
	want := "\nregions not home (client failover):\n" +
		"  east: catching-up from west (lag 12 msgs 0.4s), unreachable from south; switch-back away; 3 guests held in west\n" +
		"\nregion decommission:\n" +
		"  south: decommission pending (out of 2 namespaces; 1 parked cursor holding 5 messages): confirm or cancel with strata admin regions decommission south --confirm|--cancel\n" +
		"  west.b1 demo.geo.t: replicator cursor positions towards east,south not deleted: 2 rounds given up in a row, 3 tries in the last, next try in 2s: test hook decom-fail\n" +
		"failover and decommission state unknown from north.b1: admin API: 500 internal: broken\n"
	if got := out.String(); got != want {
		t.Errorf("printed\n%s\nwant\n%s", got, want)
	}

	// South sees east again: east is settling, and the line says when
	// the guests go home.
	brokers["south"].regions.Regions[0] = admin.RegionState{Region: "east", CatchUp: admin.CatchUpCaughtUp, SwitchBack: "settling", SwitchBackAt: now.Add(3 * time.Second)}
	brokers["west"].regions.Regions[0].CatchUp, brokers["west"].regions.Regions[0].LagMsgs, brokers["west"].regions.Regions[0].LagSeconds = admin.CatchUpCaughtUp, 0, 0
	rec = CollectRecovery(context.Background(), &admin.Client{}, f)
	out.Reset()
	if len(rec.Regions) != 1 {
		t.Fatalf("regions %+v", rec.Regions)
	}
	if got, want := regionAlertText(rec.Regions[0], now), "switch-back settling, guests go home in 4s; 3 guests held in west"; got != want {
		t.Errorf("settling: %q, want %q", got, want)
	}
}

// TestRecoverySettled: a mesh whose regions are all home and caught up,
// with no decommission pending and nothing stale, prints nothing.
func TestRecoverySettled(t *testing.T) {
	views := []admin.RegionsView{
		{Region: "east", Regions: []admin.RegionState{{Region: "west", CatchUp: admin.CatchUpCaughtUp, SwitchBack: "home"}}},
		{Region: "west", Regions: []admin.RegionState{{Region: "east", CatchUp: admin.CatchUpCaughtUp, SwitchBack: "home"}}},
	}
	decoms := []admin.DecommissionView{
		{Region: "west", Broker: "east.b1", State: tenancy.DecomConfirmed},
		{Region: "east", Broker: "west.b1", State: ""},
	}
	rec := MergeRecovery(views, decoms)
	if !rec.Empty() {
		t.Fatalf("settled mesh: %+v", rec)
	}
	var out bytes.Buffer
	PrintRecovery(&out, rec, time.Now())
	if out.Len() != 0 {
		t.Errorf("printed %q", out.String())
	}
	// A guest held while everything is caught up still counts: its
	// region's clients are not home.
	views[0].Regions[0].Guests = 1
	rec = MergeRecovery(views, nil)
	if len(rec.Regions) != 1 || regionAlertText(rec.Regions[0], time.Now()) != "switch-back home; 1 guest held in east" {
		t.Errorf("guest held: %+v", rec.Regions)
	}
}
