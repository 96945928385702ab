package jetstream_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/internal/testutil"
)

// twoRegions starts regions r1 and r2 of one broker each, replicating
// namespace demo/geo between them.
func twoRegions(t *testing.T, tweak func(*jetstream.Config)) (a, b *strataRegion) {
	t.Helper()
	pol := jetstream.StaticPolicies{"demo": {
		"streams": {AutoCreateTopics: true},
		"geo":     {AutoCreateTopics: true, Replication: []string{"r1", "r2"}},
	}}
	var regions [2]atomic.Pointer[strataRegion]
	urls := func(i int) []string {
		r := regions[i].Load()
		if r == nil {
			return nil
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		var out []string
		for _, b := range r.brokers {
			if b.srv != nil && !b.stopped {
				out = append(out, b.url())
			}
		}
		return out
	}
	start := func(self int) *strataRegion {
		return newStrataRegion(t, 1, func(c *jetstream.Config) {
			c.Policies = pol
			c.Region = fmt.Sprintf("r%d", self+1)
			c.RemoteBrokers = func(string) []string { return urls(1 - self) }
			c.Replicator.BackoffInitial, c.Replicator.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
			if tweak != nil {
				tweak(c)
			}
		})
	}
	regions[0].Store(start(0))
	regions[1].Store(start(1))
	return regions[0].Load(), regions[1].Load()
}

func cursorOf(t *testing.T, r *strataRegion, topic string) (jetstream.ReplicationStats, bool) {
	t.Helper()
	for _, rs := range r.brokers[0].js.Replication() {
		if rs.Topic == topic {
			return rs, true
		}
	}
	return jetstream.ReplicationStats{}, false
}

// TestLagTellsTheTruth (issue 26 item 7): after the topic was idle
// longer than the stall threshold, with the remote unreachable, the
// first reading after one publish gives a lag of that one message, its
// bytes, and seconds no more than its age (not the time since the last
// success); lag bytes follow lag messages.
func TestLagTellsTheTruth(t *testing.T) {
	const idle = 1500 * time.Millisecond
	a, b := twoRegions(t, func(c *jetstream.Config) { c.Replicator.StallAfter = time.Second })
	nc, err := nats.Connect(a.brokers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := natsjs.New(nc)
	payload := make([]byte, 100)
	if _, err := js.Publish(testCtx(t), "demo.geo.t", payload); err != nil {
		t.Fatal(err)
	}
	name := bqName("geo").String()
	testutil.Eventually(t, "the first message replicated", 10*time.Second, func() bool {
		rs, ok := cursorOf(t, a, name)
		return ok && rs.Position == 1 && rs.LagMsgs == 0
	})
	b.brokers[0].stop(t) // the remote is unreachable
	idleFrom := time.Now()
	testutil.Eventually(t, "idle longer than the stall threshold", 10*time.Second, func() bool {
		return time.Since(idleFrom) > idle
	})
	rs, _ := cursorOf(t, a, name)
	if rs.LagMsgs != 0 || rs.LagBytes != 0 || rs.LagSeconds != 0 {
		t.Fatalf("idle and caught up: lag %d msgs %d bytes %.3fs, want 0", rs.LagMsgs, rs.LagBytes, rs.LagSeconds)
	}
	before := time.Now()
	if _, err := js.Publish(testCtx(t), "demo.geo.t", payload); err != nil {
		t.Fatal(err)
	}
	rs, _ = cursorOf(t, a, name)
	age := time.Since(before)
	t.Logf("first reading: lag %d msgs %d bytes %.3fs; the message is at most %.3fs old", rs.LagMsgs, rs.LagBytes, rs.LagSeconds, age.Seconds())
	if rs.LagMsgs != 1 {
		t.Fatalf("lag %d msgs, want 1", rs.LagMsgs)
	}
	if rs.LagSeconds > age.Seconds()+0.05 {
		t.Fatalf("lag %.3fs, but the only unreplicated message is at most %.3fs old", rs.LagSeconds, age.Seconds())
	}
	if rs.LagBytes < uint64(len(payload)) || rs.LagBytes > uint64(len(payload))+256 {
		t.Fatalf("lag 1 msg of %d payload bytes, reported %d bytes", len(payload), rs.LagBytes)
	}
	one := rs.LagBytes
	for i := 0; i < 9; i++ {
		if _, err := js.Publish(testCtx(t), "demo.geo.t", payload); err != nil {
			t.Fatal(err)
		}
	}
	rs, _ = cursorOf(t, a, name)
	if rs.LagMsgs != 10 || rs.LagBytes != 10*one {
		t.Fatalf("lag %d msgs %d bytes, want 10 msgs %d bytes (bytes of the same messages)", rs.LagMsgs, rs.LagBytes, 10*one)
	}
	if rs.LagSeconds > time.Since(before).Seconds()+0.05 {
		t.Fatalf("lag %.3fs, older than the oldest unreplicated message (%.3fs)", rs.LagSeconds, time.Since(before).Seconds())
	}
}
