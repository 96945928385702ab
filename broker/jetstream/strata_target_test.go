package jetstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/stratamesh/strata/broker"
)

// startStrata starts a Strata region for one subtest — real bookies
// (E3/Qw2/Qa2 over four), one broker with its JetStream layer, ledgers
// rolled over every 100 entries — and returns its broker as a target;
// Restart stops the broker gracefully and starts it again on the same
// address, so the next owner recovers the topics from bookies and etcd.
// With o.noJetStream it is a plain broker (JetStream off).
func startStrata(t *testing.T, o targetOptions) *target {
	t.Helper()
	if o.noJetStream {
		srv, err := broker.Start(broker.Config{ServerName: "plain", ListenAddr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = srv.Close(ctx)
		})
		return &target{Name: "strata", URL: srv.ClientURL(), Restart: func(t *testing.T) { t.Fatal("no restart without JetStream") }}
	}
	r := newStrataRegion(t, 1, nil)
	b := r.brokers[0]
	return &target{Name: "strata", URL: b.url(), Restart: func(t *testing.T) { t.Helper(); b.restart(t) }}
}
