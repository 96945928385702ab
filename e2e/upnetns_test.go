package e2e

import (
	"encoding/json"
	"net/netip"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/drill"
	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/testutil"
)

// upNetnsTopology: three regions of one broker and one bookie (E1), by
// counts on loopback, as a user writes them; `up --netns` moves them.
const upNetnsTopology = `mesh: e2e-upnetns
defaults:
  ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}
  jetstream: {tenant: demo, namespace: streams}
regions:
  - {name: a, brokers: 1, bookies: 1}
  - {name: b, brokers: 1, bookies: 1}
  - {name: c, brokers: 1, bookies: 1}
tenants:
  - name: demo
    namespaces:
      - name: streams
      - name: geo
        retention: {time: 1h}
`

// TestUpNetns runs `strata up --netns` (each region in a network
// namespace of its own) and upNetnsScenario on it, then stops up with
// SIGTERM: the namespaces must be gone.
func TestUpNetns(t *testing.T) {
	began := time.Now()
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	up := startUp(t, dataDir, "--netns", "-f", writeTopology(t, dir, "upnetns.yaml", upNetnsTopology))
	waitAlive(t, up, "the --netns mesh alive")
	nss := regexp.MustCompile(`\((stn[0-9a-f]{4}-\d+)\)`).FindAllStringSubmatch(up.output(), -1)
	if len(nss) != 3 {
		t.Fatalf("up --netns named %d namespaces, want 3:\n%s", len(nss), up.output())
	}
	t.Cleanup(func() { // if up did not remove them (it was killed)
		for _, ns := range nss {
			_ = exec.Command("ip", "netns", "delete", ns[1]).Run()
		}
	})
	t.Logf("up --netns alive after %v", time.Since(began))
	upNetnsScenario(t, up, dataDir)

	if err := up.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "strata up stopped", 60*time.Second, up.exited)
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	for _, ns := range nss {
		if strings.Contains(string(out), ns[1]) {
			t.Errorf("namespace %s left after up stopped", ns[1])
		}
	}
	t.Logf("TestUpNetns took %v", time.Since(began))
}

// upNetnsScenario runs on a `strata up --netns` mesh of regions a, b, c
// (upNetnsTopology): mesh.json lists every node at its region's
// namespace address (one per region), and `strata drill failover --mode
// partition` of b (from mesh.json and the fault socket) reports nothing
// lost and RPO and RTO within the thresholds passed.
func upNetnsScenario(t *testing.T, up *upProcess, dataDir string) {
	mf, err := meshfile.Read(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]string{}
	for _, r := range mf.Regions {
		for _, n := range r.Nodes {
			for _, ep := range []string{n.NATS, n.Admin, n.Etcd} {
				if ep == "" {
					continue
				}
				u, err := url.Parse(ep)
				if err != nil {
					t.Fatalf("%s/%s: endpoint %q: %v", r.Name, n.ID, ep, err)
				}
				a, err := netip.ParseAddr(u.Hostname())
				if err != nil || !netip.MustParsePrefix("10.213.0.0/16").Contains(a) {
					t.Fatalf("%s/%s: endpoint %s is not in a namespace (10.213/16)", r.Name, n.ID, ep)
				}
				if h, ok := hosts[r.Name]; ok && h != u.Hostname() {
					t.Fatalf("region %s has nodes at %s and %s", r.Name, h, u.Hostname())
				}
				hosts[r.Name] = u.Hostname()
			}
		}
	}
	if len(hosts) != 3 || hosts["a"] == hosts["b"] || hosts["b"] == hosts["c"] || hosts["a"] == hosts["c"] {
		t.Fatalf("region addresses %v: want three different ones", hosts)
	}

	start := time.Now()
	out, errOut, code := strataLong(t, 4*time.Minute, "drill", "failover", "--data-dir", dataDir, "--region", "b",
		"--mode", "partition", "--namespace", "demo/geo", "--for", "5s", "--warmup", "2s", "--load", "50",
		"--catch-up-timeout", "90s", "--max-rto", "15s", "--max-rpo", "3s", "--max-lost", "0", "--json")
	var rep struct {
		drill.Report
		Violations []drill.Violation `json:"violations"`
		Pass       bool              `json:"pass"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("drill --json is not JSON (%v); exit %d\nstdout: %s\nstderr: %s", err, code, out, errOut)
	}
	t.Logf("partition drill of b on up --netns (%v): RPO %d msgs %.3fs, RTO publish %v consume %v, lost %d, catch-up %v",
		time.Since(start).Round(time.Millisecond), rep.RPO.Msgs, rep.RPO.S, fptr(rep.RTO.PublishS), fptr(rep.RTO.ConsumeS), rep.Lost, fptr(rep.CatchUpS))
	if code != 0 || !rep.Pass || len(rep.Violations) != 0 {
		t.Fatalf("drill failed: exit %d, violations %v\nstderr: %s", code, rep.Violations, errOut)
	}
	if rep.Mode != "partition" || rep.Lost != 0 || !rep.CaughtUp || rep.RPO.S > 3 || rep.RTO.PublishS == nil || *rep.RTO.PublishS > 15 ||
		rep.RTO.ConsumeS == nil || *rep.RTO.ConsumeS > 15 || rep.Published.InRegion < 20 || rep.Published.InSurvivors < 20 {
		t.Fatalf("report outside the thresholds passed: %+v", rep.Report)
	}
}
