package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/testutil"
)

// TestGeoReplicationIdentity: a client's Strata-Origin header is
// refused; a stream created or updated through the API in one region is
// created or updated in the other; a topic deleted in its origin region is deleted in the other
// (a tombstone) and, re-created there, replicates its new messages (a
// new incarnation, not dropped against the old high-water mark); a
// region rebuilt from an empty data dir gets the origin's retained
// messages again (its empty high-water marks rewind the sender).
func TestGeoReplicationIdentity(t *testing.T) {
	c := startGeoCluster(t, geoPair, []string{"r1", "r2"})
	js1 := geoConnect(t, c.regions["r1"].urls())
	js2 := geoConnect(t, c.regions["r2"].urls())
	ctx := context.Background()
	pub := func(js jetstream.JetStream, prefix string, from, to int) {
		t.Helper()
		for i := from; i <= to; i++ {
			if _, err := js.Publish(ctx, "demo.geo.ident", []byte(fmt.Sprintf("%s-%d", prefix, i))); err != nil {
				t.Fatalf("publish %s-%d: %v", prefix, i, err)
			}
		}
	}

	msg := nats.NewMsg("demo.geo.ident")
	msg.Header.Set("Strata-Origin", "r2")
	msg.Data = []byte("forged")
	if _, err := js1.PublishMsg(ctx, msg); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("a client's Strata-Origin header: err %v, want refused as reserved", err)
	}

	// A stream created and reconfigured through the API in r1 appears,
	// and changes, in r2 before it has any message.
	if _, err := js1.CreateStream(ctx, jetstream.StreamConfig{Name: "CONF", Subjects: []string{"conf.>"}}); err != nil {
		t.Fatalf("create CONF in r1: %v", err)
	}
	testutil.Eventually(t, "CONF created in r2", 30*time.Second, func() bool {
		st, err := js2.Stream(ctx, "CONF")
		return err == nil && st.CachedInfo().Config.Subjects[0] == "conf.>"
	})
	if _, err := js1.UpdateStream(ctx, jetstream.StreamConfig{Name: "CONF", Subjects: []string{"conf.>"}, MaxMsgs: 4}); err != nil {
		t.Fatalf("update CONF in r1: %v", err)
	}
	testutil.Eventually(t, "CONF's max_msgs 4 in r2", 30*time.Second, func() bool {
		st, err := js2.Stream(ctx, "CONF")
		return err == nil && st.CachedInfo().Config.MaxMsgs == 4
	})

	pub(js1, "old", 1, 5)
	pub(js2, "r2old", 1, 2)
	c.waitConverged(t, []string{"r1", "r2"}, "demo/geo/ident", 7, 60*time.Second)
	before, err := c.topicStats("r1", "demo/geo/ident")
	if err != nil {
		t.Fatal(err)
	}

	if err := js1.DeleteStream(ctx, "geo:ident"); err != nil {
		t.Fatalf("delete in r1: %v", err)
	}
	testutil.Eventually(t, "the deletion replicated to r2", 30*time.Second, func() bool {
		_, err := js2.Stream(ctx, "geo:ident")
		return errors.Is(err, jetstream.ErrStreamNotFound)
	})
	pub(js1, "new", 1, 3)
	c.waitConverged(t, []string{"r1", "r2"}, "demo/geo/ident", 3, 60*time.Second)
	after, err := c.topicStats("r1", "demo/geo/ident")
	if err != nil {
		t.Fatal(err)
	}
	if after.Replication.Incarnation == before.Replication.Incarnation {
		t.Fatalf("re-created topic kept incarnation %s", before.Replication.Incarnation)
	}
	ids, _ := geoRead(t, js2, "geo:ident", 3)
	if fmt.Sprint(ids) != "[new-1 new-2 new-3]" {
		t.Fatalf("r2 holds %v after the re-creation, want the 3 new messages only", ids)
	}

	c.regions["r2"].rebuild(t, c.dir, c.regions["r1"].brokers["b1"].report.SerfWAN)
	t.Log("rebuilt r2 from an empty data dir")
	pub(js1, "new", 4, 5)
	c.waitConverged(t, []string{"r1", "r2"}, "demo/geo/ident", 5, 90*time.Second)
	ids, _ = geoRead(t, geoConnect(t, c.regions["r2"].urls()), "geo:ident", 5)
	if fmt.Sprint(ids) != "[new-1 new-2 new-3 new-4 new-5]" {
		t.Fatalf("rebuilt r2 holds %v, want new-1..new-5", ids)
	}
	st, err := c.topicStats("r1", "demo/geo/ident")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("r1's cursor after r2's rebuild: position %d, resent %d", st.Replication.Cursors[0].Position, st.Replication.Cursors[0].Resent)
}
