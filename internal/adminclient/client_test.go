package adminclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stratamesh/strata/internal/adminhttp"
	"github.com/stratamesh/strata/internal/meshfile"
)

func TestGetFirstFallsBackAndDecodesErrors(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/admin/v1/nope" {
			adminhttp.WriteError(w, http.StatusNotFound, "not_found", "no such thing", "")
			return
		}
		adminhttp.WriteJSON(w, http.StatusOK, map[string]int{"n": 7})
	}))
	defer ok.Close()
	dead := "http://127.0.0.1:1"

	var v struct{ N int }
	if err := GetFirst(context.Background(), nil, []string{dead, ok.URL}, "/admin/v1/x", &v); err != nil || v.N != 7 {
		t.Fatalf("GetFirst = %v, %+v; want the answer of the live node", err, v)
	}
	err := GetFirst(context.Background(), nil, []string{ok.URL}, "/admin/v1/nope", &v)
	var api *APIError
	if !errors.As(err, &api) || api.Status != 404 || api.Code != "not_found" {
		t.Fatalf("GetFirst of a missing path = %v, want an APIError not_found", err)
	}
	if err := GetFirst(context.Background(), nil, []string{dead}, "/x", &v); err == nil {
		t.Fatal("GetFirst with no live node succeeded")
	}
}

func TestTargets(t *testing.T) {
	f := &meshfile.File{Mesh: "m", Regions: []meshfile.Region{
		{Name: "a", Nodes: []meshfile.Node{{ID: "meta", Admin: "http://a1"}, {ID: "b1", Admin: "http://a2", Exited: "signal: killed"}}},
		{Name: "b", Nodes: []meshfile.Node{{ID: "meta", Admin: "http://b1"}}},
	}}
	urls, order, err := Targets(f, "")
	if err != nil || len(order) != 2 || len(urls["a"]) != 1 || urls["b"][0] != "http://b1" {
		t.Fatalf("Targets = %v %v %v", urls, order, err)
	}
	if _, _, err := Targets(f, "c"); err == nil {
		t.Fatal("Targets accepted an unknown region")
	}
}
