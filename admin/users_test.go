package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestUserRoutesConfined: a tenant-admin token of t1 lists, adds and
// revokes t1's users, and gets 403 for every one of t2's (the backend is
// never asked); the superuser may do both.
func TestUserRoutesConfined(t *testing.T) {
	f := &fake{}
	routes := Routes(f.backends())
	body := `{"name": "u2", "sub": {"allow": ["t2.>"]}}`
	for _, c := range []struct {
		token, tenant string
		want          int
	}{
		{"t1-admin", "t1", 0},
		{"t1-admin", "t2", 403},
		{"t2-admin", "t1", 403},
		{"super", "t1", 0},
		{"super", "t2", 0},
		{"", "t1", 401},
	} {
		before := len(f.calls)
		for _, req := range []struct{ method, path, body string }{
			{http.MethodGet, "/admin/v1/tenants/" + c.tenant + "/users", ""},
			{http.MethodPost, "/admin/v1/tenants/" + c.tenant + "/users", body},
			{http.MethodDelete, "/admin/v1/tenants/" + c.tenant + "/users/u1", ""},
		} {
			w := serve(t, routes, fakeAuth{}, req.method, req.path, c.token, req.body)
			e := checkShape(t, req.path, w)
			switch c.want {
			case 0:
				if w.Code >= 300 {
					t.Errorf("%s %s as %q: %d %s", req.method, req.path, c.token, w.Code, w.Body)
				}
			default:
				if w.Code != c.want || e == nil {
					t.Errorf("%s %s as %q: %d %s, want %d", req.method, req.path, c.token, w.Code, w.Body, c.want)
				} else if c.want == 403 && e.Field != "t" {
					t.Errorf("%s %s: 403 names %q, want t", req.method, req.path, e.Field)
				}
			}
		}
		if c.want != 0 && len(f.calls) != before {
			t.Errorf("as %q on %s: the backend was asked: %v", c.token, c.tenant, f.calls[before:])
		}
	}
}

// TestUserRouteAnswers: the answers' shapes and the backend's errors.
func TestUserRouteAnswers(t *testing.T) {
	f := &fake{}
	routes := Routes(f.backends())
	w := serve(t, routes, nil, http.MethodPost, "/admin/v1/tenants/t1/users", "", `{"name":"u2","pub":{"allow":["t1.a"],"deny":["t1.b"]},"sub":{"allow":["t1.>"]},"expiry":"30d"}`)
	var uc UserCreated
	if err := json.Unmarshal(w.Body.Bytes(), &uc); err != nil || w.Code != 201 || uc.Name != "u2" || uc.Creds == "" || uc.Pub.Deny[0] != "t1.b" {
		t.Fatalf("POST: %d %s", w.Code, w.Body)
	}
	if f.lastUser.Expiry.String() != "30d" || f.lastTenant != "t1" {
		t.Errorf("the backend got %+v for %s", f.lastUser, f.lastTenant)
	}
	w = serve(t, routes, nil, http.MethodPost, "/admin/v1/tenants/t1/users", "", `{"name":"u1"}`)
	if e := checkShape(t, "dup", w); e == nil || e.Code != CodeAlreadyExists || e.Field != "name" {
		t.Errorf("POST an existing user: %d %s", w.Code, w.Body)
	}
	w = serve(t, routes, nil, http.MethodGet, "/admin/v1/tenants/t2/users", "", "")
	var l UserList
	if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil || l.Tenant != "t2" || len(l.Users) != 1 || strings.Contains(w.Body.String(), "creds") {
		t.Errorf("GET: %d %s", w.Code, w.Body)
	}
	w = serve(t, routes, nil, http.MethodDelete, "/admin/v1/tenants/t1/users/u9", "", "")
	if e := checkShape(t, "revoke", w); e == nil || e.Code != CodeUserNotFound || e.Field != "user" {
		t.Errorf("DELETE an unknown user: %d %s", w.Code, w.Body)
	}
	w = serve(t, routes, nil, http.MethodDelete, "/admin/v1/tenants/t1/users/u.1", "", "")
	if e := checkShape(t, "revoke", w); e == nil || e.Code != CodeInvalidField || e.Field != "user" {
		t.Errorf("DELETE a malformed user: %d %s", w.Code, w.Body)
	}
}

// TestUserClient: the client's methods send what the routes take and
// read what they answer.
func TestUserClient(t *testing.T) {
	f, mux := fakeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := context.Background()
	var c *Client
	u, err := c.AddUser(ctx, srv.URL, "t1", UserRequest{Name: "u3", Sub: Permission{Allow: []string{"t1.>"}}, Expiry: 3600e9})
	if err != nil || u.Name != "u3" || u.Creds == "" || f.lastUser.Expiry != 3600e9 {
		t.Fatalf("AddUser: %+v %v (backend got %+v)", u, err, f.lastUser)
	}
	users, err := c.Users(ctx, srv.URL, "t1")
	if err != nil || len(users) != 1 || users[0].Name != "u1" {
		t.Fatalf("Users: %+v %v", users, err)
	}
	if err := c.RevokeUser(ctx, srv.URL, "t1", "u1"); err != nil {
		t.Fatal(err)
	}
	err = c.RevokeUser(ctx, srv.URL, "t1", "nope")
	if ae, ok := err.(*APIError); !ok || ae.Code != CodeUserNotFound {
		t.Fatalf("revoking an unknown user: %v", err)
	}
}
