package status

import (
	"context"
	"encoding/json"
	"github.com/stratamesh/strata/admin"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/gossip"
	"github.com/stratamesh/strata/internal/meshfile"
)

// TestCollectSurvivesHungNode: a node that never answers (SIGSTOPped)
// must not hide the other regions' answers.
func TestCollectSurvivesHungNode(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hung.Close()
	defer close(release)
	serve := func(v admin.MembersView) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/readyz" {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			json.NewEncoder(w).Encode(v)
		}))
	}
	east := serve(admin.MembersView{Node: "east.b1", LAN: []admin.Member{{Name: "east.b1", State: "alive"}, {Name: "east.k1", State: "failed"}},
		WAN: []admin.Member{{Name: "east.b1", State: "alive"}, {Name: "west.b1", State: "alive"}}})
	defer east.Close()
	west := serve(admin.MembersView{Node: "west.b1", LAN: []admin.Member{{Name: "west.b1", State: "alive"}}})
	defer west.Close()

	f := &meshfile.File{Mesh: "m", Regions: []meshfile.Region{
		{Name: "east", Nodes: []meshfile.Node{{ID: "k1", Role: "bookie", Admin: hung.URL}, {ID: "b1", Role: "broker", Admin: east.URL}}},
		{Name: "west", Nodes: []meshfile.Node{{ID: "b1", Role: "broker", Admin: west.URL}}},
	}}
	start := time.Now()
	live, answered := Collect(context.Background(), f, &http.Client{Timeout: 300 * time.Millisecond})
	t.Logf("collected in %v", time.Since(start))
	if answered != 2 {
		t.Fatalf("answered = %d, want 2", answered)
	}
	if got := live.Node("east", "k1"); got.State != gossip.StateFailed || got.Ready != nil {
		t.Fatalf("hung east/k1 = %+v, want failed with no readiness answer", got)
	}
	if got := live.Node("west", "b1"); got.State != gossip.StateAlive || got.Ready == nil || *got.Ready {
		t.Fatalf("west/b1 = %+v, want alive and not ready", got)
	}
	if len(live.Regions[0].WAN) != 2 {
		t.Fatalf("east WAN view = %+v", live.Regions[0].WAN)
	}
	if f.Regions[0].Nodes[0].State != "" {
		t.Fatal("Collect modified its input")
	}
}

// TestCollectShowsAHandRestartedNode: a node `up` saw exit but that
// answers again as itself (restarted by hand) shows the answering
// process's pid and no exit; an answer from another node at that address
// (a port taken over) changes nothing.
func TestCollectShowsAHandRestartedNode(t *testing.T) {
	serve := func(v admin.MembersView) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(v)
		}))
		t.Cleanup(s.Close)
		return s
	}
	lan := []admin.Member{{Name: "east.k1", State: "alive"}, {Name: "east.k2", State: "alive"}}
	k1 := serve(admin.MembersView{Node: "east.k1", LAN: lan, PID: 4242})
	other := serve(admin.MembersView{Node: "east.k9", LAN: lan, PID: 777})
	f := &meshfile.File{Mesh: "m", Regions: []meshfile.Region{{Name: "east", Nodes: []meshfile.Node{
		{ID: "k1", Role: "meta", Admin: k1.URL, PID: 100, Exited: "signal: killed"},
		{ID: "k2", Role: "meta", Admin: other.URL, PID: 101, Exited: "signal: killed"},
	}}}}
	live, _ := Collect(context.Background(), f, &http.Client{Timeout: 2 * time.Second})
	if got := live.Node("east", "k1"); got.PID != 4242 || got.Exited != "" {
		t.Errorf("hand-restarted k1 = pid %d, exited %q; want pid 4242 and no exit", got.PID, got.Exited)
	}
	if got := live.Node("east", "k2"); got.PID != 101 || got.Exited != "signal: killed" {
		t.Errorf("k2, whose address another node answers = pid %d, exited %q; want them unchanged", got.PID, got.Exited)
	}
}
