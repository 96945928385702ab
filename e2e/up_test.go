package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/gossip"
	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/testutil"
)

const twoRegions = `mesh: e2e
defaults:
  ledger: {ensemble: 2, write_quorum: 2, ack_quorum: 2}
regions:
  - name: east
    brokers: 2
    bookies: 3
  - name: west
    brokers: 2
    bookies: 3
tenants:
  - name: demo
    namespaces:
      - name: events
`

// TestUpTwoRegions runs a 2-region mesh, waits until every member is alive
// in both LAN pools and the WAN pool, SIGKILLs a node and sees the others
// mark it failed, then stops `up` with SIGTERM and checks that it exits 0
// and leaves no node process behind.
func TestUpTwoRegions(t *testing.T) {
	dir := t.TempDir()
	topo := writeTopology(t, dir, "mesh.yaml", twoRegions)
	dataDir := filepath.Join(dir, "data")
	up := startUp(t, dataDir, "-f", topo)
	live, took := waitAlive(t, up, "every member alive in both LAN pools and the WAN pool")
	t.Logf("mesh of %d regions alive after %v", len(live.Regions), took)
	checkShape(t, live)
	checkBookies(t, dataDir, live)
	checkBookieReadOnly(t, dataDir)

	// SIGKILL one bookie of west; the rest of west must mark it failed.
	victim := live.Node("west", "k2")
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	took = testutil.Eventually(t, "west/k2 marked failed", 60*time.Second, func() bool {
		f, ok := meshStatus(t, dataDir)
		return ok && f.Node("west", "k2").State == gossip.StateFailed && f.Node("west", "b1").State == gossip.StateAlive
	})
	t.Logf("killed node marked failed after %v", took)
	testutil.Eventually(t, "up reporting the dead node", 30*time.Second, func() bool {
		return strings.Contains(up.output(), "node west/k2")
	})
	f, err := meshfile.Read(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Node("west", "k2").Exited; !strings.Contains(got, "killed") {
		t.Fatalf("mesh.json: west/k2 exited = %q, want it to say killed", got)
	}

	// SIGTERM to up: exit 0, no node left, mesh.json removed, data kept.
	if err := up.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-up.done:
	case <-time.After(60 * time.Second):
		t.Fatal("strata up did not exit within 60s of SIGTERM")
	}
	if up.exitErr != nil {
		t.Fatalf("strata up exit: %v", up.exitErr)
	}
	for _, r := range live.Regions {
		for _, n := range r.Nodes {
			if !processGone(n.PID) {
				t.Errorf("node %s/%s (pid %d) still running after up exited", r.Name, n.ID, n.PID)
			}
		}
	}
	if _, err := meshfile.Read(dataDir); err == nil {
		t.Error("mesh.json still present after a clean stop")
	}
	if _, err := os.Stat(filepath.Join(dataDir, "east", "meta")); err != nil {
		t.Errorf("metadata of east not kept for the next run: %v", err)
	}
}

// checkShape checks mesh.json's content against the topology.
func checkShape(t *testing.T, f *meshfile.File) {
	t.Helper()
	if f.Mesh != "e2e" || len(f.Regions) != 2 {
		t.Fatalf("mesh %q with %d regions, want e2e with 2", f.Mesh, len(f.Regions))
	}
	for _, r := range f.Regions {
		roles := map[string]int{}
		for _, n := range r.Nodes {
			roles[n.Role]++
			if n.Admin == "" || n.SerfLAN == "" || n.PID == 0 {
				t.Errorf("%s/%s lacks endpoints: %+v", r.Name, n.ID, n)
			}
			if (n.Role == "broker") != (n.SerfWAN != "") {
				t.Errorf("%s/%s: serf_wan %q (only brokers join the WAN pool)", r.Name, n.ID, n.SerfWAN)
			}
			if (n.Role == "meta") != (n.Etcd != "") {
				t.Errorf("%s/%s: etcd %q (only meta nodes run etcd)", r.Name, n.ID, n.Etcd)
			}
		}
		if roles["meta"] != 1 || roles["broker"] != 2 || roles["bookie"] != 3 {
			t.Errorf("region %s roles = %v, want 1 meta, 2 brokers, 3 bookies", r.Name, roles)
		}
		if len(r.WAN) != 4 {
			t.Errorf("region %s WAN view has %d members, want the 4 brokers", r.Name, len(r.WAN))
		}
		if r.Tier.Kind != "fs" || r.Tier.Dir == "" {
			t.Errorf("region %s tier = %+v, want fs with a dir", r.Name, r.Tier)
		}
	}
}

// checkBookies checks `strata admin bookies list --json` and the bookie
// details of `strata status` against the running mesh: every bookie of
// every region registered, with the instance its own node reports.
func checkBookies(t *testing.T, dataDir string, live *meshfile.File) {
	t.Helper()
	out, errOut, code := strata(t, "admin", "bookies", "list", "--json", "--data-dir", dataDir)
	if code != 0 {
		t.Fatalf("admin bookies list: code %d: %s", code, errOut)
	}
	var regions []struct {
		Region  string `json:"region"`
		Bookies []struct {
			ID, Instance, Address string
			UsedBytes             int64  `json:"used_bytes"`
			InfoError             string `json:"info_error"`
		} `json:"bookies"`
	}
	if err := json.Unmarshal([]byte(out), &regions); err != nil {
		t.Fatalf("admin bookies list --json: %v\n%s", err, out)
	}
	if len(regions) != 2 {
		t.Fatalf("bookie list has %d regions, want 2:\n%s", len(regions), out)
	}
	for _, r := range regions {
		if len(r.Bookies) != 3 {
			t.Fatalf("region %s lists %d bookies, want 3", r.Region, len(r.Bookies))
		}
		for _, b := range r.Bookies {
			n := live.Node(r.Region, b.ID)
			if n == nil || n.Bookie == nil || n.Bookie.Instance != b.Instance || n.GRPC != b.Address {
				t.Errorf("bookie %s/%s: listed %+v, status shows %+v", r.Region, b.ID, b, n)
			}
			// The list asks each bookie (Info) for its disk use.
			if b.InfoError != "" || b.UsedBytes <= 0 {
				t.Errorf("bookie %s/%s: listed with %d bytes used (info error %q)", r.Region, b.ID, b.UsedBytes, b.InfoError)
			}
		}
	}
}

// checkBookieReadOnly holds east's k1 read-only with `strata admin bookies
// read-only`, sees the region-wide list say so (from k1's registration and
// its own answer), and lifts it again.
func checkBookieReadOnly(t *testing.T, dataDir string) {
	t.Helper()
	readOnly := func() bool {
		out, errOut, code := strata(t, "admin", "bookies", "list", "--json", "--region", "east", "--data-dir", dataDir)
		if code != 0 {
			t.Fatalf("admin bookies list: code %d: %s", code, errOut)
		}
		var regions []struct {
			Bookies []struct {
				ID       string `json:"id"`
				ReadOnly bool   `json:"read_only"`
			} `json:"bookies"`
		}
		if err := json.Unmarshal([]byte(out), &regions); err != nil || len(regions) != 1 {
			t.Fatalf("admin bookies list --json: %v\n%s", err, out)
		}
		for _, b := range regions[0].Bookies {
			if b.ID == "k1" {
				return b.ReadOnly
			}
		}
		t.Fatalf("east lists no k1:\n%s", out)
		return false
	}
	if _, errOut, code := strata(t, "admin", "bookies", "read-only", "k1", "on", "--data-dir", dataDir); code == 0 || !strings.Contains(errOut, "--region") {
		t.Fatalf("read-only k1 (in both regions) without --region: code %d: %s", code, errOut)
	}
	out, errOut, code := strata(t, "admin", "bookies", "read-only", "k1", "on", "--region", "east", "--data-dir", dataDir)
	if code != 0 || !strings.Contains(out, "east/k1 is read-only") {
		t.Fatalf("read-only on: code %d: %s%s", code, out, errOut)
	}
	if !readOnly() {
		t.Fatal("east/k1 set read-only, but the list says writable")
	}
	out, errOut, code = strata(t, "admin", "bookies", "read-only", "k1", "off", "--region", "east", "--data-dir", dataDir)
	if code != 0 || !strings.Contains(out, "east/k1 is writable") {
		t.Fatalf("read-only off: code %d: %s%s", code, out, errOut)
	}
	if readOnly() {
		t.Fatal("east/k1 lifted, but the list says read-only")
	}
}
