package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/region"
	"github.com/stratamesh/strata/topology"
)

// geoRegionStore opens region name's metadata store.
func geoRegionStore(t *testing.T, topoPath, name, etcd string) *meta.Store {
	t.Helper()
	m, _, err := topology.LoadFile(topoPath)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := m.Region(name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := meta.Open(ctx, meta.Config{Endpoints: []string{etcd}, Prefix: region.KeyPrefix(m, r)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestGeoReplicationPolicyChange: removing r2 from a namespace's
// replication list (a PATCH of its policies in r1, no restart) stops
// and deletes r1's replicator cursor to r2, so r2 gets nothing new;
// adding it back starts a cursor from the beginning of r1's retained
// messages, and r2 ends with every message once.
func TestGeoReplicationPolicyChange(t *testing.T) {
	c := startGeoCluster(t, geoPairWith("geopolicy", "        replication: [r1, r2]\n"), []string{"r1", "r2"})
	r1 := c.regions["r1"]
	js1 := geoConnect(t, r1.urls())
	ctx := context.Background()
	pub := func(from, to int) {
		for i := from; i <= to; i++ {
			if _, err := js1.Publish(ctx, "demo.geo.pol", []byte(fmt.Sprintf("p-%d", i))); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
	}
	restartR1 := func(list string) {
		c.mustAdmin(t, "r1", "PATCH", "/admin/v1/namespaces/demo/geo/policies", "", `{"replication": [`+list+`]}`, 200)
		t.Logf("r1: replication of demo/geo set to [%s]", list)
	}
	pub(1, 5)
	c.waitConverged(t, []string{"r1", "r2"}, "demo/geo/pol", 5, 60*time.Second)

	restartR1(`"r1"`)
	testutil.Eventually(t, "r1 stops its replicator cursor to r2", 30*time.Second, func() bool {
		st, err := c.topicStats("r1", "demo/geo/pol")
		return err == nil && st.Replication != nil && len(st.Replication.Cursors) == 0
	})
	pub(6, 8)
	testutil.Eventually(t, "r1 holds 8 messages", 30*time.Second, func() bool {
		st, err := c.topicStats("r1", "demo/geo/pol")
		return err == nil && st.Messages == 8
	})
	st := geoRegionStore(t, c.topo, "r1", r1.meta.report.Etcd)
	testutil.Eventually(t, "r1's cursor position towards r2 deleted", 30*time.Second, func() bool {
		_, err := st.Get(ctx, "repl/demo/geo/pol/r2")
		return errors.Is(err, meta.ErrNotFound)
	})
	time.Sleep(3 * time.Second)
	if st, err := c.topicStats("r2", "demo/geo/pol"); err != nil || st.Messages != 5 {
		t.Fatalf("r2 holds %v messages (%v), want the 5 from before the change", st.Messages, err)
	}

	restartR1(`"r1", "r2"`)
	c.waitConverged(t, []string{"r1", "r2"}, "demo/geo/pol", 8, 60*time.Second)
	ids, _ := geoRead(t, geoConnect(t, c.regions["r2"].urls()), "geo:pol", 8)
	if fmt.Sprint(ids) != "[p-1 p-2 p-3 p-4 p-5 p-6 p-7 p-8]" {
		t.Fatalf("r2 holds %v", ids)
	}
}
