package e2e

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	natsjwt "github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/stratamesh/strata/admin"
)

// Admin routes and credentials (steps of TestTenantIsolation).

// adminRoutes: with alpha's tenant-admin token, in both regions, every
// admin route on bravo's tenant, namespaces, users, topics, subscriptions
// and bundles — and every superuser route — answers 403 forbidden; the
// lists show alpha's own only; bravo's tokens cannot be made, listed or
// revoked.
func (s *isoSuite) adminRoutes(t *testing.T) {
	tok := s.tokens[attacker].Secret
	topic := "/admin/v1/topics/" + victim + "/ns/orders"
	stream := "/admin/v1/topics/" + victim + "/streams/ORDERS"
	forbidden := []struct{ method, path, body string }{
		{http.MethodGet, "/admin/v1/tenants/" + victim, ""},
		{http.MethodPut, "/admin/v1/tenants/" + victim, `{"admins":["alice"]}`},
		{http.MethodDelete, "/admin/v1/tenants/" + victim + "?force=true", ""},
		{http.MethodPut, "/admin/v1/tenants/charlie", `{}`},
		{http.MethodGet, "/admin/v1/namespaces/" + victim, ""},
		{http.MethodGet, "/admin/v1/namespaces/" + victim + "/ns", ""},
		{http.MethodPut, "/admin/v1/namespaces/" + victim + "/ns", `{"policies":{"retention":{"time":"1m"}}}`},
		{http.MethodPut, "/admin/v1/namespaces/" + victim + "/spy", `{}`},
		{http.MethodDelete, "/admin/v1/namespaces/" + victim + "/ns?force=true", ""},
		{http.MethodGet, "/admin/v1/namespaces/" + victim + "/ns/policies", ""},
		{http.MethodPatch, "/admin/v1/namespaces/" + victim + "/ns/policies", `{"replication":["r1"]}`},
		{http.MethodGet, "/admin/v1/tenants/" + victim + "/users", ""},
		{http.MethodPost, "/admin/v1/tenants/" + victim + "/users", `{"name":"spy"}`},
		{http.MethodDelete, "/admin/v1/tenants/" + victim + "/users/bob", ""},
		{http.MethodGet, "/admin/v1/topics/" + victim, ""},
		{http.MethodGet, "/admin/v1/topics/" + victim + "/ns", ""},
		{http.MethodGet, topic, ""},
		{http.MethodGet, topic + "/stats", ""},
		{http.MethodPut, "/admin/v1/topics/" + victim + "/ns/spy", `{}`},
		{http.MethodDelete, topic, ""},
		{http.MethodGet, stream + "/subscriptions", ""},
		{http.MethodGet, stream + "/subscriptions/billing", ""},
		{http.MethodPut, stream + "/subscriptions/spy", `{}`},
		{http.MethodDelete, stream + "/subscriptions/billing", ""},
		{http.MethodGet, topic + "/offload", ""},
		{http.MethodPost, topic + "/offload", `{}`},
		{http.MethodGet, "/admin/v1/bundles/" + victim, ""},
		{http.MethodGet, "/admin/v1/bundles/" + victim + "/ns", ""},
		{http.MethodPost, "/admin/v1/bundles/" + victim + "/ns/0x00000000_0xffffffff/unload", ""},
		// The superuser's: ledgers (bravo's entries), members, replication.
		{http.MethodGet, "/admin/v1/ledgers", ""},
		{http.MethodGet, "/admin/v1/ledgers/1", ""},
		{http.MethodGet, "/admin/v1/ledgers/1/entries", ""},
		{http.MethodGet, "/admin/v1/members", ""},
		{http.MethodGet, "/admin/v1/replication", ""},
		{http.MethodGet, "/admin/v1/bookies", ""},
		{http.MethodGet, "/admin/v1/tier", ""},
		{http.MethodPost, "/admin/v1/tokens", `{"tenant":"` + victim + `"}`},
		{http.MethodDelete, "/admin/v1/tokens/" + s.tokens[victim].ID, ""},
	}
	for _, r := range s.regions {
		for _, c := range forbidden {
			code, body := s.c.adminCall(t, r, c.method, c.path, tok, c.body)
			var eb admin.ErrorBody
			if code != http.StatusForbidden || json.Unmarshal(body, &eb) != nil || eb.Error.Code != admin.CodeForbidden {
				t.Fatalf("%s: %s %s with alpha's token: %d %s, want 403 forbidden", r, c.method, c.path, code, body)
			}
		}
		// The lists show alpha's own.
		var tenants admin.TenantList
		s.adminJSON(t, r, "/admin/v1/tenants", tok, &tenants)
		if len(tenants.Tenants) != 1 || tenants.Tenants[0].Name != attacker {
			t.Fatalf("%s: alpha lists tenants %+v", r, tenants.Tenants)
		}
		var topics admin.TopicList
		s.adminJSON(t, r, "/admin/v1/topics", tok, &topics)
		for _, tp := range topics.Topics {
			if tp.Tenant != attacker {
				t.Fatalf("%s: alpha's topic list has %s/%s/%s", r, tp.Tenant, tp.Namespace, tp.Topic)
			}
		}
		var toks admin.TokenList
		s.adminJSON(t, r, "/admin/v1/tokens", tok, &toks)
		for _, tk := range toks.Tokens {
			if tk.Tenant != attacker {
				t.Fatalf("%s: alpha's token list has %+v", r, tk)
			}
		}
		var bundles json.RawMessage
		s.adminJSON(t, r, "/admin/v1/bundles", tok, &bundles)
		if strings.Contains(string(bundles), `"`+victim+`"`) || strings.Contains(string(bundles), victim+"/") {
			t.Fatalf("%s: alpha's bundle list names bravo: %s", r, bundles)
		}
	}
	// The CLI says so too.
	out, errOut, code := strata(t, "admin", "tenants", "users", "revoke", victim, "bob", "--url", s.c.regions["r1"].brokers["b1"].report.Admin, "--token", tok)
	if code == 0 || !strings.Contains(strings.ToLower(out+errOut), "forbidden") {
		t.Fatalf("alpha's admin revokes bravo's user through the CLI: %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("the CLI, revoking bravo's user with alpha's token: %s", strings.TrimSpace(errOut))
}

// adminJSON GETs path in region with token, wants 200 and decodes v.
func (s *isoSuite) adminJSON(t *testing.T, region, path, token string, v any) {
	t.Helper()
	if err := json.Unmarshal(s.c.mustAdmin(t, region, http.MethodGet, path, token, "", http.StatusOK), v); err != nil {
		t.Fatal(err)
	}
}

// expectAuthRefused connects with opts to b1 of every region and fails
// unless each refuses with an authorization violation.
func (s *isoSuite) expectAuthRefused(t *testing.T, what string, opts ...nats.Option) {
	t.Helper()
	for _, r := range s.regions {
		s.expectAuthRefusedAt(t, r, "b1", what, opts...)
	}
}

// expectAuthRefusedAt is expectAuthRefused at one broker.
func (s *isoSuite) expectAuthRefusedAt(t *testing.T, region, broker, what string, opts ...nats.Option) {
	t.Helper()
	nc, err := nats.Connect(s.c.regions[region].brokers[broker].report.NATS, append([]nats.Option{nats.NoReconnect(), nats.Timeout(5 * time.Second)}, opts...)...)
	if err == nil {
		nc.Close()
		t.Fatalf("%s/%s: %s connected", region, broker, what)
	}
	if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("%s/%s: %s refused with %v, want an authorization violation", region, broker, what, err)
	}
}

// expectRevokedAt: user, revoked, whose live connection at broker of
// region was closed, is refused there with an authorization violation
// within 30 s, and no connection it gets meanwhile lasts. (Right after a
// broker closes a revoked user's connections it can accept the user once
// more for some milliseconds, then closes that connection too: seen in
// about one closure in eight, reported on issue 24.)
func (s *isoSuite) expectRevokedAt(t *testing.T, region, broker, user string) {
	t.Helper()
	url := s.c.regions[region].brokers[broker].report.NATS
	deadline := time.Now().Add(30 * time.Second)
	for {
		closed := make(chan struct{})
		nc, err := nats.Connect(url, nats.UserCredentials(s.creds[user]), nats.NoReconnect(), nats.Timeout(5*time.Second), quietErrors,
			nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
		if err != nil {
			if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
				t.Fatalf("%s/%s: %s, revoked, refused with %v, want an authorization violation", region, broker, user, err)
			}
			return
		}
		t.Logf("%s/%s: %s, revoked, logged in again after her connection there was closed", region, broker, user)
		select {
		case <-closed:
		case <-time.After(30 * time.Second):
			nc.Close()
			t.Fatalf("%s/%s: %s, revoked, holds a connection 30 s after logging in again", region, broker, user)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s: %s, revoked, still logs in 30 s after her connection there was closed", region, broker, user)
		}
	}
}

// userJWT is a nats.Option logging in with token, signing the nonce with kp.
func userJWT(token string, kp nkeys.KeyPair) nats.Option {
	return nats.UserJWT(func() (string, error) { return token, nil }, kp.Sign)
}

// badCredentials: expired, revoked and forged credentials are refused
// in both regions with an authorization violation.
func (s *isoSuite) badCredentials(t *testing.T) {
	aliceJWT, aliceKP := readCreds(t, s.creds["alice"])
	uc, err := natsjwt.DecodeUserClaims(aliceJWT)
	if err != nil {
		t.Fatal(err)
	}
	alphaAcct := uc.Issuer

	// Expired: eve's live connection is closed, and she cannot log in.
	select {
	case <-s.eveClosed:
	case <-time.After(time.Until(s.eveExpiry) + 30*time.Second):
		t.Fatalf("eve's connection is open 30 s after her credentials expired (%v)", s.eveExpiry)
	}
	t.Logf("eve's connection closed at her expiry (%v): %v", s.eveExpiry.Format(time.TimeOnly), s.eveConn.LastError())
	s.expectAuthRefused(t, "eve, expired", nats.UserCredentials(s.creds["eve"]))

	// Revoked by alpha's own admin: mallory's live connection on each
	// broker of both regions closes once that broker has the revocation;
	// then that broker refuses her (see expectRevokedAt for the window in
	// which it may still accept her once).
	closed := map[string]chan struct{}{}
	for _, r := range s.regions {
		for _, b := range []string{"b1", "b2"} {
			ch := make(chan struct{})
			closed[r+"/"+b] = ch
			nc, err := nats.Connect(s.c.regions[r].brokers[b].report.NATS, nats.UserCredentials(s.creds["mallory"]), nats.NoReconnect(),
				nats.Timeout(5*time.Second), nats.ClosedHandler(func(*nats.Conn) { close(ch) }), quietErrors)
			if err != nil {
				t.Fatalf("%s/%s: mallory before the revocation: %v", r, b, err)
			}
			defer nc.Close()
		}
	}
	revoked := time.Now()
	if out, errOut, code := strata(t, "admin", "tenants", "users", "revoke", attacker, "mallory", "--url",
		s.c.regions["r2"].brokers["b1"].report.Admin, "--token", s.tokens[attacker].Secret); code != 0 {
		t.Fatalf("alpha's admin revokes mallory: %d\n%s\n%s", code, out, errOut)
	}
	for _, r := range s.regions {
		for _, b := range []string{"b1", "b2"} {
			select {
			case <-closed[r+"/"+b]:
				t.Logf("%s/%s: mallory's connection closed %v after the revocation", r, b, time.Since(revoked).Round(time.Millisecond))
			case <-time.After(30 * time.Second):
				t.Fatalf("%s/%s: mallory's connection is open 30 s after the revocation", r, b)
			}
			s.expectRevokedAt(t, r, b, "mallory")
		}
	}

	// alice's JWT with another key's signature of the nonce.
	other, _ := nkeys.CreateUser()
	s.expectAuthRefused(t, "alice's JWT, nonce signed by another key", userJWT(aliceJWT, other))
	// alice's JWT with a payload changed (more permissions), the
	// signature kept.
	s.expectAuthRefused(t, "alice's JWT, tampered", userJWT(tamper(t, aliceJWT), aliceKP))
	// A user JWT signed by a key of its own that claims to be alpha's
	// account, or one of its signing keys.
	fake, _ := nkeys.CreateAccount()
	mine, _ := nkeys.CreateUser()
	minePub, _ := mine.PublicKey()
	forged := natsjwt.NewUserClaims(minePub)
	forged.IssuerAccount = alphaAcct
	tok, err := forged.Encode(fake)
	if err != nil {
		t.Fatal(err)
	}
	s.expectAuthRefused(t, "a user signed by a key that is not alpha's, claiming alpha's account", userJWT(tok, mine))
	// A user of an account named alpha under another operator (its
	// account JWT, which the mesh has never seen, cannot be presented:
	// brokers resolve accounts from the region's store only).
	op, _ := nkeys.CreateOperator()
	ac := natsjwt.NewAccountClaims(credsPub(fake))
	ac.Name = attacker
	if _, err := ac.Encode(op); err != nil {
		t.Fatal(err)
	}
	for _, bearer := range []bool{false, true} {
		u := natsjwt.NewUserClaims(minePub)
		u.BearerToken = bearer
		tok, err := u.Encode(fake)
		if err != nil {
			t.Fatal(err)
		}
		s.expectAuthRefused(t, fmt.Sprintf("a user of account alpha of another operator (bearer %v)", bearer), userJWT(tok, mine))
	}
	// No credentials, or a token or user/password where a JWT is expected.
	s.expectAuthRefused(t, "no credentials")
	s.expectAuthRefused(t, "a token", nats.Token(s.tokens[victim].Secret))
	s.expectAuthRefused(t, "user and password", nats.UserInfo("bob", "bob"))
	// bravo's user, unaffected, still works.
	if err := s.bob1["r2"].Flush(); err != nil {
		t.Fatalf("bob's connection after the attempts: %v", err)
	}
}

// readCreds reads a .creds file's JWT and key.
func readCreds(t *testing.T, file string) (string, nkeys.KeyPair) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	token, err := natsjwt.ParseDecoratedJWT(b)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := natsjwt.ParseDecoratedUserNKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return token, kp
}

// tamper is token with its payload changed (every publish allowed, a
// later expiry) and its signature kept.
func tamper(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("a JWT of %d parts", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	claims["name"] = "alice-admin"
	claims["exp"] = time.Now().Add(100 * 24 * time.Hour).Unix()
	raw, err = json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString(raw)
	return strings.Join(parts, ".")
}

func credsPub(kp nkeys.KeyPair) string {
	pub, _ := kp.PublicKey()
	return pub
}
