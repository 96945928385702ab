package topology

import (
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/stratamesh/strata/tenancy"
)

func parseGood(t *testing.T, path string) *Mesh {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, warns, err := Parse(path, data)
	if err != nil {
		t.Fatalf("Parse(%s):\n%v", path, err)
	}
	for _, w := range warns {
		t.Errorf("unexpected warning: %s", w)
	}
	return m
}

func TestGoodMinimalDefaults(t *testing.T) {
	m := parseGood(t, "testdata/good/minimal.yaml")
	r, ok := m.Region("solo")
	if !ok {
		t.Fatal("region solo missing")
	}
	want := Region{
		Name: "solo", Brokers: 1, Bookies: 4,
		Ledger:   &Ledger{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2},
		Rollover: &Rollover{MaxEntries: 50000, MaxSize: 256 * MiB, MaxAge: Duration(4 * time.Hour)},
		Metadata: Metadata{Embedded: true, Prefix: "/strata"},
		Tier:     Tier{Kind: TierFS},
	}
	if !reflect.DeepEqual(*r, want) {
		t.Errorf("region solo:\n got %+v\nwant %+v", *r, want)
	}
	if m.DataDir != "" || m.Defaults.JetStream != nil {
		t.Errorf("data_dir %q, jetstream %v: want them left unset", m.DataDir, m.Defaults.JetStream)
	}
	tn, _ := m.Tenant("demo")
	ns, ok := tn.Namespace("events")
	if !ok {
		t.Fatal("namespace events missing")
	}
	yes := true
	wantNS := Namespace{
		Name: "events", Replication: []string{"solo"}, Retention: Retention{Mode: RetentionLimits},
		Bundles: 4, AutoCreateTopics: &yes,
	}
	if !reflect.DeepEqual(*ns, wantNS) {
		t.Errorf("namespace events:\n got %+v\nwant %+v", *ns, wantNS)
	}
}

func TestGoodInherit(t *testing.T) {
	m := parseGood(t, "testdata/good/inherit.yaml")
	if m.Name != "inherit" || m.DataDir != "/srv/strata" {
		t.Errorf("mesh %q data_dir %q", m.Name, m.DataDir)
	}
	r1, _ := m.Region("r1")
	r2, _ := m.Region("r2")
	r3, _ := m.Region("r3")
	checkRegionR1(t, r1)
	checkRegionR2(t, r2)
	if r3.Brokers != 1 || r3.Bookies != 3 || r3.Metadata.Embedded ||
		!reflect.DeepEqual(r3.Metadata.Etcd, []string{"https://etcd-1:2379", "http://etcd-2:2379"}) ||
		r3.Metadata.Prefix != "/r3" || r3.Tier != (Tier{Kind: TierFS, Dir: "/mnt/cold"}) {
		t.Errorf("r3 = %+v", *r3)
	}
	if got := r3.NodesOf(RoleMeta); got != nil {
		t.Errorf("r3 with external etcd has meta nodes %v", got)
	}
	checkTenantT1(t, m)
}

func checkRegionR1(t *testing.T, r *Region) {
	t.Helper()
	if r.Brokers != 3 || r.Bookies != 3 || *r.Ledger != (Ledger{2, 2, 2}) {
		t.Errorf("r1 brokers %d bookies %d ledger %+v", r.Brokers, r.Bookies, *r.Ledger)
	}
	if *r.Rollover != (Rollover{MaxEntries: 1000, MaxSize: 64 * MiB, MaxAge: Duration(90 * time.Minute)}) {
		t.Errorf("r1 rollover %+v", *r.Rollover)
	}
	if !r.Metadata.Embedded || r.Metadata.Prefix != "/custom" {
		t.Errorf("r1 metadata %+v", r.Metadata)
	}
	wantTier := Tier{Kind: TierS3, Bucket: "r1-bucket", Region: "us-east-1", Endpoint: "http://127.0.0.1:9000", PathStyle: true}
	if r.Tier != wantTier || !reflect.DeepEqual(r.WANJoin, []string{"10.1.0.1:7948"}) {
		t.Errorf("r1 tier %+v wan_join %v", r.Tier, r.WANJoin)
	}
}

// checkRegionR2: r2 merges r1 (brokers, wan_join) and overrides the rest.
func checkRegionR2(t *testing.T, r *Region) {
	t.Helper()
	if r.Brokers != 3 || r.Bookies != 0 || *r.Ledger != (Ledger{4, 3, 2}) {
		t.Errorf("r2 brokers %d bookies %d ledger %+v", r.Brokers, r.Bookies, *r.Ledger)
	}
	if *r.Rollover != (Rollover{MaxSize: GB}) {
		t.Errorf("r2 rollover %+v: a region's rollover replaces the default whole", *r.Rollover)
	}
	if !r.Metadata.Embedded || r.Metadata.Prefix != "/strata" || r.Tier != (Tier{Kind: TierGCS, Bucket: "r2-bucket"}) {
		t.Errorf("r2 metadata %+v tier %+v", r.Metadata, r.Tier)
	}
	if got := len(r.NodesOf(RoleBookie)); got != 5 {
		t.Errorf("r2 has %d bookies, want 5", got)
	}
	k1, ok := r.Node("k1")
	if !ok || k1.Host != "10.2.0.1" || k1.GRPCPort != 7100 || k1.DataDir != "/data/k1" {
		t.Errorf("r2 node k1 = %+v, %v", k1, ok)
	}
	if m1, ok := r.Node("m1"); !ok || m1.ClientPort != 2379 || m1.PeerPort != 2380 {
		t.Errorf("r2 node m1 = %+v, %v", m1, ok)
	}
	if b3, ok := r.Node("b3"); !ok || b3.Host != LocalHost || b3.Role != RoleBroker {
		t.Errorf("r2 node b3 = %+v, %v", b3, ok)
	}
}

func checkTenantT1(t *testing.T, m *Mesh) {
	t.Helper()
	tn, ok := m.Tenant("t1")
	if !ok {
		t.Fatal("tenant t1 missing")
	}
	wantQ := Quotas{PublishRate: 5000, PublishBytes: ByteRate(10 * MiB), Storage: 50 * GiB, Topics: 1000, Connections: 500,
		Regions: map[string]RegionQuotas{"r1": {PublishRate: 3000}, "r3": {PublishRate: 1000, PublishBytes: ByteRate(2 * MiB)}}}
	if !reflect.DeepEqual(tn.Quotas, wantQ) || !reflect.DeepEqual(tn.Admins, []string{"alice", "bob"}) {
		t.Errorf("t1 quotas %+v admins %v", tn.Quotas, tn.Admins)
	}
	js, _ := tn.Namespace("js")
	if !reflect.DeepEqual(js.Replication, []string{"r1", "r2", "r3"}) {
		t.Errorf("js replication %v, want every region in file order", js.Replication)
	}
	o, _ := tn.Namespace("orders")
	no, yes := false, true
	want := Namespace{
		Name: "orders", Replication: []string{"r3", "r1"},
		Retention:    Retention{Mode: RetentionWorkQueue, Time: Duration(7 * 24 * time.Hour), Size: 100 * GiB, Messages: -1},
		BacklogQuota: &BacklogQuota{Size: 10 * GiB, Time: Duration(24 * time.Hour), Policy: BacklogHold},
		Offload:      &Offload{Threshold: 0, DeletionLag: Duration(time.Hour)},
		MessageTTL:   Duration(90 * time.Second), Dedup: &yes, Bundles: 16, AutoCreateTopics: &no,
	}
	if !reflect.DeepEqual(*o, want) {
		t.Errorf("orders:\n got %+v\nwant %+v", *o, want)
	}
	if *m.Defaults.JetStream != (JetStream{Tenant: "t1", Namespace: "js"}) {
		t.Errorf("jetstream %+v", *m.Defaults.JetStream)
	}
}

// TestTenancyConfigRegionCaps: the file's per-region caps reach
// tenancy's model as they were written, and tenancy's own checks (those
// the admin API applies) accept what the topology's accepted.
func TestTenancyConfigRegionCaps(t *testing.T) {
	m := parseGood(t, "testdata/good/inherit.yaml")
	c := m.TenancyConfig()
	t1 := c.Tenants[0]
	want := map[string]tenancy.RegionQuotas{"r1": {PublishRate: 3000}, "r3": {PublishRate: 1000, PublishBytes: int64(2 * MiB)}}
	if t1.Name != "t1" || !reflect.DeepEqual(t1.Quotas.Regions, want) {
		t.Errorf("t1 quotas %+v", t1.Quotas)
	}
	if err := t1.ValidateIn([]string{"r1", "r2", "r3"}); err != nil {
		t.Errorf("tenancy refuses what the topology accepted: %v", err)
	}
	for _, tn := range c.Tenants[1:] {
		if tn.Quotas.Regions != nil {
			t.Errorf("tenant %s without caps has %v", tn.Name, tn.Quotas.Regions)
		}
	}
}
