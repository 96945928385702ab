package topology

import (
	"reflect"
	"testing"
	"time"
)

func TestApplyDefaultsBuiltins(t *testing.T) {
	m := &Mesh{Name: "m", Regions: []Region{{Name: "a"}, {Name: "b"}}, Tenants: []Tenant{{
		Name: "t", Namespaces: []Namespace{{Name: "n", BacklogQuota: &BacklogQuota{Size: GiB}}},
	}}}
	applyDefaults(m)
	if *m.Defaults.Ledger != DefaultLedger() || *m.Defaults.Rollover != DefaultRollover() {
		t.Errorf("defaults %+v %+v", *m.Defaults.Ledger, *m.Defaults.Rollover)
	}
	for _, r := range m.Regions {
		if r.Brokers != 1 || r.Bookies != 4 || *r.Ledger != (Ledger{3, 2, 2}) ||
			*r.Rollover != (Rollover{50000, 256 * MiB, Duration(4 * time.Hour)}) ||
			!reflect.DeepEqual(r.Metadata, Metadata{Embedded: true, Prefix: "/strata"}) || r.Tier.Kind != TierFS {
			t.Errorf("region %+v", r)
		}
	}
	if m.Regions[0].Ledger == m.Regions[1].Ledger || m.Regions[0].Ledger == m.Defaults.Ledger {
		t.Error("regions share one Ledger value")
	}
	ns := m.Tenants[0].Namespaces[0]
	if !reflect.DeepEqual(ns.Replication, []string{"a", "b"}) || ns.Retention.Mode != RetentionLimits ||
		ns.Bundles != 4 || ns.AutoCreateTopics == nil || !*ns.AutoCreateTopics ||
		ns.BacklogQuota.Policy != BacklogHold || ns.Offload != nil {
		t.Errorf("namespace %+v", ns)
	}
	if m.DataDir != "" {
		t.Errorf("data_dir defaulted to %q", m.DataDir)
	}
}

func TestApplyDefaultsFromDefaultsBlock(t *testing.T) {
	l := Ledger{5, 3, 2}
	ro := Rollover{MaxEntries: 10}
	m := &Mesh{Defaults: Defaults{Ledger: &l, Rollover: &ro}, Regions: []Region{
		{Name: "inherits"},
		{Name: "own", Ledger: &Ledger{2, 2, 1}, Rollover: &Rollover{MaxAge: Duration(time.Minute)}, Bookies: 7},
	}}
	applyDefaults(m)
	in, own := m.Regions[0], m.Regions[1]
	if *in.Ledger != l || *in.Rollover != ro || in.Bookies != 6 {
		t.Errorf("inherits: ledger %+v rollover %+v bookies %d", *in.Ledger, *in.Rollover, in.Bookies)
	}
	if *own.Ledger != (Ledger{2, 2, 1}) || own.Rollover.MaxEntries != 0 || own.Bookies != 7 {
		t.Errorf("own: ledger %+v rollover %+v bookies %d", *own.Ledger, *own.Rollover, own.Bookies)
	}
}

func TestApplyDefaultsExplicitNodes(t *testing.T) {
	m := &Mesh{Regions: []Region{{
		Name:     "r",
		Nodes:    []Node{{ID: "x", Role: RoleBroker, Host: "h"}, {ID: "y", Role: RoleBookie, Host: "h"}},
		Metadata: Metadata{Etcd: []string{"https://e:2379"}, Prefix: "/p"},
	}}}
	applyDefaults(m)
	r := m.Regions[0]
	if r.Brokers != 0 || r.Bookies != 0 {
		t.Errorf("counts %d/%d: with explicit nodes they stay 0", r.Brokers, r.Bookies)
	}
	if r.Metadata.Embedded || r.Metadata.Prefix != "/p" {
		t.Errorf("metadata %+v", r.Metadata)
	}
}

func TestNodesOf(t *testing.T) {
	r := Region{Brokers: 2, Bookies: 3, Metadata: Metadata{Embedded: true}}
	got := r.NodesOf(RoleBroker)
	want := []Node{{ID: "b1", Role: RoleBroker, Host: "127.0.0.1"}, {ID: "b2", Role: RoleBroker, Host: "127.0.0.1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("brokers %+v", got)
	}
	if ks := r.NodesOf(RoleBookie); len(ks) != 3 || ks[2].ID != "k3" || ks[2].Role != RoleBookie {
		t.Errorf("bookies %+v", ks)
	}
	if ms := r.NodesOf(RoleMeta); !reflect.DeepEqual(ms, []Node{{ID: "meta", Role: RoleMeta, Host: "127.0.0.1"}}) {
		t.Errorf("meta %+v", ms)
	}
	if r.NodesOf("proxy") != nil {
		t.Error("unknown role resolved to nodes")
	}
	r.Nodes = []Node{{ID: "k9", Role: RoleBookie, Host: "h"}, {ID: "m", Role: RoleMeta, Host: "h"}}
	if ks := r.NodesOf(RoleBookie); len(ks) != 1 || ks[0].ID != "k9" {
		t.Errorf("explicit bookies %+v", ks)
	}
	if ms := r.NodesOf(RoleMeta); len(ms) != 1 || ms[0].ID != "m" {
		t.Errorf("explicit meta %+v", ms)
	}
	r.NodesOf(RoleBookie)[0].ID = "changed"
	if r.Nodes[0].ID != "k9" {
		t.Error("NodesOf shares the region's nodes")
	}
	if n, ok := r.Node("b2"); !ok || n.Role != RoleBroker {
		t.Errorf("Node(b2) = %+v, %v", n, ok)
	}
	if _, ok := r.Node("k1"); ok {
		t.Error("Node(k1) found a generated bookie although bookies are explicit")
	}
	r.Metadata = Metadata{Etcd: []string{"https://e:2379"}}
	r.Nodes = nil
	if r.NodesOf(RoleMeta) != nil {
		t.Error("external etcd resolved to a meta node")
	}
}

func TestMeshLookups(t *testing.T) {
	m := Default()
	if r, ok := m.Region("eu-west"); !ok || r != &m.Regions[1] {
		t.Error("Region(eu-west) does not return the mesh's region")
	}
	if _, ok := m.Region("nowhere"); ok {
		t.Error("Region(nowhere) found a region")
	}
	if tn, ok := m.Tenant("demo"); !ok || tn != &m.Tenants[0] {
		t.Error("Tenant(demo)")
	}
	if _, ok := m.Tenant("nobody"); ok {
		t.Error("Tenant(nobody) found a tenant")
	}
}

// TestOwnershipParsed: a region's ownership block is read with its units;
// a region without one keeps zeros (the brokers' defaults apply).
func TestOwnershipParsed(t *testing.T) {
	m, _, err := Parse("o.yaml", []byte("mesh: o\nregions:\n  - name: a\n    ownership: {lease_ttl: 5s, load_threshold: 2}\n  - name: b\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o := m.Regions[0].Ownership; time.Duration(o.LeaseTTL) != 5*time.Second || o.LoadThreshold != 2 {
		t.Fatalf("region a ownership = %+v", o)
	}
	if o := m.Regions[1].Ownership; o != (Ownership{}) {
		t.Fatalf("region b ownership = %+v, want zeros", o)
	}
}
