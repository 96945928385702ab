package broker

import (
	"bufio"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/stratamesh/strata/internal/testutil"
)

// A subscriber that stops reading is closed as a slow consumer once its
// queued output passes MaxPending; the publisher and other subscribers
// carry on, and the broker's memory stays bounded by the limit.
func TestSlowConsumerIsClosed(t *testing.T) {
	s := startBroker(t, func(c *Config) { c.MaxPending = 1 << 20; c.MaxPayload = 64 << 10 })
	raw, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	br := bufio.NewReader(raw)
	if _, err := br.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	if _, err := raw.Write([]byte("CONNECT {\"verbose\":false}\r\nSUB slow 1\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	if l, _ := br.ReadString('\n'); l != "PONG\r\n" {
		t.Fatalf("got %q", l)
	}
	const msgs = 8000 // × 8 KiB
	good := connect(t, s.ClientURL())
	var n sync.WaitGroup
	got := 0
	n.Add(1)
	sub, err := good.Subscribe("slow", func(*nats.Msg) {
		got++
		if got == msgs {
			n.Done()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	_ = good.Flush()
	pub := connect(t, s.ClientURL())
	payload := make([]byte, 8<<10)
	// 64 MiB for a subscriber that reads nothing (beyond what the kernel's
	// socket buffers absorb).
	for i := 0; i < msgs; i++ {
		if err := pub.Publish("slow", payload); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatalf("publisher hurt by the slow consumer: %v", err)
	}
	testutil.Eventually(t, "slow consumer counted", 30*time.Second, func() bool { return s.Stats().SlowConsumers == 1 })
	n.Wait() // the reading subscriber got every message
	// The slow connection is closed: what it gets is the rest of the write
	// in progress and, if it read that within 2 s, -ERR 'Slow Consumer'
	// (this one did not read, so its stream is cut).
	_ = raw.SetReadDeadline(time.Now().Add(30 * time.Second))
	rest, err := io.ReadAll(br)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("slow consumer's connection still open after it was counted (read %d bytes)", len(rest))
	}
	t.Logf("slow consumer got %d bytes, ending %q", len(rest), tail(string(rest), 30))
	if len(rest) > msgs*len(payload)/2 {
		t.Fatalf("slow consumer was sent %d bytes of %d: it was not cut off", len(rest), msgs*len(payload))
	}
	if !good.IsConnected() || !pub.IsConnected() {
		t.Fatal("other connections were closed")
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// With auth on, a client that never sends CONNECT is closed after
// AuthTimeout, and ops before CONNECT are refused.
func TestAuthTimeoutAndOpsBeforeConnect(t *testing.T) {
	s := startBroker(t, func(c *Config) {
		c.Auth = StaticAuth{Token: "secret"}
		c.AuthTimeout = 300 * time.Millisecond
	})
	tr := runRaw(t, s.Addr(), rawScript{input: ""})
	if !tr.Closed || len(tr.Frames) != 1 || tr.Frames[0] != "-ERR 'Authentication Timeout'" {
		t.Fatalf("silent client: %v", tr)
	}
	tr = runRaw(t, s.Addr(), rawScript{input: "SUB a 1\r\n"})
	if !tr.Closed || len(tr.Frames) != 1 || tr.Frames[0] != "-ERR 'Authorization Violation'" {
		t.Fatalf("SUB before CONNECT: %v", tr)
	}
	nc := connect(t, s.ClientURL(), nats.Token("secret"))
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// FuzzServerSession sends arbitrary bytes as a client session: the broker
// must answer or close, never crash or hang, and keep serving others.
func FuzzServerSession(f *testing.F) {
	for _, s := range rawScripts() {
		f.Add([]byte(s.input))
	}
	f.Add([]byte("CONNECT {\"verbose\":true,\"headers\":true}\r\nHPUB a r 12 12\r\nNATS/1.0 503\r\n\r\n"))
	f.Add([]byte("SUB a.b q 1\r\nUNSUB 1 0\r\nPUB a.b 0\r\n\r\n"))
	s := startBroker(f, nil)
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = c.Write(in)
		_ = c.(*net.TCPConn).CloseWrite()
		// The broker must close once the client's stream ended (whatever
		// state the input left the parser in); a timeout is a hang.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("broker did not close after the input %q ended", in)
			}
		}
		// The broker still serves a fresh client.
		probe, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer probe.Close()
		_, _ = probe.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\n"))
		_ = probe.SetReadDeadline(time.Now().Add(5 * time.Second))
		pb := bufio.NewReader(probe)
		if _, err := pb.ReadString('\n'); err != nil { // INFO
			t.Fatal(err)
		}
		if l, err := pb.ReadString('\n'); err != nil || l != "PONG\r\n" {
			t.Fatalf("broker stopped serving after input %q: %q %v", in, l, err)
		}
	})
}
