package broker

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// authMesh is an operator with a system account and two tenant accounts,
// as region wiring makes them; each test adds users to it. It serves the
// same JWTs to a Strata broker (JWTAuth) and to the reference nats-server
// (an operator JWT and a preloaded memory resolver), so every behaviour
// below is checked against the reference too.
type authMesh struct {
	t        testing.TB
	operator nkeys.KeyPair
	opPub    string
	opJWT    string
	accounts map[string]*authAccount // by tenant ("" = system)

	mu   sync.Mutex
	jwts map[string]string // account pub -> current JWT
}

type authAccount struct {
	name string
	kp   nkeys.KeyPair
	pub  string
	ac   *jwt.AccountClaims
}

func newAuthMesh(t testing.TB, operator nkeys.KeyPair, tenants ...string) *authMesh {
	t.Helper()
	if operator == nil {
		operator, _ = nkeys.CreateOperator()
	}
	m := &authMesh{t: t, operator: operator, accounts: map[string]*authAccount{}, jwts: map[string]string{}}
	m.opPub, _ = operator.PublicKey()
	for _, name := range append([]string{""}, tenants...) {
		kp, _ := nkeys.CreateAccount()
		pub, _ := kp.PublicKey()
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		if name == "" {
			ac.Name = "SYS"
		}
		a := &authAccount{name: name, kp: kp, pub: pub, ac: ac}
		m.accounts[name] = a
		m.sign(a)
	}
	oc := jwt.NewOperatorClaims(m.opPub)
	oc.Name = "mesh"
	oc.SystemAccount = m.accounts[""].pub
	var err error
	if m.opJWT, err = oc.Encode(operator); err != nil {
		t.Fatal(err)
	}
	return m
}

// sign (re-)signs a's JWT with the operator.
func (m *authMesh) sign(a *authAccount) {
	tok, err := a.ac.Encode(m.operator)
	if err != nil {
		m.t.Fatal(err)
	}
	m.mu.Lock()
	m.jwts[a.pub] = tok
	m.mu.Unlock()
}

// AccountJWT implements AccountResolver.
func (m *authMesh) AccountJWT(pub string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	tok, ok := m.jwts[pub]
	return tok, ok
}

func (m *authMesh) auth() *JWTAuth {
	return &JWTAuth{Operators: []string{m.opPub}, SystemAccount: m.accounts[""].pub, Accounts: m}
}

// refConf is the reference server's configuration for the same mesh.
func (m *authMesh) refConf() []string {
	lines := []string{"operator: " + m.opJWT, "system_account: " + m.accounts[""].pub, "resolver: MEMORY", "resolver_preload: {"}
	m.mu.Lock()
	for pub, tok := range m.jwts {
		lines = append(lines, fmt.Sprintf("  %s: %q", pub, tok))
	}
	m.mu.Unlock()
	return append(lines, "}")
}

// user makes a user of tenant's account; edit changes its claims first.
func (m *authMesh) user(tenant string, edit func(*jwt.UserClaims)) (userJWT string, kp nkeys.KeyPair) {
	m.t.Helper()
	a := m.accounts[tenant]
	kp, _ = nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	uc := jwt.NewUserClaims(pub)
	uc.Name = "u"
	if edit != nil {
		edit(uc)
	}
	tok, err := uc.Encode(a.kp)
	if err != nil {
		m.t.Fatal(err)
	}
	return tok, kp
}

func userOpt(userJWT string, kp nkeys.KeyPair) nats.Option {
	return nats.UserJWT(func() (string, error) { return userJWT, nil }, func(nonce []byte) ([]byte, error) { return kp.Sign(nonce) })
}

// login connects as a new user of tenant.
func (m *authMesh) login(t *testing.T, url, tenant string, edit func(*jwt.UserClaims), opts ...nats.Option) *nats.Conn {
	t.Helper()
	tok, kp := m.user(tenant, edit)
	return connect(t, url, append([]nats.Option{userOpt(tok, kp)}, opts...)...)
}

// bothAuthServers runs f against the reference server and a Strata
// broker, both trusting m.
func bothAuthServers(t *testing.T, m *authMesh, f func(t *testing.T, s serverUnderTest)) {
	t.Helper()
	bothServers(t, m.refConf(), func(c *Config) { c.Auth = m.auth() }, f)
}

func TestAuthTenantsAreSeparateSubjectSpaces(t *testing.T) {
	m := newAuthMesh(t, nil, "acme", "globex")
	bothAuthServers(t, m, func(t *testing.T, s serverUnderTest) {
		a := m.login(t, s.url, "acme", nil)
		a2 := m.login(t, s.url, "acme", nil)
		b := m.login(t, s.url, "globex", nil)
		all, _ := a.SubscribeSync(">")
		inbox, _ := a.SubscribeSync("_INBOX.>")
		mine, _ := a2.SubscribeSync("orders.new")
		a.Flush()
		a2.Flush()
		// globex answers its own request; acme's ">" and inbox snooping
		// must see none of it.
		svc, _ := b.Subscribe("svc", func(msg *nats.Msg) { msg.Respond([]byte("secret")) })
		defer svc.Unsubscribe()
		b.Flush()
		if rep, err := b.Request("svc", []byte("q"), 2*time.Second); err != nil || string(rep.Data) != "secret" {
			t.Fatalf("globex's own request: %v %v", rep, err)
		}
		if err := b.Publish("orders.new", []byte("globex order")); err != nil {
			t.Fatal(err)
		}
		b.Flush()
		if err := a.Publish("orders.new", []byte("acme order")); err != nil {
			t.Fatal(err)
		}
		a.Flush()
		msg, err := mine.NextMsg(2 * time.Second)
		if err != nil || string(msg.Data) != "acme order" {
			t.Fatalf("acme's own subscriber: %v %v", msg, err)
		}
		got, err := all.NextMsg(2 * time.Second)
		if err != nil || string(got.Data) != "acme order" || got.Subject != "orders.new" {
			t.Fatalf("acme's '>' got %v %v, want its own order on orders.new", got, err)
		}
		if extra, err := all.NextMsg(300 * time.Millisecond); err == nil {
			t.Fatalf("acme's '>' saw another tenant's message %q on %s", extra.Data, extra.Subject)
		}
		if snooped, err := inbox.NextMsg(100 * time.Millisecond); err == nil {
			t.Fatalf("acme's inbox snooping saw %q", snooped.Data)
		}
	})
}

func TestAuthRefusesBadCredentials(t *testing.T) {
	m := newAuthMesh(t, nil, "acme")
	other := newAuthMesh(t, nil, "acme") // another operator's accounts
	expired := func(uc *jwt.UserClaims) { uc.Expires = time.Now().Add(-time.Minute).Unix() }
	cases := []struct {
		name  string
		creds func() (string, nkeys.KeyPair)
	}{
		{"expired", func() (string, nkeys.KeyPair) { return m.user("acme", expired) }},
		{"wrong operator", func() (string, nkeys.KeyPair) { return other.user("acme", nil) }},
		{"signature by another key", func() (string, nkeys.KeyPair) {
			tok, _ := m.user("acme", nil)
			wrong, _ := nkeys.CreateUser()
			return tok, wrong
		}},
		{"forged issuer_account", func() (string, nkeys.KeyPair) {
			// A user signed by an unknown key that claims acme's account.
			kp, _ := nkeys.CreateUser()
			pub, _ := kp.PublicKey()
			uc := jwt.NewUserClaims(pub)
			uc.IssuerAccount = m.accounts["acme"].pub
			rogue, _ := nkeys.CreateAccount()
			tok, _ := uc.Encode(rogue)
			return tok, kp
		}},
		{"not a JWT", func() (string, nkeys.KeyPair) {
			kp, _ := nkeys.CreateUser()
			return "eyJhbGciOiJub25lIn0.e30.", kp
		}},
	}
	bothAuthServers(t, m, func(t *testing.T, s serverUnderTest) {
		for _, c := range cases {
			tok, kp := c.creds()
			nc, err := nats.Connect(s.url, userOpt(tok, kp), nats.Timeout(3*time.Second))
			if err == nil {
				nc.Close()
				t.Fatalf("%s: connected", c.name)
			}
			if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
				t.Fatalf("%s: %v, want an authorization violation", c.name, err)
			}
		}
		// No credentials at all.
		if nc, err := nats.Connect(s.url, nats.Timeout(3*time.Second)); err == nil {
			nc.Close()
			t.Fatal("connected without credentials")
		}
	})
}

func TestAuthPermissions(t *testing.T) {
	m := newAuthMesh(t, nil, "acme")
	perms := func(uc *jwt.UserClaims) {
		uc.Pub.Allow.Add("orders.>")
		uc.Pub.Deny.Add("orders.secret")
		uc.Sub.Allow.Add("orders.>", "_INBOX.>")
		uc.Sub.Deny.Add("orders.secret")
	}
	bothAuthServers(t, m, func(t *testing.T, s serverUnderTest) {
		errs := make(chan error, 8)
		nc := m.login(t, s.url, "acme", perms, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
		full := m.login(t, s.url, "acme", nil)
		sub, err := nc.SubscribeSync("orders.*")
		if err != nil {
			t.Fatal(err)
		}
		nc.Flush()
		for _, subj := range []string{"orders.secret", "orders.new"} {
			full.Publish(subj, []byte(subj))
		}
		full.Flush()
		if msg, err := sub.NextMsg(2 * time.Second); err != nil || msg.Subject != "orders.new" {
			t.Fatalf("got %v %v, want orders.new (orders.secret is denied)", msg, err)
		}
		nc.Publish("billing.x", nil)
		nc.Flush()
		select {
		case err := <-errs:
			if !strings.Contains(err.Error(), `Permissions Violation for Publish to "billing.x"`) {
				t.Fatalf("error %v", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("no permissions violation for a publish outside the allow list")
		}
		nc.SubscribeSync("billing.>")
		nc.Flush()
		select {
		case err := <-errs:
			if !strings.Contains(err.Error(), `Permissions Violation for Subscription to "billing.>"`) {
				t.Fatalf("error %v", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("no permissions violation for a subscription outside the allow list")
		}
		if !nc.IsConnected() {
			t.Fatal("a permissions violation closed the connection")
		}
	})
}

func TestAuthResponsePermission(t *testing.T) {
	m := newAuthMesh(t, nil, "acme")
	responder := func(uc *jwt.UserClaims) {
		uc.Pub.Allow.Add("nothing")
		uc.Sub.Allow.Add("svc")
		uc.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: time.Minute}
	}
	bothAuthServers(t, m, func(t *testing.T, s serverUnderTest) {
		svc := m.login(t, s.url, "acme", responder)
		cl := m.login(t, s.url, "acme", nil)
		svc.Subscribe("svc", func(msg *nats.Msg) { msg.Respond([]byte("ok")) })
		svc.Flush()
		rep, err := cl.Request("svc", nil, 2*time.Second)
		if err != nil || string(rep.Data) != "ok" {
			t.Fatalf("reply through the response permission: %v %v", rep, err)
		}
	})
}

func TestAuthSystemAccountIsNotATenant(t *testing.T) {
	m := newAuthMesh(t, nil, "acme")
	srv := startBroker(t, func(c *Config) { c.Auth = m.auth() })
	sys := m.login(t, srv.ClientURL(), "", nil)
	a := m.login(t, srv.ClientURL(), "acme", nil)
	sub, _ := sys.SubscribeSync("orders.new")
	sys.Flush()
	a.Publish("orders.new", []byte("acme"))
	a.Flush()
	if msg, err := sub.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("the system account's plain subscription saw a tenant's message %q", msg.Data)
	}
	// The broker's own messages for a tenant go to its space.
	in, _ := a.SubscribeSync("note")
	a.Flush()
	srv.PublishInternal(AccountSubject("acme", []byte("note")), nil, nil, []byte("hi"))
	if msg, err := in.NextMsg(2 * time.Second); err != nil || msg.Subject != "note" || string(msg.Data) != "hi" {
		t.Fatalf("internal publish into acme's space: %v %v", msg, err)
	}
}

func TestAuthReauthorizeClosesRevokedUsers(t *testing.T) {
	m := newAuthMesh(t, nil, "acme")
	srv := startBroker(t, func(c *Config) { c.Auth = m.auth() })
	tok, kp := m.user("acme", nil)
	closed := make(chan struct{})
	errs := make(chan error, 4)
	connect(t, srv.ClientURL(), userOpt(tok, kp), nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(closed) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	keep := m.login(t, srv.ClientURL(), "acme", nil)
	if n := srv.Reauthorize(); n != 0 {
		t.Fatalf("Reauthorize closed %d before any revocation", n)
	}
	pub, _ := kp.PublicKey()
	a := m.accounts["acme"]
	a.ac.Revoke(pub)
	m.sign(a)
	if n := srv.Reauthorize(); n != 1 {
		t.Fatalf("Reauthorize closed %d, want the revoked user's 1", n)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked user's connection stayed open")
	}
	select {
	case err := <-errs:
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("revoked connection was told %v", err)
		}
	default:
		t.Fatal("the revoked connection was not told why")
	}
	if _, err := nats.Connect(srv.ClientURL(), userOpt(tok, kp)); err == nil {
		t.Fatal("a revoked user logged in again")
	}
	if !keep.IsConnected() {
		t.Fatal("another user of the account was closed")
	}
}

func TestAuthExpiryClosesConnection(t *testing.T) {
	m := newAuthMesh(t, nil, "acme")
	srv := startBroker(t, func(c *Config) { c.Auth = m.auth() })
	closed := make(chan struct{})
	m.login(t, srv.ClientURL(), "acme", func(uc *jwt.UserClaims) { uc.Expires = time.Now().Add(2 * time.Second).Unix() },
		nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(closed) }), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection outlived its credentials")
	}
}

func TestAuthMaxSubscriptions(t *testing.T) {
	srv := startBroker(t, func(c *Config) { c.MaxSubscriptions = 3 })
	errs := make(chan error, 4)
	nc := connect(t, srv.ClientURL(), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	for i := range 4 {
		nc.SubscribeSync(fmt.Sprintf("s.%d", i))
	}
	nc.Flush()
	select {
	case err := <-errs:
		if !strings.Contains(strings.ToLower(err.Error()), "maximum subscriptions exceeded") {
			t.Fatalf("error %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a fourth subscription over a limit of 3 was taken")
	}
	if got := srv.Stats().Subscriptions; got != 3 {
		t.Fatalf("%d subscriptions, want 3", got)
	}
}

// BenchmarkJWTAuthenticate is the broker's CPU for one login with a user
// JWT (decode, chain to the operator, revocations, nonce signature).
func BenchmarkJWTAuthenticate(b *testing.B) {
	m := newAuthMesh(b, nil, "acme")
	tok, kp := m.user("acme", nil)
	nonce := newNonce()
	sig, _ := kp.Sign([]byte(nonce))
	ci := ConnectInfo{JWT: tok, Sig: base64.RawURLEncoding.EncodeToString(sig), Nonce: nonce}
	auth := m.auth()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := auth.Authenticate(ci); err != nil {
			b.Fatal(err)
		}
	}
}

// gateAuth accepts until refuse is set; its first call waits for release
// (so a test can run Reauthorize while a login is being checked).
type gateAuth struct {
	entered, release chan struct{}
	refuse           atomic.Bool
	once             sync.Once
}

func (g *gateAuth) Authenticate(ConnectInfo) (Identity, error) {
	refused := g.refuse.Load() // decided before the wait, as a check that read the old state
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	if refused {
		return Identity{}, ErrRevoked
	}
	return Identity{Account: "acme"}, nil
}

// TestAuthLoginAcrossReauthorize: a login being checked while a
// revocation's Reauthorize runs (which cannot see it yet) is checked again
// and refused, rather than left open for good.
func TestAuthLoginAcrossReauthorize(t *testing.T) {
	g := &gateAuth{entered: make(chan struct{}), release: make(chan struct{})}
	srv := startBroker(t, func(c *Config) { c.Auth = g })
	done := make(chan error, 1)
	go func() {
		nc, err := nats.Connect(srv.ClientURL(), nats.Timeout(5*time.Second), nats.NoReconnect())
		if err == nil {
			nc.Close()
		}
		done <- err
	}()
	<-g.entered
	g.refuse.Store(true) // the revocation…
	srv.Reauthorize()    // …and its re-check, which finds no logged-in connection yet
	close(g.release)
	if err := <-done; !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("a login checked across a revocation: %v, want an authorization violation", err)
	}
}
