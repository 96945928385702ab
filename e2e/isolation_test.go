package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/admin"
)

// The isolation suite (issue 24): on a 2-region mesh with admin
// authorization and auth.nats, tenant alpha (the attacker) tries every
// way to touch tenant bravo (the victim). Each attempt must be refused
// with a clear error, and bravo's data — its streams, messages,
// consumers, namespaces, users, tokens and topics, in both regions — must
// be as it was afterwards. One mesh serves every case (subtests, run in
// order: later ones rely on the data the first ones made).

const (
	attacker = "alpha"
	victim   = "bravo"
)

// isoSuite is the mesh and the tenants' handles.
type isoSuite struct {
	c       *geoCluster
	regions []string
	dir     string
	// tokens are the tenant-admin tokens, by tenant.
	tokens map[string]admin.TokenCreated
	// creds are the users' .creds files, by user name (alice, eve,
	// mallory and spy are alpha's; bob is bravo's; superuser is the system
	// account's).
	creds map[string]string
	// By region: alice on broker b1; bob on b1 (witness, JetStream,
	// requests) and on b2 (publisher, responder).
	alice, bob1, bob2 map[string]*isoConn
	// eve's credentials expire a few seconds after setup; eveConn is her
	// connection in r1, eveClosed closed when it is.
	eveConn   *nats.Conn
	eveClosed chan struct{}
	eveExpiry time.Time
	// billingReply is the ack subject of the message bravo's consumer
	// billing delivered and bravo left unacknowledged.
	billingReply string
	// before is bravo's state by region, taken once its data is made.
	before map[string]string
}

// quietErrors keeps a connection's expected asynchronous errors (its
// credentials expired or were revoked) off the test's output.
var quietErrors = nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})

// isoConn is a NATS connection and the asynchronous errors it was told
// (-ERR 'Permissions Violation …').
type isoConn struct {
	*nats.Conn
	user string
	errs chan error
}

// TestTenantIsolation runs the isolation suite's steps in order on one
// mesh; after each step that does not make bravo's data, bravo's state in
// both regions must be what it was.
func TestTenantIsolation(t *testing.T) {
	began := time.Now()
	s := newIsoSuite(t)
	t.Logf("mesh, tenants and users ready in %v", time.Since(began).Round(time.Millisecond))
	steps := []struct {
		name string
		run  func(*testing.T)
		// changesVictim: the step makes bravo's data, so bravo's state is
		// taken after it rather than checked.
		changesVictim bool
	}{
		{"subscriptions of alpha see nothing of bravo's traffic", s.snoop, true},
		{"two tenants each have a stream ORDERS", s.sideBySide, true},
		{"publish into bravo's subjects", s.publishInto, false},
		{"request-reply across tenants", s.requestAcross, false},
		{"internal subjects and acting as a replicator", s.internalSubjects, false},
		{"JetStream API on bravo's streams and consumers", s.jetStreamAPI, false},
		{"alpha's wildcard streams never take bravo's messages", s.wildcardCapture, true},
		{"admin routes with alpha's tenant-admin token", s.adminRoutes, false},
		{"expired revoked and forged credentials", s.badCredentials, false},
		{"unmodified nats CLI with creds", s.natsCLI, false},
	}
	for _, st := range steps {
		stepBegan := time.Now()
		ok := t.Run(st.name, func(t *testing.T) {
			st.run(t)
			if !st.changesVictim {
				s.assertVictimUnchanged(t)
			}
		})
		t.Logf("%s: %v", st.name, time.Since(stepBegan).Round(time.Millisecond))
		if !ok {
			t.FailNow() // later steps build on this one's data
		}
		if st.changesVictim {
			s.before = s.victimStates(t)
			for _, r := range s.regions {
				t.Logf("%s: bravo's data:\n%s", r, s.before[r])
			}
		}
	}
	t.Logf("isolation suite: %v", time.Since(began).Round(time.Millisecond))
}

// newIsoSuite starts the mesh, makes both tenants (a namespace ns for
// topics and the JetStream default namespace streams), a tenant-admin
// token each and the users, and connects them.
func newIsoSuite(t *testing.T) *isoSuite {
	t.Helper()
	regions := []string{"r1", "r2"}
	topo, sysCreds := natsAuthMesh(t, "isolation", regions)
	s := &isoSuite{c: startGeoCluster(t, topo, regions), regions: regions, dir: t.TempDir(),
		tokens: map[string]admin.TokenCreated{}, creds: map[string]string{},
		alice: map[string]*isoConn{}, bob1: map[string]*isoConn{}, bob2: map[string]*isoConn{}}
	for _, tenant := range []string{attacker, victim} {
		s.c.mustAdmin(t, "r1", http.MethodPut, "/admin/v1/tenants/"+tenant, superToken, `{}`, http.StatusCreated)
		var tok admin.TokenCreated
		body := fmt.Sprintf(`{"tenant": %q, "description": "isolation e2e"}`, tenant)
		if err := json.Unmarshal(s.c.mustAdmin(t, "r1", http.MethodPost, "/admin/v1/tokens", superToken, body, http.StatusCreated), &tok); err != nil {
			t.Fatal(err)
		}
		s.tokens[tenant] = tok
		// Made by the tenant's own admin, once its token is known.
		for i, ns := range []string{"ns", "streams"} {
			path := "/admin/v1/namespaces/" + tenant + "/" + ns
			if i == 0 {
				waitFor(t, tenant+"'s token makes a namespace", 30*time.Second, func() bool {
					code, _ := s.c.adminCall(t, "r1", http.MethodPut, path, tok.Secret, `{}`)
					return code == http.StatusCreated || code == http.StatusOK
				})
				continue
			}
			s.c.mustAdmin(t, "r1", http.MethodPut, path, tok.Secret, `{}`, http.StatusCreated)
		}
	}
	// alice through the CLI in r1 with alpha's token; bob through the
	// admin API in r2 with bravo's (once both have reached r2).
	s.creds["alice"] = s.addUserCLI(t, "r1", attacker, "alice", "1h")
	s.creds["mallory"] = s.addUserCLI(t, "r1", attacker, "mallory", "1h")
	// spy's user JWT allows bravo's and the mesh's subjects outright.
	s.creds["spy"] = s.addUserCLI(t, "r1", attacker, "spy", "1h", "--pub", victim+".>", "--pub", "$STRATA.>", "--pub", "$SR.>", "--pub", attacker+".>")
	waitFor(t, "bravo's token and tenant reach r2", 30*time.Second, func() bool {
		code, _ := s.c.adminCall(t, "r2", http.MethodGet, "/admin/v1/tenants/"+victim+"/users", s.tokens[victim].Secret, "")
		return code == http.StatusOK
	})
	s.creds["bob"] = s.addUserAPI(t, "r2", victim, "bob")
	s.creds["superuser"] = sysCreds
	for _, r := range regions {
		s.alice[r] = s.connect(t, r, "b1", "alice")
		s.bob1[r] = s.connect(t, r, "b1", "bob")
		s.bob2[r] = s.connect(t, r, "b2", "bob")
	}
	// eve expires a few seconds from now: connected at once in r1, her
	// connection must be closed when her credentials expire.
	s.creds["eve"] = s.addUserCLI(t, "r1", attacker, "eve", "8s")
	s.eveExpiry = time.Now().Add(8 * time.Second)
	s.eveClosed = make(chan struct{})
	var err error
	s.eveConn, err = nats.Connect(s.c.regions["r1"].brokers["b1"].report.NATS, nats.UserCredentials(s.creds["eve"]),
		nats.NoReconnect(), nats.Timeout(2*time.Second), nats.ClosedHandler(func(*nats.Conn) { close(s.eveClosed) }), quietErrors)
	if err != nil {
		t.Fatalf("eve, before her credentials expire: %v", err)
	}
	t.Cleanup(s.eveConn.Close)
	return s
}

// addUserCLI runs `strata admin tenants users add` in region with the
// tenant's admin token and returns the .creds file.
func (s *isoSuite) addUserCLI(t *testing.T, region, tenant, user, expiry string, flags ...string) string {
	t.Helper()
	file := filepath.Join(s.dir, tenant+"-"+user+".creds")
	out, errOut, code := strata(t, append([]string{"admin", "tenants", "users", "add", tenant, user, "--url", s.c.regions[region].brokers["b1"].report.Admin,
		"--token", s.tokens[tenant].Secret, "--expiry", expiry, "-o", file}, flags...)...)
	if code != 0 {
		t.Fatalf("users add %s %s: %d\n%s\n%s", tenant, user, code, out, errOut)
	}
	return file
}

// addUserAPI makes a user through POST /admin/v1/tenants/{t}/users in
// region with the tenant's admin token and writes its .creds file.
func (s *isoSuite) addUserAPI(t *testing.T, region, tenant, user string) string {
	t.Helper()
	var u admin.UserCreated
	body := s.c.mustAdmin(t, region, http.MethodPost, "/admin/v1/tenants/"+tenant+"/users", s.tokens[tenant].Secret,
		fmt.Sprintf(`{"name": %q}`, user), http.StatusCreated)
	if err := json.Unmarshal(body, &u); err != nil || u.Creds == "" {
		t.Fatalf("users add through the API: %v %s", err, body)
	}
	file := filepath.Join(s.dir, tenant+"-"+user+".creds")
	if err := os.WriteFile(file, []byte(u.Creds), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// connect logs user in to one broker of region (retrying while the
// user's account is on its way there).
func (s *isoSuite) connect(t *testing.T, region, broker, user string) *isoConn {
	t.Helper()
	ic := &isoConn{user: user, errs: make(chan error, 64)}
	url := s.c.regions[region].brokers[broker].report.NATS
	waitFor(t, user+" logs in to "+region+"/"+broker, 30*time.Second, func() bool {
		nc, err := nats.Connect(url, nats.UserCredentials(s.creds[user]), nats.Timeout(2*time.Second), nats.NoReconnect(),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				select {
				case ic.errs <- err:
				default:
				}
			}))
		ic.Conn = nc
		return err == nil
	})
	t.Cleanup(ic.Close)
	return ic
}

func (ic *isoConn) js(t *testing.T) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(ic.Conn)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// victimStates is bravo's state in each region.
func (s *isoSuite) victimStates(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range s.regions {
		out[r] = s.victimState(t, r)
	}
	return out
}

// assertVictimUnchanged fails unless bravo's state in each region is
// what it was before the attempts.
func (s *isoSuite) assertVictimUnchanged(t *testing.T) {
	t.Helper()
	for _, r := range s.regions {
		if now := s.victimState(t, r); now != s.before[r] {
			t.Errorf("%s: bravo's data changed\nbefore:\n%s\nafter:\n%s", r, s.before[r], now)
		}
	}
}

// victimState describes what bravo has in region, as bravo's own user
// and the superuser see it: every stream (messages, sequences,
// subjects), every consumer's progress, and the tenant's namespaces,
// policies, users, admin tokens and topics.
func (s *isoSuite) victimState(t *testing.T, region string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	js := s.bob1[region].js(t)
	var names []string
	lister := js.StreamNames(ctx)
	for n := range lister.Name() {
		names = append(names, n)
	}
	if err := lister.Err(); err != nil {
		t.Fatalf("%s: bravo's stream names: %v", region, err)
	}
	sort.Strings(names)
	for _, n := range names {
		st, err := js.Stream(ctx, n)
		if err != nil {
			t.Fatalf("%s: bravo's stream %s: %v", region, n, err)
		}
		info := st.CachedInfo()
		fmt.Fprintf(&b, "stream %s: msgs=%d bytes=%d first=%d last=%d subjects=%v\n", n, info.State.Msgs, info.State.Bytes,
			info.State.FirstSeq, info.State.LastSeq, info.Config.Subjects)
		var cons []string
		cl := st.ConsumerNames(ctx)
		for c := range cl.Name() {
			cons = append(cons, c)
		}
		if err := cl.Err(); err != nil {
			t.Fatalf("%s: bravo's consumers of %s: %v", region, n, err)
		}
		sort.Strings(cons)
		for _, cn := range cons {
			c, err := st.Consumer(ctx, cn)
			if err != nil {
				t.Fatalf("%s: bravo's consumer %s/%s: %v", region, n, cn, err)
			}
			ci := c.CachedInfo()
			fmt.Fprintf(&b, "  consumer %s: pending=%d ack_pending=%d delivered=%d ack_floor=%d redelivered=%d\n", cn,
				ci.NumPending, ci.NumAckPending, ci.Delivered.Stream, ci.AckFloor.Stream, ci.NumRedelivered)
		}
	}
	get := func(path string) []byte {
		var c bytes.Buffer
		if err := json.Compact(&c, s.c.mustAdmin(t, region, http.MethodGet, path, superToken, "", http.StatusOK)); err != nil {
			t.Fatalf("%s: GET %s: %v", region, path, err)
		}
		return c.Bytes()
	}
	fmt.Fprintf(&b, "tenant: %s\nnamespaces: %s\n", get("/admin/v1/tenants/"+victim), get("/admin/v1/namespaces/"+victim))
	for _, ns := range []string{"ns", "streams"} {
		fmt.Fprintf(&b, "policies %s: %s\n", ns, get("/admin/v1/namespaces/"+victim+"/"+ns+"/policies"))
	}
	fmt.Fprintf(&b, "users: %s\n", get("/admin/v1/tenants/"+victim+"/users"))
	var toks admin.TokenList
	if err := json.Unmarshal(get("/admin/v1/tokens"), &toks); err != nil {
		t.Fatal(err)
	}
	for _, tok := range toks.Tokens {
		if tok.Tenant == victim {
			fmt.Fprintf(&b, "token %s\n", tok.ID)
		}
	}
	var topics admin.TopicList
	if err := json.Unmarshal(get("/admin/v1/topics/"+victim), &topics); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(topics.Topics, func(x, y admin.TopicSummary) int {
		return strings.Compare(x.Namespace+"/"+x.Topic, y.Namespace+"/"+y.Topic)
	})
	for _, tp := range topics.Topics {
		// (the owner moves with load shedding: not bravo's data)
		fmt.Fprintf(&b, "topic %s/%s/%s stream %s subjects %v\n", tp.Tenant, tp.Namespace, tp.Topic, tp.Stream, tp.Subjects)
	}
	return b.String()
}
