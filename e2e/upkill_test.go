package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/testutil"
)

const oneRegion = `mesh: e2e-one
defaults:
  ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}
regions:
  - name: solo
    brokers: 1
    bookies: 2
`

// TestUpKilledTakesNodesWithIt SIGKILLs `strata up` itself: every node
// process must die with it (parent-death signal), and `strata status`
// must call the left-over mesh.json stale rather than show a dead mesh.
func TestUpKilledTakesNodesWithIt(t *testing.T) {
	dir := t.TempDir()
	topo := writeTopology(t, dir, "one.yaml", oneRegion)
	dataDir := filepath.Join(dir, "data")
	up := startUp(t, dataDir, "-f", topo)
	live, _ := waitAlive(t, up, "the mesh alive")
	var pids []int
	for _, n := range live.Regions[0].Nodes {
		pids = append(pids, n.PID)
	}
	if err := up.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-up.done
	took := testutil.Eventually(t, "every node process gone", 30*time.Second, func() bool {
		for _, pid := range pids {
			if !processGone(pid) {
				return false
			}
		}
		return true
	})
	t.Logf("%d nodes gone %v after up was killed", len(pids), took)
	_, errOut, code := strata(t, "status", "--data-dir", dataDir)
	if code == 0 || !strings.Contains(errOut, "stale") {
		t.Fatalf("status after a killed up: code %d, stderr %q; want a stale mesh.json error", code, errOut)
	}
	// The next up on the same data dir starts cleanly.
	up2 := startUp(t, dataDir, "-f", topo)
	waitAlive(t, up2, "the mesh alive again")
	if err := up2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-up2.done
	if up2.exitErr != nil {
		t.Fatalf("second up: %v", up2.exitErr)
	}
}
