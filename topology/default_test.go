package topology

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestDefaultMeshIsValid(t *testing.T) {
	m, warns, err := Parse(DefaultFilename, DefaultYAML())
	if err != nil {
		t.Fatalf("embedded default mesh:\n%v", err)
	}
	for _, w := range warns {
		t.Errorf("embedded default mesh: %s", w)
	}
	if m.Name != "strata-dev" {
		t.Errorf("mesh %q", m.Name)
	}
	var names []string
	for i := range m.Regions {
		r := &m.Regions[i]
		names = append(names, r.Name)
		if len(r.NodesOf(RoleBroker)) != 2 || len(r.NodesOf(RoleBookie)) != 4 || len(r.NodesOf(RoleMeta)) != 1 {
			t.Errorf("%s: want 2 brokers, 4 bookies, 1 meta node", r.Name)
		}
		if *r.Ledger != (Ledger{3, 2, 2}) || !r.Metadata.Embedded || r.Tier.Kind != TierFS {
			t.Errorf("%s: ledger %+v metadata %+v tier %+v", r.Name, *r.Ledger, r.Metadata, r.Tier)
		}
	}
	if got := strings.Join(names, ","); got != "us-east,eu-west,ap-south" {
		t.Errorf("regions %s", got)
	}
	checkDefaultDemo(t, m)
}

func checkDefaultDemo(t *testing.T, m *Mesh) {
	t.Helper()
	demo, ok := m.Tenant("demo")
	if !ok {
		t.Fatal("tenant demo missing")
	}
	all := []string{"us-east", "eu-west", "ap-south"}
	for _, name := range []string{"events", "streams"} {
		ns, ok := demo.Namespace(name)
		if !ok || len(ns.Replication) != 3 || ns.Replication[0] != all[0] || ns.Replication[2] != all[2] {
			t.Errorf("namespace %s: %+v", name, ns)
		}
	}
	ev, _ := demo.Namespace("events")
	if ev.Offload == nil || ev.Offload.Threshold != MiB || ev.Offload.DeletionLag.String() != "1m" ||
		ev.Retention.Time.String() != "7d" {
		t.Errorf("events offload %+v retention %+v", ev.Offload, ev.Retention)
	}
	if js := m.Defaults.JetStream; js == nil || *js != (JetStream{Tenant: "demo", Namespace: "streams"}) {
		t.Errorf("jetstream %+v", js)
	}
	if demo.Quotas.PublishRate != 0 || demo.Quotas.Connections != 0 {
		t.Errorf("demo has quotas %+v: benchmarks and the README's first commands run in it", demo.Quotas)
	}
	checkDefaultMetered(t, m)
}

// checkDefaultMetered: the default mesh's metered tenant has quotas small
// enough for one `nats bench` to reach, and the namespace a logged-in
// client's streams live in (defaults.jetstream's).
func checkDefaultMetered(t *testing.T, m *Mesh) {
	t.Helper()
	met, ok := m.Tenant("metered")
	if !ok {
		t.Fatal("tenant metered missing")
	}
	want := Quotas{PublishRate: 1000, PublishBytes: ByteRate(MiB), Storage: GiB, Topics: 100, Connections: 50, Consumers: 100}
	if !reflect.DeepEqual(met.Quotas, want) {
		t.Errorf("metered quotas %+v, want %+v", met.Quotas, want)
	}
	for _, name := range []string{"events", m.Defaults.JetStream.Namespace} {
		if ns, ok := met.Namespace(name); !ok || len(ns.Replication) != 3 {
			t.Errorf("metered namespace %s: %+v", name, ns)
		}
	}
	for _, tn := range m.TenancyConfig().Tenants {
		if err := tn.ValidateIn([]string{"us-east", "eu-west", "ap-south"}); err != nil {
			t.Errorf("tenant %s: %v", tn.Name, err)
		}
	}
}

func TestDefaultReturnsFreshCopies(t *testing.T) {
	a, b := Default(), Default()
	a.Regions[0].Name = "changed"
	a.Regions[0].Ledger.Ensemble = 9
	if b.Regions[0].Name != "us-east" || b.Regions[0].Ledger.Ensemble != 3 {
		t.Error("Default shares state between calls")
	}
	y := DefaultYAML()
	y[0] = 'X'
	if DefaultYAML()[0] == 'X' {
		t.Error("DefaultYAML shares its bytes")
	}
}

func TestExampleDefaultMeshMatchesEmbedded(t *testing.T) {
	ex, err := os.ReadFile("../examples/default-mesh.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ex, DefaultYAML()) {
		t.Error("examples/default-mesh.yaml differs from topology/default-mesh.yaml; copy one over the other")
	}
}

func TestExampleProduction(t *testing.T) {
	m, warns, err := LoadFile("../examples/production.yaml")
	if err != nil {
		t.Fatalf("examples/production.yaml:\n%v", err)
	}
	for _, w := range warns {
		t.Errorf("examples/production.yaml: %s", w)
	}
	us, _ := m.Region("us-east")
	eu, _ := m.Region("eu-west")
	if us.Tier.Kind != TierS3 || !us.Tier.PathStyle || us.Tier.Endpoint == "" || us.Tier.Region == "" {
		t.Errorf("us-east tier %+v", us.Tier)
	}
	if eu.Tier.Kind != TierGCS || eu.Tier.Bucket == "" {
		t.Errorf("eu-west tier %+v", eu.Tier)
	}
	for _, r := range []*Region{us, eu} {
		if r.Metadata.Embedded || len(r.Metadata.Etcd) != 3 || r.NodesOf(RoleMeta) != nil {
			t.Errorf("%s metadata %+v", r.Name, r.Metadata)
		}
		for _, n := range r.Nodes {
			if n.GRPCPort == 0 || n.Host == "" {
				t.Errorf("%s/%s: want a host and a fixed grpc port", r.Name, n.ID)
			}
		}
	}
	if m.TLS == nil || m.TLS.NATSClientCerts != ClientCertsVerify || m.TLS.EtcdPasswordFile == "" || m.Auth == nil || !m.Auth.Enabled {
		t.Errorf("examples/production.yaml is not secure: tls %+v auth %+v", m.TLS, m.Auth)
	}
	pay, _ := m.Tenant("payments")
	orders, _ := pay.Namespace("orders")
	if pay.Quotas.Storage != 2*TiB || orders.BacklogQuota == nil || orders.Offload == nil {
		t.Errorf("payments %+v orders %+v", pay.Quotas, orders)
	}
}

// TestTenantsExample: examples/tenants.yaml (the README's apply example)
// is a valid topology naming the default mesh's regions and its demo
// tenant as the default mesh has it, so that applying it to a fresh
// default mesh changes only what it adds.
func TestTenantsExample(t *testing.T) {
	m, warns, err := LoadFile("../examples/tenants.yaml")
	if err != nil {
		t.Fatalf("examples/tenants.yaml:\n%v", err)
	}
	_ = warns // one region with a single default bookie: warnings are expected
	def := Default()
	for i, r := range def.Regions {
		if m.Regions[i].Name != r.Name {
			t.Fatalf("region %d is %s, the default mesh's is %s", i, m.Regions[i].Name, r.Name)
		}
	}
	want, got := def.TenancyConfig(), m.TenancyConfig()
	if !reflect.DeepEqual(got.Tenants[0], want.Tenants[0]) || !reflect.DeepEqual(got.Namespaces[:2], want.Namespaces[:2]) {
		t.Fatalf("the demo tenant differs from the default mesh's:\n%+v\n%+v", got.Namespaces[:2], want.Namespaces)
	}
}
