package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratamesh/strata/admin"
)

// geoMesh is three regions whose demo/geo namespace replicates across
// all three (the default replication list: every region).
var geoMesh = geoMeshWith("geo", geoRegions, 500, "        retention: {time: 1h}\n")

// geoMeshWith is a mesh (named e2e-<name>) of regions, each of two
// brokers and three bookies (E2/Qw2/Qa2, ledgers rolled over every
// rollover entries), whose demo/geo namespace (2 bundles) has the extra
// lines nsExtra, indented as the namespace's fields (e.g.
// "        retention: {messages: 50}\n").
func geoMeshWith(name string, regions []string, rollover int, nsExtra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mesh: e2e-%s\ndefaults:\n  ledger: {ensemble: 2, write_quorum: 2, ack_quorum: 2}\n", name)
	fmt.Fprintf(&b, "  rollover: {max_entries: %d}\n  jetstream: {tenant: demo, namespace: streams}\nregions:\n", rollover)
	for _, r := range regions {
		fmt.Fprintf(&b, "  - {name: %s, brokers: 2, bookies: 3}\n", r)
	}
	b.WriteString("tenants:\n  - name: demo\n    namespaces:\n      - name: streams\n      - name: geo\n        bundles: 2\n")
	return b.String() + nsExtra
}

// geoPairWith is geoMeshWith for the two regions r1 and r2, rolling
// ledgers over every 20 entries.
func geoPairWith(name, nsExtra string) string {
	return geoMeshWith(name, []string{"r1", "r2"}, 20, nsExtra)
}

var geoRegions = []string{"r1", "r2", "r3"}

// geoCluster is a mesh of three regions, every node its own `strata
// node` process (so a test can freeze or kill any of them).
type geoCluster struct {
	dir     string
	topo    string
	regions map[string]*geoRegion
	http    *http.Client
}

type geoRegion struct {
	name    string
	meta    *nodeProcess
	bookies []*nodeProcess
	brokers map[string]*nodeProcess // by id: b1, b2
	args    map[string][]string
	common  []string // every node's flags but --id and the seeds
	wanSeed string   // the WAN seed its brokers joined through ("" for the first)
}

// startGeoCluster starts the regions of src (geoMesh's shape: brokers
// b1, b2 and bookies k1..k3 in each), brokers joining one Serf WAN pool
// through the first broker started.
func startGeoCluster(t *testing.T, src string, regions []string) *geoCluster {
	t.Helper()
	began := time.Now()
	dir := t.TempDir()
	c := &geoCluster{dir: dir, topo: writeTopology(t, dir, "geo.yaml", src), regions: map[string]*geoRegion{},
		http: &http.Client{Timeout: 3 * time.Second}}
	var wanSeed string
	for _, r := range regions {
		g := &geoRegion{name: r, wanSeed: wanSeed,
			common: []string{"--topology", c.topo, "--region", r, "--data-dir", filepath.Join(dir, "data"), "--gossip", "loopback", "--log-level", "info"}}
		c.regions[r] = g
		g.startAll(t, dir)
		if wanSeed == "" {
			wanSeed = g.brokers["b1"].report.SerfWAN
		}
	}
	t.Logf("%d regions started in %v", len(regions), time.Since(began))
	return c
}

// startAll starts the region's meta node, bookies k1..k3 and brokers
// b1, b2 (on their data, if any).
func (g *geoRegion) startAll(t *testing.T, dir string) {
	t.Helper()
	g.brokers, g.args, g.bookies = map[string]*nodeProcess{}, map[string][]string{}, nil
	g.meta = startNodeProcess(t, filepath.Join(dir, g.name+"-meta.log"), append(append([]string{}, g.common...), "--id", "meta")...)
	join := []string{"--etcd", g.meta.report.Etcd, "--join", g.meta.report.SerfLAN}
	for _, id := range []string{"k1", "k2", "k3"} {
		g.bookies = append(g.bookies, startNodeProcess(t, filepath.Join(dir, g.name+"-"+id+".log"), append(append(append([]string{}, g.common...), "--id", id), join...)...))
	}
	seed := g.wanSeed
	for _, id := range []string{"b1", "b2"} {
		args := append(append(append([]string{}, g.common...), "--id", id), join...)
		if seed != "" {
			args = append(args, "--wan-join", seed)
		}
		g.args[id] = args
		g.start(t, dir, id)
		if seed == "" {
			seed = g.brokers[id].report.SerfWAN
		}
	}
}

// rebuild kills every node of the region, deletes its data and starts it
// again empty (brokers joining the WAN pool through seed).
func (g *geoRegion) rebuild(t *testing.T, dir, seed string) {
	t.Helper()
	for _, p := range g.brokers {
		p.kill()
	}
	for _, p := range g.bookies {
		p.kill()
	}
	g.meta.kill()
	if err := os.RemoveAll(filepath.Join(dir, "data", g.name)); err != nil {
		t.Fatal(err)
	}
	g.wanSeed = seed
	g.startAll(t, dir)
}

func (g *geoRegion) start(t *testing.T, dir, id string) {
	t.Helper()
	g.brokers[id] = startNodeProcess(t, filepath.Join(dir, g.name+"-"+id+".log"), g.args[id]...)
}

// urls is the NATS URLs of the region's brokers.
func (g *geoRegion) urls() []string {
	var out []string
	for _, id := range []string{"b1", "b2"} {
		if p := g.brokers[id]; p != nil {
			out = append(out, p.report.NATS)
		}
	}
	return out
}

// signalBrokers sends sig to every broker of the region.
func (g *geoRegion) signalBrokers(sig syscall.Signal) {
	for _, p := range g.brokers {
		p.signal(sig)
	}
}

// topicStats asks the region's brokers, in turn, for a topic's stats.
func (c *geoCluster) topicStats(region, topic string) (*admin.TopicStats, error) {
	g := c.regions[region]
	var lastErr error
	for _, id := range []string{"b1", "b2"} {
		p := g.brokers[id]
		if p == nil || p.exited() {
			continue
		}
		resp, err := c.http.Get(p.report.Admin + "/admin/v1/topics/" + topic + "/stats")
		if err != nil {
			lastErr = err
			continue
		}
		var v struct {
			Topic *admin.TopicStats `json:"topic"`
		}
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || v.Topic == nil {
			lastErr = fmt.Errorf("%s %s: status %d: %v", region, id, resp.StatusCode, err)
			continue
		}
		return v.Topic, nil
	}
	return nil, lastErr
}

// ownerID is the id (b1, b2) of the region's broker owning topic, "" if
// unknown.
func (c *geoCluster) ownerID(region, topic string) string {
	st, err := c.topicStats(region, topic)
	if err != nil || st.Owner == "" {
		return ""
	}
	return st.Owner[len(region)+1:]
}

// converged reports whether every region holds want messages of topic
// and every replicator cursor has lag 0, and describes the first that
// does not.
func (c *geoCluster) converged(regions []string, topic string, want uint64) (bool, string) {
	for _, r := range regions {
		st, err := c.topicStats(r, topic)
		if err != nil {
			return false, fmt.Sprintf("%s: %v", r, err)
		}
		if st.Messages != want {
			return false, fmt.Sprintf("%s holds %d messages of %d", r, st.Messages, want)
		}
		if st.Replication == nil || len(st.Replication.Cursors) != len(regions)-1 {
			return false, fmt.Sprintf("%s: replication not reported", r)
		}
		for _, cur := range st.Replication.Cursors {
			if cur.LagMsgs != 0 {
				return false, fmt.Sprintf("%s → %s: lag %d (%s)", r, cur.Remote, cur.LagMsgs, cur.State)
			}
		}
	}
	return true, ""
}

// waitConverged waits until converged holds, failing with what is still
// missing after timeout.
func (c *geoCluster) waitConverged(t *testing.T, regions []string, topic string, want uint64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := c.converged(regions, topic, want)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not converged after %v: %s", timeout, why)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
