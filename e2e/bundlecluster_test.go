package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/broker/bundle"
	"github.com/stratamesh/strata/internal/testutil"
)

// bundleRegion is one region of three brokers and four bookies
// (E3/Qw2/Qa2) with two namespaces of four bundles each: demo/bun, where
// the tests' twenty topics live, and demo/streams (defaults.jetstream),
// so the region has eight bundles and an even spread over three brokers
// is 3/3/2.
const bundleRegion = `mesh: e2e-bundles
defaults:
  rollover: {max_entries: 100}
  jetstream: {tenant: demo, namespace: streams}
regions:
  - name: solo
    brokers: 3
    bookies: 4
    ledger: {ensemble: 3, write_quorum: 2, ack_quorum: 2}
tenants:
  - name: demo
    namespaces:
      - name: streams
      - name: bun
        bundles: 4
`

const (
	bunNamespace   = "bun"
	bunBundles     = 4
	bunTopics      = 20
	regionBundles  = 8 // demo/streams and demo/bun, 4 each
	brokerPrefix   = "solo."
	frozenPerTopic = 5 // publishes sent to the frozen owner, per topic
)

var bundleBrokers = []string{"b1", "b2", "b3"}

// bundleCluster is a meta node, four bookies and three brokers of one
// region, each its own `strata node` process.
type bundleCluster struct {
	dir     string
	meta    *nodeProcess
	brokers map[string]*nodeProcess
	args    map[string][]string
	http    *http.Client
}

func startBundleCluster(t *testing.T) *bundleCluster {
	t.Helper()
	began := time.Now()
	dir := t.TempDir()
	topo := writeTopology(t, dir, "bundles.yaml", bundleRegion)
	c := &bundleCluster{dir: dir, brokers: map[string]*nodeProcess{}, args: map[string][]string{},
		http: &http.Client{Timeout: 2 * time.Second}} // a frozen broker must not hang a poll
	common := []string{"--topology", topo, "--region", "solo", "--data-dir", filepath.Join(dir, "data"), "--gossip", "loopback", "--log-level", "info"}
	c.meta = startNodeProcess(t, filepath.Join(dir, "meta.log"), append(common, "--id", "meta")...)
	join := []string{"--etcd", c.meta.report.Etcd, "--join", c.meta.report.SerfLAN}
	for _, id := range []string{"k1", "k2", "k3", "k4"} {
		startNodeProcess(t, filepath.Join(dir, id+".log"), append(append(append([]string{}, common...), "--id", id), join...)...)
	}
	for _, id := range bundleBrokers {
		c.args[id] = append(append(append([]string{}, common...), "--id", id), join...)
		c.start(t, id)
	}
	t.Logf("meta, 4 bookies and 3 brokers started in %v", time.Since(began))
	return c
}

// start starts broker id (again) on its data and log.
func (c *bundleCluster) start(t *testing.T, id string) {
	t.Helper()
	c.brokers[id] = startNodeProcess(t, filepath.Join(c.dir, id+".log"), c.args[id]...)
}

func (c *bundleCluster) natsURL(id string) string { return c.brokers[id].report.NATS }

// connectURLs reads the INFO broker id sends a new client and returns
// its connect_urls: the broker and the peers it has a route to.
func (c *bundleCluster) connectURLs(id string) ([]string, error) {
	addr := strings.TrimPrefix(c.natsURL(id), "nats://")
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return nil, err
	}
	var info struct {
		ConnectURLs []string `json:"connect_urls"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(line), "INFO ")), &info); err != nil {
		return nil, fmt.Errorf("INFO: %w", err)
	}
	return info.ConnectURLs, nil
}

// waitRouteMesh waits until every broker in live has a route to every
// other one (its INFO connect_urls lists them all): until then a broker
// parks what it must forward to an owner it has no route to. Brokers
// find each other through the Serf LAN pool, which can take seconds to
// tell one broker of another; the bundle ownership in etcd does not wait
// for that.
func (c *bundleCluster) waitRouteMesh(t *testing.T, live []string) {
	t.Helper()
	took := testutil.Eventually(t, "a route between every two brokers", 60*time.Second, func() bool {
		for _, id := range live {
			urls, err := c.connectURLs(id)
			if err != nil || len(urls) != len(live) {
				return false
			}
		}
		return true
	})
	t.Logf("route mesh of %v complete after %v", live, took)
}

// bundleRow is one bundle of GET /admin/v1/bundles.
type bundleRow struct {
	Bundle    string `json:"bundle"`
	Owner     string `json:"owner"`
	Topics    int    `json:"topics"`
	Unloading string `json:"unloading"`
}

// bundlesVia asks broker id's admin API for the region's bundles.
func (c *bundleCluster) bundlesVia(id string) ([]bundleRow, error) {
	return bundlesAt(c.http, c.brokers[id].report.Admin)
}

// bundlesAt asks the admin API at admin (a base URL) for the region's
// bundles.
func bundlesAt(hc *http.Client, admin string) ([]bundleRow, error) {
	resp, err := hc.Get(admin + "/admin/v1/bundles")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /admin/v1/bundles: %s", resp.Status)
	}
	var body struct {
		Region  string      `json:"region"`
		Bundles []bundleRow `json:"bundles"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	return body.Bundles, nil
}

// owners returns bundle → owner (node id, "" when none) as every broker
// in via sees it; ok is false unless they all answer the same, with
// every one of the region's bundles listed and none being unloaded.
func (c *bundleCluster) owners(via []string) (map[string]string, bool) {
	var first map[string]string
	for _, id := range via {
		rows, err := c.bundlesVia(id)
		if err != nil || len(rows) != regionBundles {
			return nil, false
		}
		m := map[string]string{}
		for _, r := range rows {
			if r.Unloading != "" {
				return nil, false
			}
			m[r.Bundle] = strings.TrimPrefix(r.Owner, brokerPrefix)
		}
		if first == nil {
			first = m
			continue
		}
		for b, o := range m {
			if first[b] != o {
				return nil, false
			}
		}
	}
	return first, first != nil
}

// loadOf counts the bundles each of live owns (zero for those owning none).
func loadOf(owners map[string]string, live []string) map[string]int {
	load := map[string]int{}
	for _, id := range live {
		load[id] = 0
	}
	for _, o := range owners {
		load[o]++
	}
	return load
}

// balancedOver reports whether every bundle is owned by one of live and
// their counts differ by at most one (the load threshold).
func balancedOver(owners map[string]string, live []string) bool {
	load := loadOf(owners, live)
	if len(load) != len(live) { // an owner outside live, or none
		return false
	}
	lo, hi := regionBundles, 0
	for _, n := range load {
		lo, hi = min(lo, n), max(hi, n)
	}
	return hi-lo <= 1
}

// waitBalanced waits until the live brokers agree on an even spread of
// the region's bundles over themselves, seen twice in a row at least
// 300 ms apart, and returns it.
func (c *bundleCluster) waitBalanced(t *testing.T, what string, live []string, timeout time.Duration) map[string]string {
	t.Helper()
	var prev, got map[string]string
	var prevAt time.Time
	took := testutil.Eventually(t, what, timeout, func() bool {
		o, ok := c.owners(live)
		if !ok || !balancedOver(o, live) {
			prev = nil
			return false
		}
		if prev == nil || !sameOwners(prev, o) {
			prev, prevAt = o, time.Now()
			return false
		}
		if time.Since(prevAt) < 300*time.Millisecond {
			return false
		}
		got = o
		return true
	})
	t.Logf("%s after %v: %v", what, took, loadOf(got, live))
	return got
}

func sameOwners(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// nobodyOwnedBy reports whether every bundle has an owner and none is
// owned by gone, and every demo/bun topic has an owner other than gone,
// as the brokers in via all see it (bundles and topics admin APIs).
func (c *bundleCluster) nobodyOwnedBy(via []string, gone string) bool {
	o, ok := c.owners(via)
	if !ok {
		return false
	}
	for _, owner := range o {
		if owner == "" || owner == gone {
			return false
		}
	}
	_, ok = c.topicsAgree(via, o)
	return ok
}

// topicOwnersVia asks broker id's admin API for the owners (node ids) of
// the demo/bun topics.
func (c *bundleCluster) topicOwnersVia(id string) (map[string]string, error) {
	resp, err := c.http.Get(c.brokers[id].report.Admin + "/admin/v1/topics/demo/" + bunNamespace)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /admin/v1/topics/demo/%s: %s", bunNamespace, resp.Status)
	}
	var body struct {
		Topics []struct {
			Topic, Owner string
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, tp := range body.Topics {
		out[tp.Topic] = strings.TrimPrefix(tp.Owner, brokerPrefix)
	}
	return out, nil
}

// topicsAgree reports whether every broker in via lists the twenty
// demo/bun topics, each owned by the owner of its bundle in owners (as
// GET /admin/v1/bundles gave them), and counts each bundle's topics as
// bundle.Of places them. It returns topic → owner.
func (c *bundleCluster) topicsAgree(via []string, owners map[string]string) (map[string]string, bool) {
	want := map[string]int{}
	for _, tp := range bunTopicNames() {
		want[bunBundleOf(tp)]++
	}
	var out map[string]string
	for _, id := range via {
		tops, err := c.topicOwnersVia(id)
		if err != nil || len(tops) != bunTopics {
			return nil, false
		}
		for tp, o := range tops {
			if o == "" || o != owners[bunBundleOf(tp)] {
				return nil, false
			}
		}
		rows, err := c.bundlesVia(id)
		if err != nil {
			return nil, false
		}
		for _, r := range rows {
			if strings.HasPrefix(r.Bundle, "demo/"+bunNamespace+"/") && r.Topics != want[r.Bundle] {
				return nil, false
			}
		}
		out = tops
	}
	return out, out != nil
}

// waitTopicsAgree waits until the topics admin API agrees with the
// bundle owners on every broker in via.
func (c *bundleCluster) waitTopicsAgree(t *testing.T, via []string, owners map[string]string) {
	t.Helper()
	testutil.Eventually(t, "every topic's owner (admin topics API) is its bundle's owner", 30*time.Second, func() bool {
		_, ok := c.topicsAgree(via, owners)
		return ok
	})
}

// bunTopicNames is t1 … t20, each with its bundle.
func bunTopicNames() []string {
	out := make([]string, bunTopics)
	for i := range out {
		out[i] = fmt.Sprintf("t%d", i+1)
	}
	return out
}

func bunBundleOf(topic string) string {
	return bundle.Of("demo", bunNamespace, topic, bunBundles).String()
}

// victimOf picks the broker owning the most demo/bun topics and logs how
// the topics spread over bundles and brokers.
func victimOf(t *testing.T, owners map[string]string) (victim string, itsTopics []string) {
	t.Helper()
	perBundle := map[string][]string{}
	perBroker := map[string][]string{}
	for _, tp := range bunTopicNames() {
		b := bunBundleOf(tp)
		perBundle[b] = append(perBundle[b], tp)
		perBroker[owners[b]] = append(perBroker[owners[b]], tp)
	}
	var lines []string
	for b, tps := range perBundle {
		lines = append(lines, fmt.Sprintf("%s (owner %s): %v", b, owners[b], tps))
	}
	sort.Strings(lines)
	t.Logf("demo/bun topics by bundle:\n  %s", strings.Join(lines, "\n  "))
	for _, id := range bundleBrokers {
		if len(perBroker[id]) > len(itsTopics) {
			victim, itsTopics = id, perBroker[id]
		}
	}
	if victim == "" {
		t.Fatal("no broker owns a demo/bun bundle with topics")
	}
	return victim, itsTopics
}

func othersThan(id string) []string {
	var out []string
	for _, b := range bundleBrokers {
		if b != id {
			out = append(out, b)
		}
	}
	return out
}
