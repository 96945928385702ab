package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/drill"
	"github.com/stratamesh/strata/internal/harness"
)

// partitionDrillScenario runs `strata drill failover --mode partition`
// on region b of a running mesh of regions a, b, c in network namespaces
// (partialMesh) whose nodes h runs (h's Links the Net): h serves its
// fault socket in a temporary data directory, and the drill, given the
// regions' NATS URLs with --nats (no mesh.json), cuts b from a and c
// through it, moves its clients to a, heals and waits for catch-up. Its
// JSON report must parse and show nothing lost, the RPO and RTO within
// the thresholds passed, and clients that ran in b and then in a.
func partitionDrillScenario(t *testing.T, c *geoCluster, h *harness.Harness) {
	began := time.Now()
	dir := t.TempDir()
	ln, err := harness.ListenSocket(filepath.Join(dir, harness.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- harness.ServeListener(ctx, h, ln) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("fault socket: %v", err)
		}
	}()

	const maxRTO, maxRPO = 15.0, 3.0
	args := []string{"drill", "failover", "--data-dir", dir, "--region", "b", "--mode", "partition",
		"--for", "5s", "--warmup", "2s", "--load", "50", "--namespace", "demo/geo", "--catch-up-timeout", "90s",
		"--max-rto", "15s", "--max-rpo", "3s", "--max-lost", "0", "--json"}
	for _, r := range []string{"a", "b", "c"} {
		args = append(args, "--nats", r+"="+strings.Join(c.regions[r].urls(), ","))
	}
	out, errOut, code := strataLong(t, 4*time.Minute, args...)
	var rep struct {
		drill.Report
		Violations []drill.Violation `json:"violations"`
		Pass       bool              `json:"pass"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("drill --json is not JSON (%v); exit %d\nstdout: %s\nstderr: %s", err, code, out, errOut)
	}
	t.Logf("partition drill of b: RPO %d msgs %.3fs, RTO publish %v consume %v, lost %d, duplicates %+v, catch-up %v",
		rep.RPO.Msgs, rep.RPO.S, fptr(rep.RTO.PublishS), fptr(rep.RTO.ConsumeS), rep.Lost, rep.Duplicates, fptr(rep.CatchUpS))
	if code != 0 || !rep.Pass || len(rep.Violations) != 0 {
		t.Fatalf("drill failed: exit %d, violations %v\nstderr: %s", code, rep.Violations, errOut)
	}
	if rep.Mode != "partition" || rep.Region != "b" || rep.Survivor != "a" {
		t.Fatalf("drill of %s in mode %s with survivor %s, want b, partition, a", rep.Region, rep.Mode, rep.Survivor)
	}
	if rep.Lost != 0 || !rep.CaughtUp || rep.RPO.S > maxRPO || rep.RTO.PublishS == nil || *rep.RTO.PublishS > maxRTO ||
		rep.RTO.ConsumeS == nil || *rep.RTO.ConsumeS > maxRTO {
		t.Fatalf("report outside the thresholds passed: %+v", rep.Report)
	}
	if rep.Published.InRegion < 20 || rep.Published.InSurvivors < 20 {
		t.Fatalf("the drill's clients did not run in both regions: %+v", rep.Published)
	}
	t.Logf("partition drill took %v", time.Since(began))
}
