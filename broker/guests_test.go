package broker

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/stratamesh/strata/internal/testutil"
)

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestGuestsGoHomeAndComeBack drives nats.go, configured as documented
// (home URL first, then the failover URL, no randomization), through a
// lost home, a switch-back, and a second loss: it lands on the failover
// listener as a guest with no connect_urls learnt, goes home when the
// guests are closed and refused, and comes back once they are admitted.
func TestGuestsGoHomeAndComeBack(t *testing.T) {
	var admit atomic.Bool
	admit.Store(true)
	// The other region's two brokers, routed: the INFO of a native client
	// would carry connect_urls.
	away := startRegion(t, 2, func(c *Config) {
		c.Region = "eu-west"
		c.Guests = []GuestListener{{Home: "us-east", Addr: "127.0.0.1:0"}}
		c.AdmitGuest = func(home string) bool { return home == "us-east" && admit.Load() }
	})
	guestURL := away[0].GuestURLs()["us-east"]
	if guestURL == "" || guestURL == away[0].ClientURL() {
		t.Fatalf("guest URL %q", guestURL)
	}
	homeAddr := freeAddr(t)
	var reconnects atomic.Int64
	nc, err := nats.Connect("nats://"+homeAddr+","+guestURL, nats.DontRandomize(), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond), nats.Timeout(time.Second),
		nats.ReconnectHandler(func(*nats.Conn) { reconnects.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.ConnectedUrl() != guestURL {
		t.Fatalf("connected to %s, want the failover listener %s", nc.ConnectedUrl(), guestURL)
	}
	if g := away[0].Guests(); g["us-east"] != 1 {
		t.Fatalf("guests %v", g)
	}
	if d := nc.DiscoveredServers(); len(d) != 0 {
		t.Fatalf("a guest learnt connect_urls %v", d)
	}
	// A native client of the same broker does learn them.
	native, err := nats.Connect(away[0].ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer native.Close()
	testutil.Eventually(t, "native client learns connect_urls", 5*time.Second, func() bool { return len(native.DiscoveredServers()) == 1 })

	// Home returns; the region sends its guests home.
	home := startBroker(t, func(c *Config) { c.ListenAddr = homeAddr; c.Region = "us-east" })
	admit.Store(false)
	if n := away[0].CloseGuests("us-east"); n != 1 {
		t.Fatalf("CloseGuests closed %d", n)
	}
	testutil.Eventually(t, "client back home", 10*time.Second, func() bool {
		return nc.IsConnected() && nc.ConnectedUrl() == "nats://"+homeAddr
	})
	if g := away[0].Guests(); g["us-east"] != 0 {
		t.Fatalf("guests after switch-back %v", g)
	}
	if st := away[0].GuestStats(); st.SentHome != 1 {
		t.Fatalf("guest stats %+v", st)
	}
	// Home lost again while guests are refused: the client waits; once
	// admitted it is a guest again.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := home.Close(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "a refused guest", 10*time.Second, func() bool { return away[0].GuestStats().Refused > 0 })
	if nc.IsConnected() {
		t.Fatalf("connected to %s while guests are refused", nc.ConnectedUrl())
	}
	admit.Store(true)
	testutil.Eventually(t, "client a guest again", 10*time.Second, func() bool {
		return nc.IsConnected() && nc.ConnectedUrl() == guestURL
	})
	if err := nc.Publish("x", []byte("still works")); err != nil || nc.Flush() != nil {
		t.Fatalf("publish as a guest: %v", err)
	}
	if reconnects.Load() != 2 {
		t.Fatalf("%d reconnects, want 2 (home, then guest)", reconnects.Load())
	}
}

func TestGuestListenerConfigErrors(t *testing.T) {
	for _, g := range [][]GuestListener{
		{{Home: "", Addr: "127.0.0.1:0"}},
		{{Home: "r", Addr: "127.0.0.1:0"}}, // its own region
		{{Home: "a", Addr: "127.0.0.1:0"}, {Home: "a", Addr: "127.0.0.1:0"}},
		{{Home: "a", Addr: "256.0.0.1:0"}},
	} {
		_, err := Start(Config{ServerName: "x", ListenAddr: "127.0.0.1:0", Region: "r", Guests: g})
		if err == nil || !strings.Contains(err.Error(), "failover listener") && !strings.Contains(err.Error(), "guests of") {
			t.Fatalf("%+v: %v", g, err)
		}
	}
}
