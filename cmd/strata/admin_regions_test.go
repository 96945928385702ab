package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/admin"
)

// TestMergeRegionViews: two brokers of eu-west see us-east differently;
// the merged row sums lag messages and guests, keeps the largest lag
// seconds, the worse catch-up state and the phase furthest from home.
func TestMergeRegionViews(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	views := []admin.RegionsView{
		{Region: "eu-west", Broker: "eu-west.b1", Regions: []admin.RegionState{
			{Region: "us-east", Reachable: true, CatchUp: admin.CatchUpCaughtUp, LagMsgs: 2, LagSeconds: 0.5, SwitchBack: "settling", SwitchBackAt: now.Add(3 * time.Second), Guests: 1},
			{Region: "ap-south", Reachable: true, CatchUp: admin.CatchUpCaughtUp, SwitchBack: "home"},
		}},
		{Region: "eu-west", Broker: "eu-west.b2", Regions: []admin.RegionState{
			{Region: "us-east", Reachable: false, CatchUp: admin.CatchUpUnreachable, LagMsgs: 5, LagSeconds: 4, SwitchBack: "away", Guests: 2},
			{Region: "ap-south", Reachable: true, CatchUp: admin.CatchUpCatchingUp, LagMsgs: 7, LagSeconds: 3, SwitchBack: "home"},
		}},
		{Region: "ap-south", Broker: "ap-south.b1", Regions: []admin.RegionState{
			{Region: "us-east", Reachable: true, CatchUp: admin.CatchUpCaughtUp, SwitchBack: "settling", SwitchBackAt: now.Add(2 * time.Second)},
		}},
	}
	rows := mergeRegionViews(views)
	if len(rows) != 3 {
		t.Fatalf("rows %+v", rows)
	}
	us := rows[1] // ap-south sorts first
	if rows[0].From != "ap-south" || us.From != "eu-west" || us.To != "us-east" {
		t.Fatalf("order %+v", rows)
	}
	if us.Brokers != 2 || us.Reachable != 1 || us.CatchUp != admin.CatchUpUnreachable || us.LagMsgs != 7 || us.LagSeconds != 4 ||
		us.SwitchBack != "away" || !us.SwitchBackAt.IsZero() || us.Guests != 3 {
		t.Fatalf("eu-west→us-east %+v", us)
	}
	if ap := rows[2]; ap.CatchUp != admin.CatchUpCatchingUp || ap.SwitchBack != "home" || ap.LagMsgs != 7 {
		t.Fatalf("eu-west→ap-south %+v", ap)
	}
	var out bytes.Buffer
	if err := printRegionViews(&out, rows, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1/2 brokers", "7 msgs 4.0s", "settling (guests go home in 2s)", "catching-up"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
