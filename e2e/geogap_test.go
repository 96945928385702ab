package e2e

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/testutil"
)

// geoGapPair is two regions whose demo/geo topics keep their last 50
// messages (limits retention).
var geoGapPair = geoPairWith("geogap", "        retention: {messages: 50}\n")

// TestGeoReplicationGap: with r2's brokers down, r1 publishes past its
// retention, so messages r2 never got are trimmed at their origin. When
// r2 returns, replication resumes past an explicit gap record that r2
// counts as lost (150 messages), instead of stalling; r2 then holds the
// last 50, in order, and the lag is 0.
func TestGeoReplicationGap(t *testing.T) {
	c := startGeoCluster(t, geoGapPair, []string{"r1", "r2"})
	js1 := geoConnect(t, c.regions["r1"].urls())
	ctx := context.Background()
	publish := func(from, to int) {
		for i := from; i <= to; i++ {
			if _, err := js1.Publish(ctx, "demo.geo.gap", []byte(fmt.Sprintf("g-%03d", i))); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
	}
	publish(1, 10)
	c.waitConverged(t, []string{"r1", "r2"}, "demo/geo/gap", 10, 60*time.Second)

	r2 := c.regions["r2"]
	for _, id := range []string{"b1", "b2"} {
		r2.brokers[id].signal(syscall.SIGKILL)
		<-r2.brokers[id].done
	}
	t.Log("stopped r2's brokers")
	publish(11, 210)
	// Retention applies on the managed ledger's maintenance pass, within
	// about a second of the publish that exceeds it.
	var last string
	testutil.Eventually(t, "r1 trimmed to its last 50 messages", 15*time.Second, func() bool {
		st, err := c.topicStats("r1", "demo/geo/gap")
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("%d messages from seq %d", st.Messages, st.FirstSeq)
		return st.Messages == 50 && st.FirstSeq == 161
	})
	t.Logf("r1 holds %s", last)
	for _, id := range []string{"b1", "b2"} {
		r2.start(t, c.dir, id)
	}
	back := time.Now()
	t.Log("restarted r2's brokers")
	c.waitConverged(t, []string{"r1", "r2"}, "demo/geo/gap", 50, 90*time.Second)
	t.Logf("replication resumed and caught up %v after r2 returned", time.Since(back))

	st2, err := c.topicStats("r2", "demo/geo/gap")
	if err != nil {
		t.Fatal(err)
	}
	if st2.Replication == nil || st2.Replication.OriginsLost != 150 || len(st2.Replication.Origins) != 1 || st2.Replication.Origins[0].HWM != 210 {
		t.Fatalf("r2's origins: %+v, want r1's HWM 210 with 150 lost", st2.Replication)
	}
	st1, err := c.topicStats("r1", "demo/geo/gap")
	if err != nil {
		t.Fatal(err)
	}
	if cur := st1.Replication.Cursors[0]; cur.Position != 210 || cur.GapRecords < 1 {
		t.Fatalf("r1's cursor: %+v, want position 210 after a gap record", cur)
	}
	var metrics string
	for _, id := range []string{"b1", "b2"} {
		if resp, err := c.http.Get(r2.brokers[id].report.Admin + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			metrics += string(b)
		}
	}
	if !regexp.MustCompile(`strata_replication_lost_messages[_a-z]*\{[^}]*origin="r1"[^}]*topic="demo/geo/gap"[^}]*\} 150`).MatchString(metrics) {
		t.Errorf("r2's brokers export no strata_replication_lost_messages of 150 for demo/geo/gap")
	}
	ids, _ := geoRead(t, geoConnect(t, r2.urls()), "geo:gap", 50)
	for i, id := range ids {
		if want := fmt.Sprintf("g-%03d", 161+i); id != want {
			t.Fatalf("r2 message %d is %s, want %s", i, id, want)
		}
	}
}

// geoWorkPair is two regions whose demo/geo topics are work queues.
var geoWorkPair = geoPairWith("geowq", "        retention: {mode: workqueue}\n")

// TestGeoReplicationHoldsWorkQueue: a replicator cursor is interest like
// a consumer's. With r2's brokers down, a work queue in r1 whose consumer
// acknowledged every message keeps them until r2 has them: r2 gets all
// 60, none lost, and only then does r1 drop them.
func TestGeoReplicationHoldsWorkQueue(t *testing.T) {
	c := startGeoCluster(t, geoWorkPair, []string{"r1", "r2"})
	js1 := geoConnect(t, c.regions["r1"].urls())
	ctx := context.Background()
	r2 := c.regions["r2"]
	for _, id := range []string{"b1", "b2"} {
		r2.brokers[id].signal(syscall.SIGKILL)
		<-r2.brokers[id].done
	}
	for i := 1; i <= 60; i++ {
		if _, err := js1.Publish(ctx, "demo.geo.wq", []byte(fmt.Sprintf("w-%02d", i))); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	cons, err := js1.CreateConsumer(ctx, "geo:wq", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	if got := fetchIDs(t, cons, 60, 20*time.Second, func(string) bool { return true }); len(got) != 60 {
		t.Fatalf("worker got %d of 60", len(got))
	}
	// Once the worker's acks are persisted (ack floor 60), only the
	// replicator cursor holds the messages. Retention runs on each
	// maintenance pass (every second): over three passes r1 must keep
	// all 60 (a negative check, so it watches for a while).
	testutil.Eventually(t, "the worker's acks persisted", 20*time.Second, func() bool {
		st, err := c.topicStats("r1", "demo/geo/wq")
		if err != nil {
			return false
		}
		for _, s := range st.Subscriptions {
			if s.Name == "worker" && s.AckFloor == 60 {
				return true
			}
		}
		return false
	})
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		st, err := c.topicStats("r1", "demo/geo/wq")
		if err != nil {
			t.Fatal(err)
		}
		if st.Messages != 60 {
			t.Fatalf("r1 holds %d messages after the worker acked all 60, want all 60 kept for r2", st.Messages)
		}
	}
	for _, id := range []string{"b1", "b2"} {
		r2.start(t, c.dir, id)
	}
	testutil.Eventually(t, "r2 has all 60 and r1 dropped them", 90*time.Second, func() bool {
		s1, err1 := c.topicStats("r1", "demo/geo/wq")
		s2, err2 := c.topicStats("r2", "demo/geo/wq")
		return err1 == nil && err2 == nil && s1.Messages == 0 && s2.Messages == 60
	})
	s2, err := c.topicStats("r2", "demo/geo/wq")
	if err != nil || s2.Replication == nil || s2.Replication.OriginsLost != 0 {
		t.Fatalf("r2's origins: %+v (%v), want nothing lost", s2.Replication, err)
	}
}
