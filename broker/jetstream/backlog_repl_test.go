package jetstream_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/internal/testutil"
)

// TestReplicationStorageRefusal: a remote region refuses replicated
// batches while the tenant's storage quota there is full; once it
// allows, replication resumes by itself and every message arrives, in
// order.
func TestReplicationStorageRefusal(t *testing.T) {
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
	q := &storageFullQuotas{}
	q.full.Store(true)
	start := func(self int) *strataRegion {
		return newStrataRegion(t, 1, func(c *jetstream.Config) {
			c.Policies = pol
			c.Region = fmt.Sprintf("r%d", self+1)
			c.RemoteBrokers = func(string) []string { return urls(1 - self) }
			c.Replicator.BackoffInitial, c.Replicator.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
			if self == 1 {
				c.Quotas = q
			}
		})
	}
	regions[0].Store(start(0))
	regions[1].Store(start(1))
	a, b := regions[0].Load(), regions[1].Load()
	nca, err := nats.Connect(a.brokers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nca.Close)
	jsa, _ := natsjs.New(nca)
	for i := 0; i < 10; i++ {
		if _, err := jsa.Publish(testCtx(t), "demo.geo.t", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	name := bqName("geo")
	testutil.Eventually(t, "the remote refuses for its storage quota", 10*time.Second, func() bool {
		for _, rs := range a.brokers[0].js.Replication() {
			if rs.Topic == name.String() && rs.Position == 0 && strings.Contains(rs.LastError, "storage quota") {
				return true
			}
		}
		return false
	})
	ncb, err := nats.Connect(b.brokers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ncb.Close)
	jsb, _ := natsjs.New(ncb)
	if st, err := jsb.Stream(testCtx(t), "geo:t"); err == nil {
		if info, err := st.Info(testCtx(t)); err == nil && info.State.Msgs != 0 {
			t.Fatalf("the remote stored %d messages over its storage quota", info.State.Msgs)
		}
	}
	q.full.Store(false)
	testutil.Eventually(t, "replication resumes", 20*time.Second, func() bool {
		for _, rs := range a.brokers[0].js.Replication() {
			if rs.Topic == name.String() && rs.Position == 10 && rs.InFlight == 0 {
				return true
			}
		}
		return false
	})
	c, err := jsb.CreateConsumer(testCtx(t), "geo:t", natsjs.ConsumerConfig{AckPolicy: natsjs.AckNonePolicy, InactiveThreshold: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(10, natsjs.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for m := range batch.Messages() {
		got = append(got, string(m.Data()))
	}
	if want := "m0 m1 m2 m3 m4 m5 m6 m7 m8 m9"; strings.Join(got, " ") != want {
		t.Fatalf("the remote region has %q, want %q", got, want)
	}
}
