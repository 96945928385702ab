package broker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/tenancy/quota"
)

// fakeQuotas is a Quotas gate for tests: it refuses every publish of the
// tenants in refuse and caps the connections of those in maxConns, and
// records every call.
type fakeQuotas struct {
	mu       sync.Mutex
	refuse   map[string]bool
	maxConns map[string]int
	charged  map[string][]int // tenant → sizes charged, in order
	conns    map[string]int   // connections held now
	connects map[string]int   // accepted Connect calls
	disconn  map[string]int   // Disconnect calls
	refused  map[string]int   // refused Connect calls
	negative bool             // a Disconnect without a connection held
}

func newFakeQuotas() *fakeQuotas {
	return &fakeQuotas{refuse: map[string]bool{}, maxConns: map[string]int{}, charged: map[string][]int{},
		conns: map[string]int{}, connects: map[string]int{}, disconn: map[string]int{}, refused: map[string]int{}}
}

func (f *fakeQuotas) AdmitPublish(tenant string, size int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.charged[tenant] = append(f.charged[tenant], size)
	if f.refuse[tenant] {
		return &quota.Refusal{Tenant: tenant, Kind: quota.PublishRate, Limit: 10, Use: 12}
	}
	return nil
}

func (f *fakeQuotas) Connect(tenant string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m := f.maxConns[tenant]; m > 0 && f.conns[tenant] >= m {
		f.refused[tenant]++
		return &quota.Refusal{Tenant: tenant, Kind: quota.Connections, Limit: float64(m), Use: float64(f.conns[tenant])}
	}
	f.conns[tenant]++
	f.connects[tenant]++
	return nil
}

func (f *fakeQuotas) Disconnect(tenant string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disconn[tenant]++
	f.conns[tenant]--
	if f.conns[tenant] < 0 {
		f.negative = true
	}
}

func (f *fakeQuotas) snapshot() (charged map[string][]int, conns, connects, disconn map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	charged = map[string][]int{}
	for k, v := range f.charged {
		charged[k] = append([]int(nil), v...)
	}
	cp := func(m map[string]int) map[string]int {
		out := map[string]int{}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	return charged, cp(f.conns), cp(f.connects), cp(f.disconn)
}

// accountAuth logs user u in to account accounts[u] with any password
// ("" is the system account); unknown users are refused.
type accountAuth map[string]string

func (a accountAuth) Authenticate(ci ConnectInfo) (Identity, error) {
	acct, ok := a[ci.User]
	if !ok {
		return Identity{}, ErrAuthFailed
	}
	return Identity{Account: acct, User: ci.User}, nil
}

// rawConn is a protocol-level client: it has read INFO.
func rawConn(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	if l, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(l, "INFO ") {
		t.Fatalf("INFO: %q, %v", l, err)
	}
	return c, br
}

// A core publish of a tenant over quota is dropped and the client is told
// with a permissions violation naming the subject and the refusal; nats.go
// reports it to the async error handler and keeps the connection, which
// goes on publishing other tenants' subjects. '$' and _INBOX subjects are
// never charged.
func TestQuotaCorePublishRefused(t *testing.T) {
	fq := newFakeQuotas()
	fq.refuse["acme"] = true
	s := startBroker(t, func(c *Config) { c.Quotas = fq })
	errs := make(chan error, 16)
	pub := connect(t, s.ClientURL(), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	sub := connect(t, s.ClientURL())
	got := make(chan string, 16)
	for _, subj := range []string{"acme.>", "other.>", "_INBOX.>", "$SYS.x"} {
		if _, err := sub.Subscribe(subj, func(m *nats.Msg) { got <- m.Subject }); err != nil {
			t.Fatal(err)
		}
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish("acme.orders", []byte("refused")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		want := `Permissions Violation for Publish to "acme.orders": tenant "acme" is over its publish_rate quota: limit 10 msgs/s, mesh-wide use 12 msgs/s`
		if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), want) {
			t.Fatalf("async error %v; want a permissions violation containing %q", err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no async error for a publish refused by quota")
	}
	for _, subj := range []string{"other.orders", "_INBOX.abc", "$SYS.x"} {
		if err := pub.Publish(subj, []byte("12345")); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatalf("the connection did not survive the refusal: %v", err)
	}
	var delivered []string
	for range 3 {
		select {
		case subj := <-got:
			delivered = append(delivered, subj)
		case <-time.After(10 * time.Second):
			t.Fatalf("deliveries after the refusal: %v, want other.orders, _INBOX.abc and $SYS.x", delivered)
		}
	}
	for _, d := range delivered {
		if d == "acme.orders" {
			t.Fatal("a refused publish was delivered")
		}
	}
	if !pub.IsConnected() {
		t.Fatal("publisher disconnected")
	}
	charged, _, _, _ := fq.snapshot()
	if len(charged) != 2 || len(charged["acme"]) != 1 || len(charged["other"]) != 1 || charged["acme"][0] != len("refused") || charged["other"][0] != 5 {
		t.Fatalf("charged %v; want acme [7] and other [5] ($ and _INBOX never)", charged)
	}
	if st := s.Stats(); st.QuotaRefusals != 1 || st.QuotaErrorsUnsent != 0 {
		t.Fatalf("stats %+v: want 1 refusal, 0 unsent", st)
	}
}

// A publish is charged its header and payload bytes; with auth on, to the
// connection's account whatever the subject, and never for the system
// account.
func TestQuotaCoreChargesAccountAndSize(t *testing.T) {
	fq := newFakeQuotas()
	s := startBroker(t, func(c *Config) {
		c.Quotas = fq
		c.Auth = accountAuth{"alice": "acme", "root": ""}
	})
	c, br := rawConn(t, s.Addr())
	hdr := "NATS/1.0\r\nK: v\r\n\r\n"
	fmt.Fprintf(c, "CONNECT {\"verbose\":false,\"headers\":true,\"user\":\"alice\",\"pass\":\"x\"}\r\n"+
		"PUB orders.new 3\r\nabc\r\nHPUB zeta.x %d %d\r\n%shello\r\nPING\r\n", len(hdr), len(hdr)+5, hdr)
	if l, _ := br.ReadString('\n'); l != "PONG\r\n" {
		t.Fatalf("got %q, want PONG", l)
	}
	root := connect(t, s.ClientURL(), nats.UserInfo("root", "x"))
	if err := root.Publish("acme.orders", []byte("sys")); err != nil {
		t.Fatal(err)
	}
	if err := root.Flush(); err != nil {
		t.Fatal(err)
	}
	charged, _, _, _ := fq.snapshot()
	if len(charged) != 1 || fmt.Sprint(charged["acme"]) != fmt.Sprint([]int{3, len(hdr) + 5}) {
		t.Fatalf("charged %v; want acme [3 %d] only (the system account is not charged)", charged, len(hdr)+5)
	}
}

// A flood of refused publishes gets at most one -ERR per 100 ms; the rest
// are counted.
func TestQuotaErrRateLimited(t *testing.T) {
	fq := newFakeQuotas()
	fq.refuse["acme"] = true
	s := startBroker(t, func(c *Config) { c.Quotas = fq })
	c, br := rawConn(t, s.Addr())
	const n = 200
	var b strings.Builder
	b.WriteString("CONNECT {\"verbose\":false}\r\n")
	for range n {
		b.WriteString("PUB acme.x 1\r\na\r\n")
	}
	b.WriteString("PING\r\n")
	start := time.Now()
	if _, err := c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	errs := 0
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading: %v (after %d -ERRs)", err, errs)
		}
		if l == "PONG\r\n" {
			break
		}
		if !strings.HasPrefix(l, "-ERR 'Permissions Violation for Publish to \"acme.x\": tenant \"acme\"") {
			t.Fatalf("unexpected line %q", l)
		}
		errs++
	}
	elapsed := time.Since(start)
	if most := 1 + int(elapsed/quotaErrEvery); errs < 1 || errs > most {
		t.Fatalf("%d -ERRs for %d refusals in %v; want 1..%d", errs, n, elapsed, most)
	}
	st := s.Stats()
	if st.QuotaRefusals != n || st.QuotaErrorsUnsent != int64(n-errs) {
		t.Fatalf("stats: %d refusals, %d unsent; want %d and %d", st.QuotaRefusals, st.QuotaErrorsUnsent, n, n-errs)
	}
	t.Logf("%d refusals in %v: %d -ERRs", n, elapsed, errs)
}

// With auth on, a tenant's connections past its quota are refused at
// CONNECT with nats-server's text and the refusal; a connection that
// closes frees its place. The system account is never counted.
func TestQuotaConnectionsRefused(t *testing.T) {
	fq := newFakeQuotas()
	fq.maxConns["acme"] = 1
	s := startBroker(t, func(c *Config) {
		c.Quotas = fq
		c.Auth = accountAuth{"alice": "acme", "root": ""}
	})
	first := connect(t, s.ClientURL(), nats.UserInfo("alice", "x"), nats.NoReconnect())
	_, err := nats.Connect(s.ClientURL(), nats.UserInfo("alice", "x"), nats.NoReconnect(), nats.Timeout(5*time.Second))
	want := `maximum connections exceeded: tenant "acme" is over its connections quota: limit 1 connections, mesh-wide use 1 connections`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("second connection: %v; want an error containing %q", err, want)
	}
	for range 3 {
		connect(t, s.ClientURL(), nats.UserInfo("root", "x"))
	}
	first.Close()
	testutil.Eventually(t, "the first connection given back", 10*time.Second, func() bool {
		_, conns, _, _ := fq.snapshot()
		return conns["acme"] == 0
	})
	connect(t, s.ClientURL(), nats.UserInfo("alice", "x"))
	_, conns, connects, disconn := fq.snapshot()
	if conns["acme"] != 1 || connects["acme"] != 2 || disconn["acme"] != 1 || len(connects) != 1 {
		t.Fatalf("conns %v connects %v disconnects %v; want acme 1/2/1 and no system account", conns, connects, disconn)
	}
	if st := s.Stats(); st.QuotaConnRefusals != 1 {
		t.Fatalf("QuotaConnRefusals %d, want 1", st.QuotaConnRefusals)
	}
}

// Every accepted connection is given back exactly once: on a client's
// close, on a close for a protocol error, and when the broker shuts down
// — then before any client connection is closed and before OnDrain runs.
func TestQuotaDisconnectExactlyOnce(t *testing.T) {
	fq := newFakeQuotas()
	fq.maxConns["acme"] = 3
	type drainSeen struct{ held, clients int }
	drained := make(chan drainSeen, 2)
	var s *Server
	s = startBroker(t, func(c *Config) {
		c.Quotas = fq
		c.Auth = accountAuth{"alice": "acme", "bob": "bravo"}
		c.OnDrain = func(context.Context) {
			_, conns, _, _ := fq.snapshot()
			drained <- drainSeen{held: conns["acme"] + conns["bravo"], clients: s.Stats().Clients}
		}
	})
	// A normal close.
	nc := connect(t, s.ClientURL(), nats.UserInfo("alice", "x"), nats.NoReconnect())
	nc.Close()
	// A close for a protocol error.
	c, br := rawConn(t, s.Addr())
	fmt.Fprint(c, "CONNECT {\"verbose\":false,\"user\":\"bob\",\"pass\":\"x\"}\r\nPING\r\n")
	if l, _ := br.ReadString('\n'); l != "PONG\r\n" {
		t.Fatalf("got %q, want PONG", l)
	}
	fmt.Fprint(c, "BOGUS\r\n")
	if l, _ := br.ReadString('\n'); !strings.HasPrefix(l, "-ERR 'Unknown Protocol Operation'") {
		t.Fatalf("got %q, want the protocol error", l)
	}
	// A refused connection takes nothing and gives nothing back.
	for range 3 {
		connect(t, s.ClientURL(), nats.UserInfo("alice", "x"), nats.NoReconnect())
	}
	if _, err := nats.Connect(s.ClientURL(), nats.UserInfo("alice", "x"), nats.NoReconnect()); err == nil {
		t.Fatal("a fourth acme connection was accepted over a cap of 3")
	}
	connect(t, s.ClientURL(), nats.UserInfo("bob", "x"), nats.NoReconnect())
	testutil.Eventually(t, "the closed connections given back", 10*time.Second, func() bool {
		_, conns, _, _ := fq.snapshot()
		return conns["acme"] == 3 && conns["bravo"] == 1 && s.Stats().Clients == 4
	})
	// Shutdown with four connections open.
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-drained:
		if d.held != 0 || d.clients != 4 {
			t.Fatalf("at OnDrain: %d connections still held, %d clients; want 0 held and the 4 clients not closed yet", d.held, d.clients)
		}
	default:
		t.Fatal("OnDrain not called by Close")
	}
	_ = s.Close(ctx) // idempotent: no second drain
	if len(drained) != 0 {
		t.Fatal("OnDrain called twice")
	}
	_, conns, connects, disconn := fq.snapshot()
	if connects["acme"] != 4 || connects["bravo"] != 2 || fmt.Sprint(disconn) != fmt.Sprint(connects) || fq.negative {
		t.Fatalf("connects %v disconnects %v (now %v); want acme 4, bravo 2, each given back once", connects, disconn, conns)
	}
}

// The tenant of a core publish: the first token with auth off, the
// account with auth on; '$', _INBOX and the system account are never
// charged. A repeated tenant costs no allocation, and a connection
// publishing to ever new first tokens keeps a bounded cache.
func TestQuotaPublishTenant(t *testing.T) {
	c := &client{srv: &Server{cfg: Config{}}}
	for _, tc := range []struct {
		subject, tenant string
		charged         bool
	}{
		{"acme.orders.new", "acme", true},
		{"acme", "acme", true},
		{"bravo.x", "bravo", true},
		{"$JS.API.INFO", "", false},
		{"$STRATA.REPL.x", "", false},
		{"_INBOX.abc.1", "", false},
		{"_INBOXES.x", "", false},
		{"_other.x", "_other", true},
	} {
		got, ok := c.publishTenant([]byte(tc.subject))
		if got != tc.tenant || ok != tc.charged {
			t.Errorf("%q: tenant %q charged %v; want %q %v", tc.subject, got, ok, tc.tenant, tc.charged)
		}
	}
	subj := []byte("acme.orders")
	if n := testing.AllocsPerRun(100, func() { c.publishTenant(subj) }); n != 0 {
		t.Fatalf("%v allocations per publish of a known tenant, want 0", n)
	}
	for i := range 10 * maxTenantNames {
		s := fmt.Sprintf("t%d.x", i)
		if got, _ := c.publishTenant([]byte(s)); got != fmt.Sprintf("t%d", i) {
			t.Fatalf("%s: tenant %q", s, got)
		}
		if len(c.tenantNames) > maxTenantNames {
			t.Fatalf("tenant cache holds %d names, bound %d", len(c.tenantNames), maxTenantNames)
		}
	}
	auth := &client{srv: &Server{cfg: Config{Auth: accountAuth{}}}, ident: Identity{Account: "acme"}}
	if got, ok := auth.publishTenant([]byte("zeta.x")); got != "acme" || !ok {
		t.Fatalf("with auth: tenant %q charged %v; want the account acme", got, ok)
	}
	// A tenant's connection is charged on every subject of its space: a
	// "$…" or "_INBOX…" subject is no way around its quota.
	for _, subj := range []string{"_INBOX.x", "_INBOXX.y", "$KV.x", "$SYS.x", "$JS.FC.x", "$A.acme.events.x"} {
		if got, ok := auth.publishTenant([]byte(subj)); got != "acme" || !ok {
			t.Fatalf("with auth, %s: tenant %q charged %v; want the account acme", subj, got, ok)
		}
	}
	sys := &client{srv: &Server{cfg: Config{Auth: accountAuth{}}}}
	if _, ok := sys.publishTenant([]byte("acme.x")); ok {
		t.Fatal("the system account was charged")
	}
	if got := oneLine("a\r\nb\nc"); got != "a  b c" {
		t.Fatalf("oneLine: %q", got)
	}
}
