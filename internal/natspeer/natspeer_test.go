package natspeer_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/stratamesh/strata/internal/natspeer"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A restart keeps the port, the config and the JetStream store.
func TestStartRestartKeepsStore(t *testing.T) {
	s := natspeer.Start(t, fmt.Sprintf("jetstream: {store_dir: %q}", t.TempDir()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	publish := func(want uint64) {
		t.Helper()
		nc, err := nats.Connect(s.URL(), nats.NoReconnect())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
			t.Fatal(err)
		}
		ack, err := js.Publish(ctx, "s.x", []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if ack.Sequence != want {
			t.Fatalf("seq %d, want %d", ack.Sequence, want)
		}
	}
	publish(1)
	addr := s.Addr()
	s.Restart(t)
	if s.Addr() != addr {
		t.Fatalf("address changed: %s → %s", addr, s.Addr())
	}
	publish(2)
}

func TestWaitListeningGivesUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // ln closed
			}
			c.Close() // a listener that is not a NATS server: no INFO
		}
	}()
	if err := natspeer.WaitListening(ln.Addr().String(), 300*time.Millisecond); err == nil {
		t.Fatal("WaitListening succeeded on a server that sends no INFO")
	}
}
