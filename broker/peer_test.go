package broker

import (
	"context"
	"testing"
	"time"
)

// The reference nats-server, the oracle of the conformance and
// differential tests, is run by internal/natspeer.

// startBroker runs a Strata broker on a free loopback port for one test.
func startBroker(t testing.TB, mod func(*Config)) *Server {
	t.Helper()
	cfg := Config{ServerName: "test-" + t.Name(), ListenAddr: "127.0.0.1:0", Mesh: "m", Region: "r"}
	if mod != nil {
		mod(&cfg)
	}
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("close broker: %v", err)
		}
	})
	return s
}
