package jetstream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/testutil"
)

// TestRetentionModes: an interest stream keeps only what some consumer
// has not acknowledged, and drops everything when it has no consumer; a
// workqueue stream drops each message once it is acknowledged; a limits
// stream keeps max_msgs (JetStream's retention model, ARCHITECTURE §3).
func TestRetentionModes(t *testing.T) {
	r := newStrataRegion(t, 1, nil)
	nc, err := nats.Connect(r.brokers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	msgs := func(st jetstream.Stream) uint64 {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	publish := func(subject string, n int) {
		for i := 0; i < n; i++ {
			if _, err := js.Publish(ctx, subject, []byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	ackFirst := func(c jetstream.Consumer, n int) {
		b, err := c.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range b.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
			got++
		}
		if got != n {
			t.Fatalf("fetched %d messages, want %d", got, n)
		}
	}

	t.Run("interest", func(t *testing.T) {
		st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "INT", Subjects: []string{"int.>"}, Retention: jetstream.InterestPolicy})
		if err != nil {
			t.Fatal(err)
		}
		c, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "a", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		publish("int.x", 10)
		ackFirst(c, 6)
		testutil.Eventually(t, "acknowledged messages dropped", 10*time.Second, func() bool { return msgs(st) == 4 })
		if err := st.DeleteConsumer(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "no consumer: nothing kept", 10*time.Second, func() bool { return msgs(st) == 0 })
	})
	t.Run("workqueue", func(t *testing.T) {
		st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "WQ", Subjects: []string{"wq.>"}, Retention: jetstream.WorkQueuePolicy})
		if err != nil {
			t.Fatal(err)
		}
		publish("wq.x", 8)
		c, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		if got := msgs(st); got != 8 {
			t.Fatalf("workqueue holds %d before any ack, want 8", got)
		}
		ackFirst(c, 5)
		testutil.Eventually(t, "worked messages dropped", 10*time.Second, func() bool { return msgs(st) == 3 })
	})
	t.Run("limits", func(t *testing.T) {
		st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "LIM", Subjects: []string{"lim.>"}, MaxMsgs: 5})
		if err != nil {
			t.Fatal(err)
		}
		publish("lim.x", 12)
		// Retention applies on the managed ledger's maintenance pass,
		// right after the publish that exceeds it.
		var last string
		testutil.Eventually(t, "limits stream trimmed to its last 5", 10*time.Second, func() bool {
			info, err := st.Info(ctx)
			if err != nil {
				last = err.Error()
				return false
			}
			last = fmt.Sprintf("%d messages, seqs %d..%d", info.State.Msgs, info.State.FirstSeq, info.State.LastSeq)
			return info.State.Msgs == 5 && info.State.FirstSeq == 8 && info.State.LastSeq == 12
		})
		t.Logf("limits stream: %s", last)
	})
}
