package region

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"go.uber.org/goleak"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/bookie/storage"
	"github.com/stratamesh/strata/internal/gossip"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/topology"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const oneRegion = `mesh: unit
regions:
  - name: r1
    brokers: 1
    bookies: 1
    ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}
`

func parse(t *testing.T, src string) *topology.Mesh {
	t.Helper()
	m, _, err := topology.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func startNode(t *testing.T, cfg NodeConfig) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := StartNode(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(context.Background()) })
	return n
}

// TestRegionNodes runs a meta node, a broker and a bookie in-process, checks
// pools, registration, health and metrics, and that Stop deregisters.
func TestRegionNodes(t *testing.T) {
	m := parse(t, oneRegion)
	dir := t.TempDir()
	base := NodeConfig{Mesh: m, Region: "r1", DataDir: dir, Gossip: gossip.ProfileLoopback, RegistrationTTL: 2 * time.Second}

	mc := base
	mc.ID, mc.Role = "meta", topology.RoleMeta
	metaNode := startNode(t, mc)
	me := metaNode.Endpoints()
	if me.Etcd == "" || me.SerfLAN == "" || me.SerfWAN != "" {
		t.Fatalf("meta endpoints = %+v", me)
	}

	bc := base
	bc.ID, bc.EtcdEndpoints, bc.LANJoin = "b1", []string{me.Etcd}, []string{me.SerfLAN}
	broker := startNode(t, bc)
	kc := bc
	kc.ID = "k1"
	bookie := startNode(t, kc)
	if broker.Endpoints().SerfWAN == "" || bookie.Endpoints().SerfWAN != "" {
		t.Fatal("only brokers join the WAN pool")
	}

	testutil.Eventually(t, "three alive LAN members seen by the broker and the bookie", 10*time.Second, func() bool {
		return aliveIn(bookie.Members().LAN) == 3 && aliveIn(broker.Members().LAN) == 3
	})

	// Registration keys are in etcd under the region's prefix.
	store, err := meta.Open(context.Background(), meta.Config{Endpoints: []string{me.Etcd}, Prefix: "/strata/unit/r1"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	kvs, err := store.List(context.Background(), "nodes/")
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != 3 {
		t.Fatalf("registered nodes = %d, want 3", len(kvs))
	}

	// Health, readiness, metrics, members over HTTP.
	adminURL := broker.Endpoints().Admin
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := httpGet(t, adminURL+path); code != 200 {
			t.Fatalf("%s = %d %s", path, code, body)
		}
	}
	_, metrics := httpGet(t, adminURL+"/metrics")
	if !strings.Contains(metrics, `strata_gossip_members{`) || !strings.Contains(metrics, `pool="wan"`) {
		t.Fatalf("metrics lack strata_gossip_members for the WAN pool:\n%.2000s", metrics)
	}
	_, members := httpGet(t, adminURL+"/admin/v1/members")
	var mv admin.MembersView
	if err := json.Unmarshal([]byte(members), &mv); err != nil || mv.Node != "r1.b1" || len(mv.LAN) != 3 || len(mv.WAN) != 1 {
		t.Fatalf("members view = %+v (%v)", mv, err)
	}

	if _, bm := httpGet(t, bookie.Endpoints().Admin+"/metrics"); !strings.Contains(bm, "strata_bookie_journal_batches_total") {
		t.Fatalf("bookie metrics lack the journal counters:\n%.1500s", bm)
	}
	checkRoutes(t, bookie)
	checkRoutes(t, broker)
	_, bv := httpGet(t, bookie.Endpoints().Admin+"/admin/v1/bookie")
	var view admin.BookieView
	if err := json.Unmarshal([]byte(bv), &view); err != nil || view.ID != "k1" || view.Instance == "" || view.Address != bookie.Endpoints().GRPC || view.TotalBytes == 0 {
		t.Fatalf("bookie view = %+v (%v)", view, err)
	}
	// The region-wide list asks each registered bookie for its ledgers and
	// disk use (the registration carries neither).
	added := make(chan error, 1)
	bookie.engine.Add(storage.AddRequest{LedgerID: 5, EntryID: 0, LAC: -1, MasterKey: []byte("k"), Payload: []byte("x")},
		func(err error) { added <- err })
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	_, list := httpGet(t, adminURL+"/admin/v1/bookies")
	var lv struct {
		Bookies []admin.BookieView `json:"bookies"`
	}
	if err := json.Unmarshal([]byte(list), &lv); err != nil || len(lv.Bookies) != 1 {
		t.Fatalf("region bookie list: %v\n%s", err, list)
	}
	if b := lv.Bookies[0]; b.ID != "k1" || b.Instance != view.Instance || !b.Registered || b.Ledgers != 1 || b.UsedBytes <= 0 || b.InfoError != "" {
		t.Fatalf("region bookie list shows %+v; want k1 registered, with 1 ledger and its used bytes", b)
	}

	// Stop deregisters at once and leaves gracefully.
	if err := bookie.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := bookie.Stop(context.Background()); err != nil {
		t.Fatal("second Stop:", err)
	}
	if _, err := store.Get(context.Background(), "nodes/bookie/k1"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("bookie still registered after Stop: %v", err)
	}
	testutil.Eventually(t, "k1 left", 10*time.Second, func() bool {
		for _, mem := range broker.Members().LAN {
			if mem.Name == "r1.k1" {
				return mem.State == gossip.StateLeft
			}
		}
		return false
	})
}

func TestNodeConfigValidate(t *testing.T) {
	m := parse(t, oneRegion)
	err := NodeConfig{Mesh: m, Region: "r1", ID: "b1", Role: "bookie", Gossip: "fast", RegistrationTTL: -1}.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad config")
	}
	for _, want := range []string{"has role broker in the topology, not bookie", "DataDir is required", "RegistrationTTL -1ns is negative", `unknown gossip profile "fast"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error lacks %q:\n%v", want, err)
		}
	}
	if err := (NodeConfig{Mesh: m, Region: "nope", ID: "b1", DataDir: "x"}).Validate(); err == nil || !strings.Contains(err.Error(), `region "nope" is not in mesh "unit"`) {
		t.Fatalf("unknown region: %v", err)
	}
	if err := (NodeConfig{Mesh: m, Region: "r1", ID: "b9", DataDir: "x"}).Validate(); err == nil || !strings.Contains(err.Error(), `node "b9" is not in region "r1"`) {
		t.Fatalf("unknown node: %v", err)
	}
}

// TestRoutesInOpenAPI checks that every route a node serves is described in
// docs/admin-api.yaml.
func TestRoutesInOpenAPI(t *testing.T) {
	m := parse(t, oneRegion)
	mc := NodeConfig{Mesh: m, Region: "r1", ID: "meta", DataDir: t.TempDir(), Gossip: gossip.ProfileLoopback}
	checkRoutes(t, startNode(t, mc))
}

// checkRoutes fails the test for each route n serves that
// docs/admin-api.yaml does not describe.
func checkRoutes(t *testing.T, n *Node) {
	t.Helper()
	raw, err := os.ReadFile("../docs/admin-api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, route := range n.Routes() {
		method, path, _ := strings.Cut(route, " ")
		ops, ok := doc.Paths[path]
		if !ok {
			t.Errorf("route %s is not in docs/admin-api.yaml", route)
			continue
		}
		if _, ok := ops[strings.ToLower(method)]; !ok {
			t.Errorf("route %s: method %s is not in docs/admin-api.yaml", route, method)
		}
	}
}

func aliveIn(ms []admin.Member) int {
	alive := 0
	for _, m := range ms {
		if m.State == gossip.StateAlive {
			alive++
		}
	}
	return alive
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDuplicateNodeRefused starts a second process-like instance of a live
// node: it is refused before it meets the pools, and the original keeps its
// registration. A registration left by a dead process is taken over.
func TestDuplicateNodeRefused(t *testing.T) {
	m := parse(t, oneRegion)
	base := NodeConfig{Mesh: m, Region: "r1", DataDir: t.TempDir(), Gossip: gossip.ProfileLoopback, RegistrationTTL: 2 * time.Second}
	mc := base
	mc.ID = "meta"
	me := startNode(t, mc).Endpoints()

	store, err := meta.Open(context.Background(), meta.Config{Endpoints: []string{me.Etcd}, Prefix: "/strata/unit/r1"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// A dead process's registration: a live lease, an admin that does not answer.
	lease, err := store.GrantLease(context.Background(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Revoke(context.Background())
	if _, err := store.Put(context.Background(), "nodes/broker/b1", []byte(`{"id":"b1","admin":"http://127.0.0.1:1","pid":99999}`), meta.WithLease(lease.ID())); err != nil {
		t.Fatal(err)
	}

	bc := base
	bc.ID, bc.EtcdEndpoints, bc.LANJoin = "b1", []string{me.Etcd}, []string{me.SerfLAN}
	first := startNode(t, bc) // takes over the dead registration
	kv, err := store.Get(context.Background(), "nodes/broker/b1")
	if err != nil || !strings.Contains(string(kv.Value), first.Endpoints().Admin) {
		t.Fatalf("registration after takeover = %s, %v", kv.Value, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if dup, err := StartNode(ctx, bc); !errors.Is(err, ErrDuplicateNode) {
		if dup != nil {
			dup.Stop(context.Background())
		}
		t.Fatalf("second b1: err = %v, want ErrDuplicateNode", err)
	}
	kv, err = store.Get(context.Background(), "nodes/broker/b1")
	if err != nil || !strings.Contains(string(kv.Value), first.Endpoints().Admin) {
		t.Fatalf("original registration lost: %s, %v", kv.Value, err)
	}
	select {
	case err := <-first.Fatal():
		t.Fatalf("original node failed: %v", err)
	default:
	}
	for _, mem := range first.Members().LAN {
		if mem.State != gossip.StateAlive {
			t.Fatalf("original's pool disturbed: %+v", first.Members().LAN)
		}
	}
}

// TestRestartKeepsAddresses stops a node and starts it again on the same
// data directory: it comes back at the same ports (ports.json), so peers
// see the same member rejoin and --etcd/--join flags stay valid.
func TestRestartKeepsAddresses(t *testing.T) {
	m := parse(t, oneRegion)
	mc := NodeConfig{Mesh: m, Region: "r1", ID: "meta", DataDir: t.TempDir(), Gossip: gossip.ProfileLoopback}
	first := startNode(t, mc)
	before := first.Endpoints()
	if err := first.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := startNode(t, mc).Endpoints()
	if after.Etcd != before.Etcd || after.SerfLAN != before.SerfLAN || after.Admin != before.Admin {
		t.Fatalf("addresses changed across a restart:\nbefore %+v\nafter  %+v", before, after)
	}
}
