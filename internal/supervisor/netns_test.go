package supervisor

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stratamesh/strata/topology"
)

// TestNetnsTopology: every node of every region (explicit ones keeping
// their other fields, and those generated from counts and the embedded
// meta node) binds its region's namespace address in the rewritten
// copy, which parses to the same nodes.
func TestNetnsTopology(t *testing.T) {
	src := twoRegions + `  - name: south
    ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}
    nodes:
      - {id: meta, role: meta, host: 127.0.0.1, client_port: 0}
      - {id: k9, role: bookie, host: localhost, journal_dir: /tmp/j9}
    brokers: 1
tenants:
  - name: demo
    namespaces: [{name: geo}]
`
	m, _, err := topology.Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkNetns(m, false); err != nil {
		t.Fatal(err)
	}
	addr := map[string]string{"east": "10.213.0.10", "west": "10.213.0.11", "south": "10.213.0.12"}
	out, moved, err := netnsTopology([]byte(src), m, func(r string) string { return addr[r] })
	if err != nil {
		t.Fatal(err)
	}
	for i := range moved.Regions {
		r := &moved.Regions[i]
		if got, want := nodeNames(r, addr[r.Name]), nodeNames(&m.Regions[i], ""); got != want {
			t.Errorf("region %s: nodes %s, want %s", r.Name, got, want)
		}
	}
	if got := nodeNames(&moved.Regions[0], ""); got != "meta/meta bookie/k1 bookie/k2 broker/b1 broker/b2" {
		t.Errorf("east: %s", got)
	}
	k9, ok := moved.Regions[2].Node("k9")
	if !ok || k9.JournalDir != "/tmp/j9" || k9.Host != "10.213.0.12" {
		t.Errorf("south's explicit bookie: %+v", k9)
	}
	if len(moved.Tenants) != 1 || moved.Tenants[0].Name != "demo" || moved.Name != "t" {
		t.Errorf("the rest of the topology changed:\n%s", out)
	}
	if strings.Contains(string(out), "127.0.0.1") || strings.Contains(string(out), "localhost") {
		t.Errorf("a loopback host is left:\n%s", out)
	}
}

// TestNetnsTopologyDefaultMesh: the embedded default mesh runs with
// --netns.
func TestNetnsTopologyDefaultMesh(t *testing.T) {
	src, err := os.ReadFile("../../topology/default-mesh.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := topology.Parse("default-mesh.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkNetns(m, false); err != nil {
		t.Fatal(err)
	}
	_, moved, err := netnsTopology(src, m, func(r string) string {
		return "10.213.0." + map[string]string{"us-east": "10", "eu-west": "11", "ap-south": "12"}[r]
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(moved.Regions) != 3 || len(moved.Regions[0].NodesOf(topology.RoleBookie)) != 4 || len(moved.Tenants) != len(m.Tenants) {
		t.Fatalf("rewritten default mesh: %d regions, %d tenants", len(moved.Regions), len(moved.Tenants))
	}
}

func TestCheckNetnsRefusals(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"mesh: t\nregions:\n  - name: a\n    ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}\n    nodes:\n      - {id: b1, role: broker, host: 10.0.0.5}\n    bookies: 1\n",
			"node b1: host 10.0.0.5"},
		{"mesh: t\nregions:\n  - name: a\n    ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}\n    brokers: 1\n    bookies: 1\n    metadata: {etcd: [http://127.0.0.1:2379]}\n",
			"external etcd"},
		{"mesh: t\nregions:\n  - name: a\n    ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}\n    brokers: 1\n    bookies: 1\n    wan_join: [127.0.0.1:7946]\n",
			"wan_join"},
		{"mesh: t\nregions:\n  - name: a\n    ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}\n    brokers: 1\n    bookies: 1\n    tier: {kind: s3, bucket: bkt, endpoint: http://localhost:9000}\n",
			"tier endpoint"},
	} {
		m, _, err := topology.Parse("t.yaml", []byte(c.src))
		if err != nil {
			t.Fatalf("%s: %v", c.want, err)
		}
		err = checkNetns(m, false)
		if !errors.Is(err, ErrNetnsTopology) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error naming %q, got %v", c.want, err)
		}
	}
	m, _, _ := topology.Parse("t.yaml", []byte(twoRegions))
	if err := checkNetns(m, true); err == nil || !strings.Contains(err.Error(), "--secure") {
		t.Errorf("--secure with --netns: %v", err)
	}
}

// FuzzNetnsTopology: for any topology that parses and that --netns
// accepts, the rewrite succeeds or fails with ErrNetnsTopology (never
// panics), and on success every node binds its region's address
// (netnsTopology checks the parsed result).
func FuzzNetnsTopology(f *testing.F) {
	f.Add([]byte(twoRegions))
	f.Add([]byte("mesh: t\nregions:\n  - name: a\n    ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}\n    nodes:\n      - {id: b1, role: broker, host: 127.0.0.1, nats_port: 4222}\n      - {id: k1, role: bookie, host: localhost}\n"))
	f.Add([]byte("mesh: t\ndefaults: &d\n  ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}\nregions:\n  - {name: a, brokers: 1, bookies: 1}\n  - {name: b, brokers: 1, bookies: 1}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		m, _, err := topology.Parse("f.yaml", src)
		if err != nil || checkNetns(m, false) != nil {
			return
		}
		_, moved, err := netnsTopology(src, m, func(r string) string { return "10.213.0.10" })
		if err != nil {
			if !errors.Is(err, ErrNetnsTopology) {
				t.Fatalf("error without ErrNetnsTopology: %v", err)
			}
			return
		}
		for i := range moved.Regions {
			for _, role := range []string{topology.RoleMeta, topology.RoleBookie, topology.RoleBroker} {
				for _, n := range moved.Regions[i].NodesOf(role) {
					if n.Host != "10.213.0.10" {
						t.Fatalf("region %s node %s binds %s", moved.Regions[i].Name, n.ID, n.Host)
					}
				}
			}
		}
	})
}
