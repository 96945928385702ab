package admin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stratamesh/strata/internal/meshfile"
)

func TestGetFirstFallsBackAndDecodesErrors(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/admin/v1/nope" {
			WriteError(w, Errorf(CodeNotFound, "", "no such thing"))
			return
		}
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "no token", http.StatusUnauthorized) // not the error shape
			return
		}
		WriteJSON(w, http.StatusOK, map[string]int{"n": 7})
	}))
	defer ok.Close()
	dead := "http://127.0.0.1:1"

	var v struct{ N int }
	c := &Client{Token: "s3cret"}
	if err := c.GetFirst(context.Background(), []string{dead, ok.URL}, "/admin/v1/x", &v); err != nil || v.N != 7 {
		t.Fatalf("GetFirst = %v, %+v; want the answer of the live node", err, v)
	}
	err := c.GetFirst(context.Background(), []string{ok.URL}, "/admin/v1/nope", &v)
	var api *APIError
	if !errors.As(err, &api) || api.Status != 404 || api.Code != CodeNotFound {
		t.Fatalf("GetFirst of a missing path = %v, want an APIError not_found", err)
	}
	// An error answer not in the error shape: its status and text.
	err = (&Client{}).Get(context.Background(), ok.URL, "/admin/v1/x", &v)
	if !errors.As(err, &api) || api.Status != 401 || api.Code != "" || api.Message != "no token" {
		t.Fatalf("a plain-text 401 = %v, want an APIError with its status and text", err)
	}
	if err := c.GetFirst(context.Background(), []string{dead}, "/x", &v); err == nil {
		t.Fatal("GetFirst with no live node succeeded")
	}
}

// TestTargets: running nodes first, in mesh.json order, then those that
// exited (an operator may have restarted them by hand).
func TestTargets(t *testing.T) {
	f := &meshfile.File{Mesh: "m", Regions: []meshfile.Region{
		{Name: "a", Nodes: []meshfile.Node{
			{ID: "b1", Role: "broker", Admin: "http://a1", Exited: "signal: killed"},
			{ID: "meta", Role: "meta", Admin: "http://a2"},
			{ID: "b2", Role: "broker", Admin: "http://a3"},
		}},
		{Name: "b", Nodes: []meshfile.Node{{ID: "meta", Admin: "http://b1"}}},
	}}
	urls, order, err := Targets(f, "")
	if err != nil || !slices.Equal(order, []string{"a", "b"}) || !slices.Equal(urls["a"], []string{"http://a2", "http://a3", "http://a1"}) ||
		!slices.Equal(urls["b"], []string{"http://b1"}) {
		t.Fatalf("Targets = %v %v %v", urls, order, err)
	}
	urls, _, err = RoleTargets(f, "a", "broker")
	if err != nil || !slices.Equal(urls["a"], []string{"http://a3", "http://a1"}) {
		t.Fatalf("RoleTargets(broker) = %v %v", urls, err)
	}
	if _, _, err := Targets(f, "c"); err == nil {
		t.Fatal("Targets accepted an unknown region")
	}
}

// TestNodeTarget: an exited node is still a target (with its exit, for
// the error when it does not answer); unknown and ambiguous ids are errors.
func TestNodeTarget(t *testing.T) {
	f := &meshfile.File{Mesh: "m", Regions: []meshfile.Region{
		{Name: "a", Nodes: []meshfile.Node{{ID: "k1", Role: "bookie", Admin: "http://a1", Exited: "signal: killed"}, {ID: "k2", Role: "bookie", Admin: "http://a2"}}},
		{Name: "b", Nodes: []meshfile.Node{{ID: "k2", Role: "bookie", Admin: "http://b2"}}},
	}}
	tg, err := NodeTarget(f, "", "bookie", "k1")
	if err != nil || tg != (Target{Region: "a", URL: "http://a1", Exited: "signal: killed"}) {
		t.Fatalf("NodeTarget(k1) = %+v, %v", tg, err)
	}
	msg := tg.NotAnswering("bookie k1", errors.New("connection refused")).Error()
	for _, want := range []string{"exited (signal: killed", "http://a1", "--url", "connection refused"} {
		if !strings.Contains(msg, want) {
			t.Errorf("NotAnswering = %q, want %q in it", msg, want)
		}
	}
	if tg, err := NodeTarget(f, "b", "bookie", "k2"); err != nil || tg.URL != "http://b2" || tg.Exited != "" {
		t.Fatalf("NodeTarget(b/k2) = %+v, %v", tg, err)
	}
	for _, c := range []struct{ region, id, want string }{
		{"", "k2", "say which with --region"},
		{"", "k9", `mesh m has no bookie "k9"`},
		{"a", "k9", `region a of mesh m has no bookie "k9"`},
		{"z", "k1", `mesh m has no region "z" (its regions: a, b)`},
	} {
		if _, err := NodeTarget(f, c.region, "bookie", c.id); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NodeTarget(%q, %q) = %v, want %q", c.region, c.id, err, c.want)
		}
	}
}
