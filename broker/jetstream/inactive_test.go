package jetstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/testutil"
)

// TestEphemeralInactiveThreshold: an idle ephemeral consumer is deleted
// once its inactive_threshold passes, even though nothing else wakes it
// (it used to wait for its next deadline, up to an hour).
func TestEphemeralInactiveThreshold(t *testing.T) {
	r := newStrataRegion(t, 1, nil)
	nc, err := nats.Connect(r.brokers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "IDLE", Subjects: []string{"idle.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := js.Publish(ctx, "idle.a", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// As an ordered consumer reads (nats.go's OrderedConsumer): ack none,
	// a fetch that drains the stream and expires, then nothing.
	eph, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	name := eph.CachedInfo().Name
	if n := fetchCount(t, eph, 10, 300*time.Millisecond); n != 3 {
		t.Fatalf("fetched %d of 3", n)
	}
	testutil.Eventually(t, "the idle ephemeral consumer deleted", 10*time.Second, func() bool {
		_, err := st.Consumer(ctx, name)
		return errors.Is(err, jetstream.ErrConsumerNotFound)
	})
}
