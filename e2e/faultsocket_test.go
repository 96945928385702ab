package e2e

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/harness"
	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/testutil"
)

// TestUpFaultSocket runs the default mesh with `strata up` and drives it
// through its fault socket (faultSocketScenario).
func TestUpFaultSocket(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	up := startUp(t, dataDir)
	_, took := waitAlive(t, up, "the default mesh alive")
	t.Logf("default mesh alive after %v", took)
	faultSocketScenario(t, up, dataDir)
}

// faultSocketScenario drives a running `strata up` mesh through
// <dataDir>/fault.sock: freeze and thaw a broker, kill a bookie (up
// prints one line, not a crash report) and restart it, restart a whole
// region; after each, every node is alive again. It leaves the mesh as it
// found it (every node running and alive).
func faultSocketScenario(t *testing.T, up *upProcess, dataDir string) {
	start := time.Now()
	f, err := harness.Dial(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mf, err := meshfile.Read(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if mf.FaultSocket != filepath.Join(dataDir, harness.SocketName) {
		t.Errorf("mesh.json names fault socket %q", mf.FaultSocket)
	}
	infos, err := f.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, r := range mf.Regions {
		total += len(r.Nodes)
	}
	if len(infos) != total {
		t.Fatalf("fault socket lists %d nodes, mesh.json %d", len(infos), total)
	}
	state := func(region, id string) harness.NodeInfo {
		t.Helper()
		infos, err := f.Nodes()
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range infos {
			if i.Region == region && i.ID == id {
				return i
			}
		}
		t.Fatalf("no %s/%s in the fault socket's list", region, id)
		return harness.NodeInfo{}
	}
	last := mf.Regions[len(mf.Regions)-1]
	first := mf.Regions[0]
	var broker, bookie string
	for _, n := range first.Nodes {
		switch {
		case n.Role == harness.RoleBroker && broker == "":
			broker = n.ID
		case n.Role == harness.RoleBookie && bookie == "":
			bookie = n.ID
		}
	}

	if err := f.Freeze(first.Name, broker); err != nil {
		t.Fatal(err)
	}
	if s := state(first.Name, broker).State; s != harness.StateFrozen {
		t.Fatalf("%s/%s after freeze: %s", first.Name, broker, s)
	}
	if err := f.Thaw(first.Name, broker); err != nil {
		t.Fatal(err)
	}

	pid := state(first.Name, bookie).PID
	if err := f.Kill(first.Name, bookie); err != nil {
		t.Fatal(err)
	}
	if i := state(first.Name, bookie); i.State != harness.StateExited || !i.Intended || !processGone(pid) {
		t.Fatalf("%s/%s after kill: %+v", first.Name, bookie, i)
	}
	testutil.Eventually(t, "up reporting the fault kill", 30*time.Second, func() bool {
		return strings.Contains(up.output(), "node "+first.Name+"/"+bookie+" (pid")
	})
	if o := up.output(); !strings.Contains(o, "killed by a fault command") || strings.Contains(o, "to start it again by hand") {
		t.Fatalf("a fault kill reported as a crash:\n%s", o)
	}
	if err := f.Restart(first.Name, bookie); err != nil {
		t.Fatal(err)
	}
	if err := f.Freeze(first.Name, "no-such-node"); !errors.Is(err, harness.ErrUnknownNode) {
		t.Errorf("freeze of an unknown node: %v", err)
	}
	if err := f.Cut(first.Name, last.Name); !errors.Is(err, harness.ErrNoNetwork) {
		t.Errorf("cut on a loopback mesh: %v", err)
	}
	_, took := waitAlive(t, up, "every node alive after freeze, thaw, kill and restart")
	t.Logf("alive again %v after the restart of %s/%s", took, first.Name, bookie)

	regionStart := time.Now()
	if err := f.RestartRegion(last.Name); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart-region %s: every node ready after %v", last.Name, time.Since(regionStart))
	_, took = waitAlive(t, up, "every node alive after the region restart")
	t.Logf("alive again %v after the region restart", took)
	g, err := meshfile.Read(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range g.Regions {
		for _, n := range r.Nodes {
			if n.Exited != "" {
				t.Errorf("mesh.json still has %s/%s exited (%s)", r.Name, n.ID, n.Exited)
			}
		}
	}
	t.Logf("fault socket scenario: %v", time.Since(start))
}
