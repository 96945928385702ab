package jetstream_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A publish on $STRATA.QUOTA. from a connection of the mesh (another
// region's quota coordinator over its link) is routed to the region's
// internal subscriptions, on any broker, not taken by the JetStream
// layer. (Tenants' publishes there are refused: TestJetStreamTenantIsolation.)
func TestQuotaSubjectsReachInternalSubscriptions(t *testing.T) {
	r := newStrataRegion(t, 2, nil)
	got := make(chan string, 1)
	unsub, err := r.brokers[1].srv.SubscribeInternal("$STRATA.QUOTA.r2.wan.>", func(subject, _, _, payload []byte) {
		select {
		case got <- string(subject) + " " + string(payload):
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	nc, err := nats.Connect(r.brokers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	deadline := time.After(10 * time.Second)
	for {
		// Until the peer broker has learned of the subscription.
		if err := nc.Publish("$STRATA.QUOTA.r2.wan.0", []byte("hello")); err != nil {
			t.Fatal(err)
		}
		select {
		case s := <-got:
			if s != "$STRATA.QUOTA.r2.wan.0 hello" {
				t.Fatalf("got %q", s)
			}
			return
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("the publish never reached the internal subscription")
		}
	}
}
