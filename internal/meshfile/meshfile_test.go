package meshfile

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(dir); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Read on empty dir = %v, want ErrNotRunning", err)
	}
	f := &File{Mesh: "acme", StartedAt: time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC), Regions: []Region{{
		Name: "us-east", Tier: Tier{Kind: "fs", Dir: "/x"},
		Nodes: []Node{{ID: "meta", Role: "meta", PID: 42, Etcd: "http://127.0.0.1:1"}, {ID: "b1", Role: "broker", SerfWAN: "127.0.0.1:2"}},
	}}}
	if err := Write(dir, f); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Mesh != "acme" || !got.StartedAt.Equal(f.StartedAt) || got.Node("us-east", "b1").SerfWAN != "127.0.0.1:2" {
		t.Fatalf("round trip lost data: %+v", got)
	}
	if got.Node("us-east", "nope") != nil || got.Node("eu-west", "b1") != nil {
		t.Fatal("Node found a node that does not exist")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	if err := Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := Remove(dir); err != nil {
		t.Fatal("second Remove:", err)
	}
}

func TestReadCorrupt(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(Path(dir), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(dir); err == nil || errors.Is(err, ErrNotRunning) {
		t.Fatalf("Read of corrupt file = %v, want a decode error", err)
	}
}

// TestNATSURLs: a region's running brokers; when all have exited, theirs
// all the same (they may have been restarted by hand at the same ports);
// errors name the region.
func TestNATSURLs(t *testing.T) {
	f := &File{Mesh: "m", Regions: []Region{
		{Name: "a", Nodes: []Node{{ID: "meta"}, {ID: "b1", NATS: "nats://a1", Exited: "signal: killed"}, {ID: "b2", NATS: "nats://a2"}}},
		{Name: "b", Nodes: []Node{{ID: "b1", NATS: "nats://b1", Exited: "exit status 1"}}},
		{Name: "c", Nodes: []Node{{ID: "meta"}}},
	}}
	for _, c := range []struct {
		region string
		want   []string
		err    string
	}{
		{"", []string{"nats://a2"}, ""},
		{"a", []string{"nats://a2"}, ""},
		{"b", []string{"nats://b1"}, ""},
		{"c", nil, "region c has no broker"},
		{"d", nil, `no region "d"`},
	} {
		got, err := f.NATSURLs(c.region)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("NATSURLs(%q) = %v, %v; want an error with %q", c.region, got, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("NATSURLs(%q) = %v, %v; want %v", c.region, got, err, c.want)
		}
	}
}
