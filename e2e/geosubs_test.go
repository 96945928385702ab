package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/testutil"
)

// geoPair is two regions replicating demo/geo.
var geoPair = geoPairWith("geo2", "")

const subsStream = "geo:subs"

// replicatedConsumer creates durable name with replication on (the
// consumer metadata strata.replicated: "true").
func replicatedConsumer(t *testing.T, js jetstream.JetStream, name string) jetstream.Consumer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.CreateConsumer(ctx, subsStream, jetstream.ConsumerConfig{
		Durable: name, AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute,
		Metadata: map[string]string{"strata.replicated": "true"},
	})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return c
}

// waitConsumer waits until region's broker has consumer name (created
// there by the subscription sync) and returns it.
func waitConsumer(t *testing.T, js jetstream.JetStream, region, name string) jetstream.Consumer {
	t.Helper()
	var c jetstream.Consumer
	testutil.Eventually(t, name+" created in "+region, 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		c, err = js.Consumer(ctx, subsStream, name)
		return err == nil
	})
	return c
}

// fetchIDs fetches up to n messages (waiting up to wait for them) and
// acks those ack says to; it returns every payload received, in order.
func fetchIDs(t *testing.T, c jetstream.Consumer, n int, wait time.Duration, ack func(id string) bool) []string {
	t.Helper()
	var ids []string
	deadline := time.Now().Add(wait)
	for len(ids) < n && time.Now().Before(deadline) {
		batch, err := c.Fetch(n-len(ids), jetstream.FetchMaxWait(min(time.Until(deadline), 2*time.Second)))
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		for m := range batch.Messages() {
			id := string(m.Data())
			ids = append(ids, id)
			if ack(id) {
				if err := m.DoubleAck(context.Background()); err != nil {
					t.Fatalf("ack %s: %v", id, err)
				}
			}
		}
	}
	return ids
}

// waitPending waits until consumer c in region has exactly n messages
// left to deliver (those acknowledged in another region excluded) and
// none unacknowledged.
func waitPending(t *testing.T, c jetstream.Consumer, region string, n int) {
	t.Helper()
	var last string
	ok := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		info, err := c.Info(ctx)
		cancel()
		if err == nil && info.NumPending == uint64(n) && info.NumAckPending == 0 {
			ok = true
			break
		}
		if err == nil {
			last = fmt.Sprintf("pending %d, unacked %d", info.NumPending, info.NumAckPending)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !ok {
		t.Fatalf("%s: consumer never had %d pending and none unacked (last: %s)", region, n, last)
	}
}

func msgID(i int) string { return fmt.Sprintf("m-%03d", i) }

// TestReplicatedSubscription: 100 messages published in r1; a
// replicated consumer acks 10 there and, one sync interval later, its
// copy in r2 delivers 11..100 and nothing before; with holes in r1's
// acks (1-3 and 5) r2 delivers 4 and not 5; consumers acking in both
// regions at the same time end with the union acknowledged in both.
func TestReplicatedSubscription(t *testing.T) {
	c := startGeoCluster(t, geoPair, []string{"r1", "r2"})
	js1 := geoConnect(t, c.regions["r1"].urls())
	js2 := geoConnect(t, c.regions["r2"].urls())
	ctx := context.Background()
	for i := 1; i <= 100; i++ {
		if _, err := js1.Publish(ctx, "demo.geo.subs", []byte(msgID(i))); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	c.waitConverged(t, []string{"r1", "r2"}, "demo/geo/subs", 100, 60*time.Second)

	t.Run("switch", func(t *testing.T) {
		a := replicatedConsumer(t, js1, "billing")
		got := fetchIDs(t, a, 10, 10*time.Second, func(string) bool { return true })
		if len(got) != 10 || got[0] != msgID(1) || got[9] != msgID(10) {
			t.Fatalf("r1 delivered %v, want m-001..m-010", got)
		}
		b := waitConsumer(t, js2, "r2", "billing")
		waitPending(t, b, "r2", 90) // r1's acks arrived (a sync interval)
		rest := fetchIDs(t, b, 90, 20*time.Second, func(string) bool { return true })
		if len(rest) != 90 || rest[0] != msgID(11) || rest[89] != msgID(100) {
			t.Fatalf("r2 delivered %d messages %v…, want m-011..m-100", len(rest), rest[:min(len(rest), 5)])
		}
	})

	t.Run("holes", func(t *testing.T) {
		a := replicatedConsumer(t, js1, "holes")
		got := fetchIDs(t, a, 5, 10*time.Second, func(id string) bool { return id != msgID(4) })
		if len(got) != 5 {
			t.Fatalf("r1 delivered %v", got)
		}
		b := waitConsumer(t, js2, "r2", "holes")
		waitPending(t, b, "r2", 96) // 1-3 and 5 acknowledged there
		rest := fetchIDs(t, b, 3, 10*time.Second, func(string) bool { return false })
		if len(rest) != 3 || rest[0] != msgID(4) || rest[1] != msgID(6) || rest[2] != msgID(7) {
			t.Fatalf("r2 delivered %v, want m-004 m-006 m-007", rest)
		}
	})

	t.Run("admin-create-and-delete", func(t *testing.T) {
		admin := func(region, method string) int {
			req, err := http.NewRequest(method, c.regions[region].brokers["b1"].report.Admin+
				"/admin/v1/topics/demo/geo/subs/subscriptions/audit", strings.NewReader(`{"replicated": true}`))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if code := admin("r1", http.MethodPut); code != http.StatusOK {
			t.Fatalf("PUT subscription in r1: %d", code)
		}
		b := waitConsumer(t, js2, "r2", "audit")
		if info, err := b.Info(ctx); err != nil || info.Config.Metadata["strata.replicated"] != "true" {
			t.Fatalf("r2's copy: %+v, %v", info, err)
		}
		if code := admin("r1", http.MethodDelete); code != http.StatusOK {
			t.Fatalf("DELETE subscription in r1: %d", code)
		}
		testutil.Eventually(t, "the deletion replicated to r2", 30*time.Second, func() bool {
			_, err := js2.Consumer(ctx, subsStream, "audit")
			return errors.Is(err, jetstream.ErrConsumerNotFound)
		})
		time.Sleep(2 * time.Second) // r2's last syncs must not bring it back in r1
		if _, err := js1.Consumer(ctx, subsStream, "audit"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatalf("r1 has audit again after its deletion: %v", err)
		}
	})

	t.Run("admin-reset", func(t *testing.T) {
		put := func(body string) {
			t.Helper()
			req, err := http.NewRequest(http.MethodPut, c.regions["r1"].brokers["b1"].report.Admin+
				"/admin/v1/topics/demo/geo/subs/subscriptions/replay", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("PUT replay %s in r1: %d", body, resp.StatusCode)
			}
		}
		put(`{"replicated": true}`)
		a, err := js1.Consumer(ctx, subsStream, "replay")
		if err != nil {
			t.Fatal(err)
		}
		if got := fetchIDs(t, a, 20, 10*time.Second, func(string) bool { return true }); len(got) != 20 {
			t.Fatalf("r1 delivered %v, want m-001..m-020", got)
		}
		waitPending(t, waitConsumer(t, js2, "r2", "replay"), "r2", 80)

		// Reset to seq 11 in r1: a new epoch; r1 delivers from m-011, and
		// r2's copy starts again with 1..10 acknowledged.
		put(`{"reset_to": {"seq": 11}}`)
		a, err = js1.Consumer(ctx, subsStream, "replay")
		if err != nil {
			t.Fatal(err)
		}
		if info, err := a.Info(ctx); err != nil || info.Config.Metadata["strata.replicated"] != "true" || info.Config.DeliverPolicy != jetstream.DeliverByStartSequencePolicy {
			t.Fatalf("r1's replay after the reset: %+v, %v; want it replicated, by_start_sequence", info, err)
		}
		if got := fetchIDs(t, a, 1, 10*time.Second, func(string) bool { return false }); len(got) != 1 || got[0] != msgID(11) {
			t.Fatalf("r1 delivered %v after the reset, want m-011", got)
		}
		var b jetstream.Consumer
		testutil.Eventually(t, "r2's replay reset (90 pending)", 30*time.Second, func() bool {
			b = waitConsumer(t, js2, "r2", "replay")
			info, err := b.Info(ctx)
			return err == nil && info.NumPending == 90 && info.NumAckPending == 0
		})
		if got := fetchIDs(t, b, 1, 10*time.Second, func(string) bool { return false }); len(got) != 1 || got[0] != msgID(11) {
			t.Fatalf("r2 delivered %v after the reset, want m-011", got)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		a := replicatedConsumer(t, js1, "both")
		b := waitConsumer(t, js2, "r2", "both")
		var mu sync.Mutex
		acked := map[string]bool{}
		var wg sync.WaitGroup
		for _, cons := range []jetstream.Consumer{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 6 {
					fetchIDs(t, cons, 10, 5*time.Second, func(id string) bool {
						mu.Lock()
						acked[id] = true
						mu.Unlock()
						return true
					})
				}
			}()
		}
		wg.Wait()
		var want []string
		for i := 1; i <= 100; i++ {
			if !acked[msgID(i)] {
				want = append(want, msgID(i))
			}
		}
		waitPending(t, a, "r1", len(want)) // the syncs both ways
		waitPending(t, b, "r2", len(want))
		t.Logf("%d messages acked across the two regions", len(acked))
		for region, cons := range map[string]jetstream.Consumer{"r1": a, "r2": b} {
			rest := fetchIDs(t, cons, len(want)+1, 5*time.Second, func(string) bool { return false })
			sort.Strings(rest)
			if fmt.Sprint(rest) != fmt.Sprint(want) {
				t.Errorf("%s delivers %d messages after the syncs, want the %d no region acked", region, len(rest), len(want))
			}
		}
	})
}
