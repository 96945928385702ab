package broker

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/stratamesh/strata/internal/testutil"
)

// staticPeers is a PeerSource over a fixed, changeable list.
type staticPeers struct {
	mu      sync.Mutex
	peers   []Peer
	changed chan struct{}
}

func newStaticPeers() *staticPeers { return &staticPeers{changed: make(chan struct{}, 1)} }

func (p *staticPeers) Peers() []Peer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Peer(nil), p.peers...)
}
func (p *staticPeers) Changed() <-chan struct{} { return p.changed }
func (p *staticPeers) set(ps ...Peer) {
	p.mu.Lock()
	p.peers = ps
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// startRegion starts n brokers of one region, fully routed, and waits
// until every broker has a route to every other.
func startRegion(t *testing.T, n int, mod func(*Config)) []*Server {
	t.Helper()
	peers := newStaticPeers()
	var servers []*Server
	for i := 0; i < n; i++ {
		s := startBroker(t, func(c *Config) {
			c.ServerName = fmt.Sprintf("r.b%d", i+1)
			c.RouteAddr = "127.0.0.1:0"
			c.Peers = peers
			if mod != nil {
				mod(c)
			}
		})
		servers = append(servers, s)
	}
	var ps []Peer
	for _, s := range servers {
		ps = append(ps, Peer{Name: s.Name(), RouteAddr: s.RouteAddr()})
	}
	peers.set(ps...)
	testutil.Eventually(t, "full route mesh", 10*time.Second, func() bool {
		for _, s := range servers {
			if len(s.Routes()) != n-1 {
				return false
			}
		}
		return true
	})
	return servers
}

// waitInterest publishes probes from pub until sub's handler has seen one,
// so that interest announced over a route has arrived (core NATS gives no
// cross-broker Flush guarantee, like nats-server clusters).
func waitInterest(t *testing.T, pub *nats.Conn, subject string, seen *atomic.Int64) {
	t.Helper()
	testutil.Eventually(t, "interest on "+subject+" crosses the route", 10*time.Second, func() bool {
		_ = pub.Publish(subject, []byte("probe"))
		_ = pub.Flush()
		return seen.Load() > 0
	})
}

func TestRoutesPubSubAcrossBrokers(t *testing.T) {
	ss := startRegion(t, 3, nil)
	a := connect(t, ss[0].ClientURL())
	c := connect(t, ss[2].ClientURL())
	var probes, got atomic.Int64
	var mu sync.Mutex
	var seen []string
	if _, err := a.Subscribe("x.>", func(m *nats.Msg) {
		if string(m.Data) == "probe" {
			probes.Add(1)
			return
		}
		mu.Lock()
		seen = append(seen, m.Subject+"|"+string(m.Data)+"|"+m.Header.Get("K"))
		mu.Unlock()
		got.Add(1)
	}); err != nil {
		t.Fatal(err)
	}
	_ = a.Flush()
	waitInterest(t, c, "x.probe", &probes)
	const n = 1000
	for i := 0; i < n; i++ {
		m := nats.NewMsg(fmt.Sprintf("x.%d", i))
		m.Data = []byte(fmt.Sprint(i))
		m.Header = nats.Header{"K": []string{fmt.Sprint(i)}}
		if err := c.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.Flush()
	testutil.Eventually(t, "all messages cross", 10*time.Second, func() bool { return got.Load() == n })
	mu.Lock()
	defer mu.Unlock()
	for i, s := range seen {
		if want := fmt.Sprintf("x.%d|%d|%d", i, i, i); s != want {
			t.Fatalf("message %d: %q, want %q (order or bytes changed)", i, s, want)
		}
	}
}

func TestRoutesQueueGroupOncePerRegion(t *testing.T) {
	ss := startRegion(t, 2, nil)
	var counts [4]atomic.Int64
	var probes atomic.Int64
	for i := 0; i < 4; i++ {
		nc := connect(t, ss[i%2].ClientURL())
		i := i
		if _, err := nc.QueueSubscribe("work", "workers", func(m *nats.Msg) {
			if string(m.Data) == "probe" {
				probes.Add(1)
				return
			}
			counts[i].Add(1)
		}); err != nil {
			t.Fatal(err)
		}
		_ = nc.Flush()
	}
	pub := connect(t, ss[0].ClientURL())
	// Wait until broker 0 knows broker 1's members: probes must reach them.
	testutil.Eventually(t, "remote queue interest", 10*time.Second, func() bool {
		return ss[0].remote.HasInterest([]byte("work"))
	})
	probes.Store(0)
	const n = 4000
	for i := 0; i < n; i++ {
		_ = pub.Publish("work", []byte("job"))
	}
	_ = pub.Flush()
	total := func() int64 {
		var s int64
		for i := range counts {
			s += counts[i].Load()
		}
		return s
	}
	testutil.Eventually(t, "all jobs delivered", 10*time.Second, func() bool { return total() == n })
	time.Sleep(100 * time.Millisecond)
	if total() != n {
		t.Fatalf("%d deliveries for %d jobs: a queue group must get each once", total(), n)
	}
	for i := range counts {
		if counts[i].Load() == 0 {
			t.Errorf("member %d (broker %d) got nothing", i, i%2)
		}
	}
}

func TestRoutesRequestReplyAndNoResponders(t *testing.T) {
	ss := startRegion(t, 2, nil)
	svc := connect(t, ss[1].ClientURL())
	if _, err := svc.Subscribe("svc.time", func(m *nats.Msg) { _ = m.Respond([]byte("now")) }); err != nil {
		t.Fatal(err)
	}
	_ = svc.Flush()
	cli := connect(t, ss[0].ClientURL())
	testutil.Eventually(t, "service reachable across the route", 10*time.Second, func() bool {
		r, err := cli.Request("svc.time", nil, time.Second)
		return err == nil && string(r.Data) == "now"
	})
	if _, err := cli.Request("svc.none", nil, 5*time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("request to nobody across the region: %v", err)
	}
	// Withdrawn interest: once the service unsubscribes, requests get 503.
	_ = svc.Drain()
	testutil.Eventually(t, "interest withdrawn", 10*time.Second, func() bool {
		_, err := cli.Request("svc.time", nil, time.Second)
		return errors.Is(err, nats.ErrNoResponders)
	})
}

func TestRoutesReconnectAfterPeerRestart(t *testing.T) {
	peers := newStaticPeers()
	mk := func(name, routeAddr string) *Server {
		s, err := Start(Config{ServerName: name, ListenAddr: "127.0.0.1:0", RouteAddr: routeAddr, Peers: peers, Mesh: "m", Region: "r"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := startBroker(t, func(c *Config) { c.ServerName = "r.a"; c.RouteAddr = "127.0.0.1:0"; c.Peers = peers })
	b := mk("r.b", "127.0.0.1:0")
	bRoute := b.RouteAddr()
	peers.set(Peer{"r.a", a.RouteAddr()}, Peer{"r.b", bRoute})
	testutil.Eventually(t, "route up", 10*time.Second, func() bool { return len(a.Routes()) == 1 && len(b.Routes()) == 1 })
	ctx, cancel := contextWithTimeout(5 * time.Second)
	defer cancel()
	_ = b.Close(ctx)
	testutil.Eventually(t, "route down", 10*time.Second, func() bool { return len(a.Routes()) == 0 })
	b2 := mk("r.b", bRoute)
	t.Cleanup(func() {
		ctx, cancel := contextWithTimeout(5 * time.Second)
		defer cancel()
		_ = b2.Close(ctx)
	})
	d := testutil.Eventually(t, "route back", 15*time.Second, func() bool { return len(a.Routes()) == 1 && len(b2.Routes()) == 1 })
	t.Logf("route re-established %v after the peer came back", d)
}

func TestRouteRefusesOtherRegion(t *testing.T) {
	a := startBroker(t, func(c *Config) { c.ServerName = "r.a"; c.RouteAddr = "127.0.0.1:0" })
	peers := newStaticPeers()
	peers.set(Peer{"r.a", a.RouteAddr()})
	b := startBroker(t, func(c *Config) {
		c.ServerName = "other.0"
		c.Region = "other"
		c.RouteAddr = "127.0.0.1:0"
		c.Peers = peers
	})
	time.Sleep(300 * time.Millisecond) // give a (wrong) route the chance to form
	if len(a.Routes())+len(b.Routes()) != 0 {
		t.Fatalf("a route formed across regions: %v %v", a.Routes(), b.Routes())
	}
	// A raw dial with a bad hello is refused too.
	c, err := net.Dial("tcp", a.RouteAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("CONNECT {\"name\":\"x\",\"mesh\":\"m\",\"region\":\"elsewhere\"}\r\n"))
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 200)
	n, _ := c.Read(buf)
	if string(buf[:n]) != "-ERR '"+errTextRouteRegion+"'\r\n" {
		t.Fatalf("got %q", buf[:n])
	}
}

// A subscriber that stops reading on one broker must not stall the route:
// the publisher on the other broker and unrelated request/reply across the
// route go on, and the stuck client is cut off as a slow consumer.
func TestRoutesStuckSubscriberDoesNotStallRegion(t *testing.T) {
	ss := startRegion(t, 2, func(c *Config) { c.MaxPending = 4 << 20 })
	raw, err := net.Dial("tcp", ss[1].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := raw.Write([]byte("CONNECT {\"verbose\":false}\r\nSUB flood 1\r\n")); err != nil {
		t.Fatal(err)
	}
	svc := connect(t, ss[1].ClientURL())
	if _, err := svc.Subscribe("probe.svc", func(m *nats.Msg) { _ = m.Respond([]byte("ok")) }); err != nil {
		t.Fatal(err)
	}
	_ = svc.Flush()
	cli := connect(t, ss[0].ClientURL())
	testutil.Eventually(t, "service reachable across the route", 10*time.Second, func() bool {
		_, err := cli.Request("probe.svc", nil, time.Second)
		return err == nil
	})
	testutil.Eventually(t, "flood interest across the route", 10*time.Second, func() bool {
		return ss[0].remote.HasInterest([]byte("flood"))
	})
	pub := connect(t, ss[0].ClientURL())
	payload := make([]byte, 1024)
	stop := make(chan struct{})
	var worstPub atomic.Int64
	var pubDone sync.WaitGroup
	pubDone.Add(1)
	go func() {
		defer pubDone.Done()
		for i := 0; i < 100000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			_ = pub.Publish("flood", payload)
			if i%1000 == 999 {
				_ = pub.Flush()
			}
			if d := time.Since(start); int64(d) > worstPub.Load() {
				worstPub.Store(int64(d))
			}
		}
		_ = pub.Flush()
	}()
	worst := time.Duration(0)
	for i := 0; i < 20; i++ {
		start := time.Now()
		if _, err := cli.Request("probe.svc", nil, 5*time.Second); err != nil {
			t.Fatalf("probe %d across the route failed while a client on b2 is stuck: %v", i, err)
		}
		worst = max(worst, time.Since(start))
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	pubDone.Wait()
	testutil.Eventually(t, "stuck client cut off", 20*time.Second, func() bool { return ss[1].Stats().SlowConsumers >= 1 })
	t.Logf("worst probe round trip %v, worst publish call %v", worst, time.Duration(worstPub.Load()))
}

// INFO lists the region's brokers in connect_urls, so a client given one
// URL can fail over to the others.
func TestInfoConnectURLs(t *testing.T) {
	ss := startRegion(t, 3, nil)
	nc := connect(t, ss[0].ClientURL())
	testutil.Eventually(t, "the client learns the other brokers", 10*time.Second, func() bool {
		return len(nc.DiscoveredServers()) == 2
	})
	t.Logf("discovered %v", nc.DiscoveredServers())
}
