package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fakeAuth knows four tokens: the superuser's, admins of t1 and t2, and a
// token of no tenant (an Authenticator bug the middleware refuses).
type fakeAuth struct{}

func (fakeAuth) Authenticate(_ context.Context, token string) (Principal, error) {
	switch token {
	case "super":
		return Principal{Superuser: true}, nil
	case "t1-admin":
		return Principal{Tenant: "t1"}, nil
	case "t2-admin":
		return Principal{Tenant: "t2"}, nil
	case "nobody":
		return Principal{}, nil
	case "loading":
		return Principal{}, Errorf(CodeNotReady, "", "the token store is loading")
	}
	return Principal{}, errors.New("unknown token")
}

// serve runs one request through routes mounted with auth.
func serve(t *testing.T, routes []Route, auth Authenticator, method, path, token, body string) *httptest.ResponseRecorder {
	t.Helper()
	mux := http.NewServeMux()
	Mount(mux, routes, auth)
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	return w
}

// checkShape fails unless an error answer is in the error shape with a
// catalog code answered with its own status.
func checkShape(t *testing.T, what string, w *httptest.ResponseRecorder) *Error {
	t.Helper()
	if w.Code < 400 {
		return nil
	}
	var eb ErrorBody
	if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil {
		t.Errorf("%s: %d answer not in the error shape: %v\n%s", what, w.Code, err, w.Body)
		return nil
	}
	info, ok := Lookup(eb.Error.Code)
	if !ok || info.Status != w.Code || eb.Error.Message == "" {
		t.Errorf("%s: error %+v with status %d: not a catalog code with its status", what, eb.Error, w.Code)
	}
	return &eb.Error
}

// TestRoutePolicies walks the route table: every route has a policy,
// and with auth on each answers no token, a bad token, another tenant's
// admin, its tenant's admin and the superuser as its policy says.
func TestRoutePolicies(t *testing.T) {
	if Policy(0).Valid() {
		t.Fatal("the zero Policy is valid: a route could forget to choose one")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Authorize accepted a route without a policy")
			}
		}()
		Authorize(Route{Method: http.MethodGet, Pattern: "/x", Handler: func(http.ResponseWriter, *http.Request) {}}, nil)
	}()

	f := &fake{}
	routes := Routes(f.backends())
	seen := map[string]bool{}
	for _, r := range routes {
		if !r.Policy.Valid() {
			t.Errorf("route %s has no valid policy (%v)", r, r.Policy)
		}
		if r.Handler == nil {
			t.Errorf("route %s has no handler", r)
		}
		if seen[r.String()] {
			t.Errorf("route %s twice", r)
		}
		seen[r.String()] = true
		if r.Policy == TenantAdmin && !strings.Contains(r.Pattern, "{t}") {
			t.Errorf("route %s is tenant-admin but has no {t}", r)
		}
	}

	const (
		allowed = iota
		unauthorized
		forbidden
	)
	want := func(route string, p Policy, token string) int {
		switch {
		case p == Public:
			return allowed
		case token == "" || token == "bogus":
			return unauthorized
		case token == "super":
			return allowed
		case token == "nobody":
			return forbidden
		case p == Superuser:
			return forbidden
		case p == TenantAdmin && token == "t2-admin":
			return forbidden
		case route == "DELETE /admin/v1/tokens/{id}" && token == "t2-admin":
			return forbidden // token 7 is t1's: a token's tenant confines its revocation
		}
		return allowed
	}
	for _, r := range routes {
		for _, token := range []string{"", "bogus", "nobody", "t2-admin", "t1-admin", "super"} {
			what := r.String() + " with token " + token
			w := serve(t, routes, fakeAuth{}, r.Method, targetFor(r), token, validBody(r))
			e := checkShape(t, what, w)
			switch want(r.String(), r.Policy, token) {
			case allowed:
				if w.Code == 401 || w.Code == 403 || w.Code >= 400 {
					t.Errorf("%s (%v): %d %s, want an answer", what, r.Policy, w.Code, w.Body)
				}
			case unauthorized:
				if w.Code != 401 || e == nil || e.Code != CodeUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
					t.Errorf("%s (%v): %d %s, want 401 unauthorized with WWW-Authenticate", what, r.Policy, w.Code, w.Body)
				}
			case forbidden:
				if w.Code != 403 || e == nil || e.Code != CodeForbidden {
					t.Errorf("%s (%v): %d %s, want 403 forbidden", what, r.Policy, w.Code, w.Body)
				}
			}
		}
		// Auth off: everything answers.
		if w := serve(t, routes, nil, r.Method, targetFor(r), "", validBody(r)); w.Code >= 400 {
			t.Errorf("%s with auth off: %d %s", r, w.Code, w.Body)
		}
		// An Authenticator's own API error is answered as is.
		if r.Policy != Public {
			if w := serve(t, routes, fakeAuth{}, r.Method, targetFor(r), "loading", validBody(r)); w.Code != 503 {
				t.Errorf("%s while the token store loads: %d, want 503", r, w.Code)
			}
		}
	}
	// Malformed Authorization headers are no token.
	for _, h := range []string{"super", "Basic c3VwZXI=", "Bearer", "Bearer ", "Bearersuper"} {
		mux := http.NewServeMux()
		Mount(mux, routes, fakeAuth{})
		req := httptest.NewRequest(http.MethodGet, "/admin/v1/bookies", nil)
		req.Header.Set("Authorization", h)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		if w.Code != 401 {
			t.Errorf("Authorization %q: %d, want 401", h, w.Code)
		}
	}
}

// TestListScope: the list routes across tenants show a tenant admin its
// own tenant's objects only, and everyone's to the superuser or with auth
// off.
func TestListScope(t *testing.T) {
	f := &fake{}
	routes := Routes(f.backends())
	for token, want := range map[string]string{"t2-admin": "t2", "super": ""} {
		serve(t, routes, fakeAuth{}, http.MethodGet, "/admin/v1/topics", token, "")
		if f.lastTenant != want {
			t.Errorf("GET /admin/v1/topics as %s listed tenant %q, want %q", token, f.lastTenant, want)
		}
	}
	serve(t, routes, nil, http.MethodGet, "/admin/v1/topics", "", "")
	if f.lastTenant != "" {
		t.Errorf("GET /admin/v1/topics with auth off listed tenant %q, want all", f.lastTenant)
	}
	for token, want := range map[string]int{"t2-admin": 1, "t1-admin": 1, "super": 2} {
		w := serve(t, routes, fakeAuth{}, http.MethodGet, "/admin/v1/bundles", token, "")
		var l BundleList
		if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil || len(l.Bundles) != want {
			t.Errorf("GET /admin/v1/bundles as %s: %d bundles (%v), want %d\n%s", token, len(l.Bundles), err, want, w.Body)
		}
	}
}

// TestRouteAnswers: the answers carry the backend's values, the region,
// and what the request asked.
func TestRouteAnswers(t *testing.T) {
	f := &fake{}
	routes := Routes(f.backends())
	w := serve(t, routes, nil, http.MethodGet, "/admin/v1/ledgers/7", "", "")
	var l LedgerView
	if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil || l.Region != "r1" || l.LAC == nil || *l.LAC != 3 {
		t.Errorf("GET ledger 7: %d %s", w.Code, w.Body)
	}
	w = serve(t, routes, nil, http.MethodGet, "/admin/v1/ledgers/8", "", "")
	if e := checkShape(t, "ledger 8", w); e == nil || e.Code != CodeNoSuchLedger || e.Field != "id" {
		t.Errorf("GET ledger 8: %d %s, want no_such_ledger", w.Code, w.Body)
	}
	w = serve(t, routes, nil, http.MethodGet, "/admin/v1/topics/t1/ns1/tp/subscriptions/s9", "", "")
	if e := checkShape(t, "sub s9", w); e == nil || e.Code != CodeSubscriptionNotFound || e.Field != "sub" {
		t.Errorf("GET sub s9: %d %s", w.Code, w.Body)
	}
	w = serve(t, routes, nil, http.MethodPost, "/admin/v1/topics/t1/ns1/tp/offload", "", `{"keep_bytes": 1024}`)
	var oa OffloadAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &oa); err != nil || w.Code != 202 || oa.Topic != "t1/ns1/tp" || oa.Tier.Kind != "fs" || f.lastKeep != 1024 {
		t.Errorf("POST offload: %d %s (keep %d)", w.Code, w.Body, f.lastKeep)
	}
	w = serve(t, routes, nil, http.MethodPost, "/admin/v1/bundles/t1/ns1/0x00000000_0xffffffff/unload", "", `{"to":"b2"}`)
	var op OperationAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &op); err != nil || w.Code != 202 || op.Region != "r1" || op.Operation.Target != "t1/ns1/0x00000000_0xffffffff" || f.lastTo != "b2" {
		t.Errorf("POST unload: %d %s", w.Code, w.Body)
	}
	w = serve(t, routes, nil, http.MethodPut, "/admin/v1/topics/t1/ns1/tp/subscriptions/s1", "", `{"replicated":true,"filter_subject":"t1.ns1.tp"}`)
	var sl SubscriptionList
	if err := json.Unmarshal(w.Body.Bytes(), &sl); err != nil || w.Code != 200 || len(sl.Subscriptions) != 1 || !f.lastSub.Replicated {
		t.Errorf("PUT subscription: %d %s", w.Code, w.Body)
	}
	w = serve(t, routes, nil, http.MethodGet, "/admin/v1/ledgers/7/entries?from=2", "", "")
	var ev EntriesView
	if err := json.Unmarshal(w.Body.Bytes(), &ev); err != nil || ev.From != 2 || ev.To != 3 || ev.Entries == nil {
		t.Errorf("GET entries: %d %s", w.Code, w.Body)
	}
}
