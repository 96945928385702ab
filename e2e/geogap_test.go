package e2e

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// geoGapPair is two regions whose demo/geo topics keep their last 50
// messages (limits retention).
const geoGapPair = `mesh: e2e-geogap
defaults:
  ledger: {ensemble: 2, write_quorum: 2, ack_quorum: 2}
  rollover: {max_entries: 20}
  jetstream: {tenant: demo, namespace: streams}
regions:
  - {name: r1, brokers: 2, bookies: 3}
  - {name: r2, brokers: 2, bookies: 3}
tenants:
  - name: demo
    namespaces:
      - name: streams
      - name: geo
        bundles: 2
        retention: {messages: 50}
`

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
	st, err := c.topicStats("r1", "demo/geo/gap")
	if err != nil {
		t.Fatal(err)
	}
	if st.Messages != 50 || st.FirstSeq != 161 {
		t.Fatalf("r1 holds %d messages from seq %d, want 50 from 161", st.Messages, st.FirstSeq)
	}
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
