package broker

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/stratamesh/strata/internal/natspeer"
	"github.com/stratamesh/strata/internal/testutil"
)

// Conformance tests (shared/specs/nats-wire.md §5, items 1–14) with
// nats.go. Each runs against a Strata broker and, as the oracle, against
// the reference nats-server: a scenario that fails on the reference is a
// wrong test, not a Strata bug.

type serverUnderTest struct {
	name string
	url  string
	addr string
}

// bothServers starts a reference nats-server (with refConf lines) and a
// Strata broker (with mod) and runs f against each.
func bothServers(t *testing.T, refConf []string, mod func(*Config), f func(t *testing.T, s serverUnderTest)) {
	t.Helper()
	ref := natspeer.Start(t, refConf...)
	ours := startBroker(t, mod)
	t.Run("nats-server", func(t *testing.T) { f(t, serverUnderTest{"nats-server", ref.URL(), ref.Addr()}) })
	t.Run("strata", func(t *testing.T) { f(t, serverUnderTest{"strata", ours.ClientURL(), ours.Addr()}) })
}

func connect(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.Timeout(5 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Item 1 (and 2 through nats.go's own handshake): Connect succeeds.
func TestConformConnect(t *testing.T) {
	bothServers(t, nil, nil, func(t *testing.T, s serverUnderTest) {
		nc := connect(t, s.url)
		if !nc.IsConnected() || !nc.HeadersSupported() {
			t.Fatalf("connected=%v headers=%v", nc.IsConnected(), nc.HeadersSupported())
		}
		if nc.MaxPayload() <= 0 {
			t.Fatalf("max payload %d", nc.MaxPayload())
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	})
}

// Item 4: with auth on, bad credentials are refused with
// 'Authorization Violation'; good ones connect.
func TestConformAuth(t *testing.T) {
	bothServers(t, []string{"authorization { user: u, password: p }"},
		func(c *Config) { c.Auth = StaticAuth{Users: map[string]string{"u": "p"}} },
		func(t *testing.T, s serverUnderTest) {
			_, err := nats.Connect(s.url, nats.UserInfo("u", "nope"), nats.Timeout(5*time.Second), nats.NoReconnect())
			if !errors.Is(err, nats.ErrAuthorization) {
				t.Fatalf("bad password: %v, want ErrAuthorization", err)
			}
			_, err = nats.Connect(s.url, nats.Timeout(5*time.Second), nats.NoReconnect())
			if !errors.Is(err, nats.ErrAuthorization) {
				t.Fatalf("no credentials: %v, want ErrAuthorization", err)
			}
			nc := connect(t, s.url, nats.UserInfo("u", "p"))
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
		})
}

// Item 6: PUB/HPUB round trip, bytes exact, header keys with case kept.
func TestConformHeadersRoundTrip(t *testing.T) {
	bothServers(t, nil, nil, func(t *testing.T, s serverUnderTest) {
		nc := connect(t, s.url)
		sub, err := nc.SubscribeSync("rt.>")
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		payload := make([]byte, 1000)
		for i := range payload {
			payload[i] = byte(i * 7)
		}
		m := nats.NewMsg("rt.h")
		m.Data = payload
		m.Header = nats.Header{}
		m.Header["X-Mixed-Case"] = []string{"A", "b"}
		m.Header["lower-key"] = []string{"v"}
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		if err := nc.Publish("rt.p", []byte("plain\r\nwith crlf")); err != nil {
			t.Fatal(err)
		}
		got, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Data) != string(payload) {
			t.Errorf("payload changed")
		}
		if v := got.Header["X-Mixed-Case"]; len(v) != 2 || v[0] != "A" || v[1] != "b" {
			t.Errorf("X-Mixed-Case = %v", v)
		}
		if v := got.Header["lower-key"]; len(v) != 1 || v[0] != "v" {
			t.Errorf("lower-key = %v (header keys must keep their case)", got.Header)
		}
		got, err = sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Data) != "plain\r\nwith crlf" || got.Header != nil {
			t.Errorf("plain message: %q %v", got.Data, got.Header)
		}
	})
}

// Item 7: wildcards, and queue groups get each message once while every
// plain subscriber gets all.
func TestConformWildcardsAndQueues(t *testing.T) {
	bothServers(t, nil, nil, func(t *testing.T, s serverUnderTest) {
		nc := connect(t, s.url)
		count := func(subj, queue string) *atomic.Int64 {
			var n atomic.Int64
			var err error
			if queue == "" {
				_, err = nc.Subscribe(subj, func(*nats.Msg) { n.Add(1) })
			} else {
				_, err = nc.QueueSubscribe(subj, queue, func(*nats.Msg) { n.Add(1) })
			}
			if err != nil {
				t.Fatal(err)
			}
			return &n
		}
		star, gt, exact := count("w.*", ""), count("w.>", ""), count("w.a", "")
		q1, q2, q3 := count("w.a", "g"), count("w.*", "g"), count("w.>", "g")
		other := count("w.a", "h")
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		pub := connect(t, s.url)
		const n = 300
		for i := 0; i < n; i++ {
			if err := pub.Publish("w.a", []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		if err := pub.Publish("w.a.b", []byte("deep")); err != nil {
			t.Fatal(err)
		}
		if err := pub.Flush(); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "all deliveries", 10*time.Second, func() bool {
			return gt.Load() == n+1 && other.Load() == n && q1.Load()+q2.Load()+q3.Load() == n+1
		})
		if star.Load() != n || exact.Load() != n {
			t.Errorf("w.* got %d, w.a got %d, want %d", star.Load(), exact.Load(), n)
		}
		// One group g spread over three subjects: the deep message can only
		// go to the w.> member; the rest are spread.
		if q1.Load() == 0 || q2.Load() == 0 || q3.Load() == 0 {
			t.Errorf("queue group not spread: %d %d %d", q1.Load(), q2.Load(), q3.Load())
		}
		time.Sleep(50 * time.Millisecond) // nothing more may arrive
		if got := q1.Load() + q2.Load() + q3.Load(); got != n+1 {
			t.Errorf("group g got %d deliveries, want exactly %d", got, n+1)
		}
	})
}

// Item 8: UNSUB max stops after N in total; echo:false suppresses
// self-delivery.
func TestConformAutoUnsubAndNoEcho(t *testing.T) {
	bothServers(t, nil, nil, func(t *testing.T, s serverUnderTest) {
		nc := connect(t, s.url)
		sub, err := nc.SubscribeSync("au")
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.AutoUnsubscribe(3); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10; i++ {
			_ = nc.Publish("au", []byte{byte(i)})
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			if _, err := sub.NextMsg(5 * time.Second); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
		if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
			t.Fatalf("a 4th message arrived: %q", m.Data)
		}

		quiet := connect(t, s.url, nats.NoEcho())
		own, err := quiet.SubscribeSync("echo")
		if err != nil {
			t.Fatal(err)
		}
		other := connect(t, s.url)
		if err := quiet.Flush(); err != nil {
			t.Fatal(err)
		}
		_ = quiet.Publish("echo", []byte("self"))
		_ = quiet.Flush()
		_ = other.Publish("echo", []byte("other"))
		_ = other.Flush()
		m, err := own.NextMsg(5 * time.Second)
		if err != nil || string(m.Data) != "other" {
			t.Fatalf("no-echo subscriber got %v, %v; want only \"other\"", m, err)
		}
		if m, err := own.NextMsg(200 * time.Millisecond); err == nil {
			t.Fatalf("no-echo subscriber also got %q", m.Data)
		}
	})
}

// Items 9–11: SUB+Flush then a publish from elsewhere is delivered;
// requests go through the _INBOX mux; no responder gives ErrNoResponders.
func TestConformRequestReply(t *testing.T) {
	bothServers(t, nil, nil, func(t *testing.T, s serverUnderTest) {
		svc := connect(t, s.url)
		if _, err := svc.Subscribe("svc.echo", func(m *nats.Msg) { _ = m.Respond(append([]byte("re:"), m.Data...)) }); err != nil {
			t.Fatal(err)
		}
		if err := svc.Flush(); err != nil {
			t.Fatal(err)
		}
		cli := connect(t, s.url)
		for i := 0; i < 20; i++ {
			r, err := cli.Request("svc.echo", []byte(fmt.Sprint(i)), 5*time.Second)
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			if string(r.Data) != fmt.Sprintf("re:%d", i) {
				t.Fatalf("reply %q", r.Data)
			}
		}
		start := time.Now()
		_, err := cli.Request("nobody.home", []byte("x"), 5*time.Second)
		if !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("request with no responder: %v, want ErrNoResponders", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("no-responders took %v", d)
		}
	})
}

// Item 12: a declared size over max_payload gets
// -ERR 'Maximum Payload Violation' and a close (nats.go checks the limit
// itself, so this goes raw); nats.go refuses too large publishes itself.
func TestConformMaxPayload(t *testing.T) {
	bothServers(t, []string{"max_payload: 4096"}, func(c *Config) { c.MaxPayload = 4096 }, func(t *testing.T, s serverUnderTest) {
		nc := connect(t, s.url)
		if nc.MaxPayload() != 4096 {
			t.Fatalf("max payload %d", nc.MaxPayload())
		}
		if err := nc.Publish("big", make([]byte, 5000)); !errors.Is(err, nats.ErrMaxPayload) {
			t.Fatalf("publish 5000 B: %v", err)
		}
		tr := runRaw(t, s.addr, rawScript{input: "CONNECT {\"verbose\":false}\r\nPUB a 4097\r\n"})
		if !tr.Closed || len(tr.Frames) != 1 || tr.Frames[0] != "-ERR 'Maximum Payload Violation'" {
			t.Fatalf("got %v", tr)
		}
	})
}

// Item 13: every -ERR a broker sends in these sessions is one nats.go
// treats as fatal and is followed by the broker closing the connection.
func TestConformOnlyFatalErrors(t *testing.T) {
	s := startBroker(t, nil)
	for _, sc := range rawScripts() {
		if sc.auth {
			continue
		}
		tr := runRaw(t, s.Addr(), sc)
		for _, f := range tr.Frames {
			if strings.HasPrefix(f, "-ERR") && !tr.Closed {
				t.Errorf("%s: %s sent without closing", sc.name, f)
			}
		}
	}
}

// Item 14: client PINGs are answered; idle clients are pinged; a client
// that stops answering is closed with 'Stale Connection'.
func TestConformPings(t *testing.T) {
	bothServers(t, []string{"ping_interval: \"200ms\"", "ping_max: 2"},
		func(c *Config) {
			c.PingInterval = 200 * time.Millisecond
			c.FirstPing = 200 * time.Millisecond
			c.MaxPingsOut = 2
		},
		func(t *testing.T, s serverUnderTest) {
			// nats.go answers server pings itself: it stays connected.
			var disconnects atomic.Int32
			nc := connect(t, s.url, nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnects.Add(1) }))
			start := time.Now()
			for time.Since(start) < time.Second {
				if rtt, err := nc.RTT(); err != nil || rtt <= 0 {
					t.Fatalf("RTT: %v %v", rtt, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if disconnects.Load() != 0 || !nc.IsConnected() {
				t.Fatalf("answering client was disconnected")
			}
			// A raw client that never answers: pinged, then closed as stale.
			c, err := net.Dial("tcp", s.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, _ = c.Write([]byte("CONNECT {\"verbose\":false}\r\n"))
			br := bufio.NewReader(c)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			var lines []string
			for {
				l, err := br.ReadString('\n')
				if err != nil {
					break
				}
				lines = append(lines, strings.TrimSpace(l))
			}
			pings := 0
			for _, l := range lines {
				if l == "PING" {
					pings++
				}
			}
			if pings < 2 || lines[len(lines)-1] != "-ERR 'Stale Connection'" {
				t.Fatalf("idle client saw %q; want PINGs then -ERR 'Stale Connection' and a close", lines)
			}
		})
}

// Item 9 across many subscriptions and connections at once, with a race
// of subscribes and publishes (exercised under -race).
func TestConcurrentPubSub(t *testing.T) {
	s := startBroker(t, nil)
	const subs, msgs = 8, 2000
	var wg sync.WaitGroup
	counts := make([]atomic.Int64, subs)
	for i := 0; i < subs; i++ {
		nc := connect(t, s.ClientURL())
		i := i
		if _, err := nc.Subscribe("c.>", func(*nats.Msg) { counts[i].Add(1) }); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := nats.Connect(s.ClientURL())
			if err != nil {
				t.Error(err)
				return
			}
			defer nc.Close()
			for j := 0; j < msgs; j++ {
				_ = nc.Publish(fmt.Sprintf("c.%d", j%7), []byte("m"))
			}
			_ = nc.Flush()
		}()
	}
	wg.Wait()
	testutil.Eventually(t, "every subscriber gets every message", 20*time.Second, func() bool {
		for i := range counts {
			if counts[i].Load() != 4*msgs {
				return false
			}
		}
		return true
	})
}
