package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// keysOf is the sorted keys of a JSON object.
func keysOf(t *testing.T, v any) []string {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%v is not an object", v)
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestUsageShape: GET /admin/v1/tenants/{t}/usage answers quota.Usage's
// JSON: tenant and quotas, each quota with quota, unit, limit, use and
// regions, each region with region, use, share, cap (omitted when none)
// and reachable; a tenant without quotas has "quotas": [].
func TestUsageShape(t *testing.T) {
	f := &fake{}
	routes := Routes(f.backends())
	w := serve(t, routes, nil, http.MethodGet, "/admin/v1/tenants/t1/usage", "", "")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var doc any
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if got := keysOf(t, doc); !slices.Equal(got, []string{"quotas", "tenant"}) {
		t.Errorf("top-level keys %v", got)
	}
	q := doc.(map[string]any)["quotas"].([]any)
	if len(q) != 1 {
		t.Fatalf("quotas %v", q)
	}
	if got := keysOf(t, q[0]); !slices.Equal(got, []string{"limit", "quota", "regions", "unit", "use"}) {
		t.Errorf("quota keys %v", got)
	}
	regs := q[0].(map[string]any)["regions"].([]any)
	if got := keysOf(t, regs[0]); !slices.Equal(got, []string{"cap", "reachable", "region", "share", "use"}) {
		t.Errorf("capped region keys %v", got)
	}
	if got := keysOf(t, regs[1]); !slices.Equal(got, []string{"reachable", "region", "share", "use"}) {
		t.Errorf("uncapped region keys %v", got)
	}
	var u Usage
	if err := json.Unmarshal(w.Body.Bytes(), &u); err != nil {
		t.Fatal(err)
	}
	want, _ := f.TenantUsage(context.Background(), "t1")
	if !reflect.DeepEqual(u, want) {
		t.Errorf("answer %+v, backend's %+v", u, want)
	}

	w = serve(t, routes, nil, http.MethodGet, "/admin/v1/tenants/t2/usage", "", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"quotas": []`) || !strings.Contains(w.Body.String(), `"tenant": "t2"`) {
		t.Errorf("a tenant without quotas: %d %s", w.Code, w.Body)
	}
}

// TestUsageAuth: the tenant's admins and the superuser may read a
// tenant's usage; another tenant's admin may not, and learns nothing of
// whether the tenant exists (403 before 404).
func TestUsageAuth(t *testing.T) {
	f := &fake{}
	routes := Routes(f.backends())
	for _, c := range []struct {
		token, tenant string
		status        int
		code          Code
	}{
		{"t1-admin", "t1", 200, ""},
		{"super", "t1", 200, ""},
		{"t2-admin", "t1", 403, CodeForbidden},
		{"t2-admin", "t9", 403, CodeForbidden},
		{"t1-admin", "t2", 403, CodeForbidden},
		{"", "t1", 401, CodeUnauthorized},
		{"super", "t9", 404, CodeTenantNotFound},
	} {
		f.calls = nil
		w := serve(t, routes, fakeAuth{}, http.MethodGet, "/admin/v1/tenants/"+c.tenant+"/usage", c.token, "")
		e := checkShape(t, c.token+" on "+c.tenant, w)
		if w.Code != c.status || (e != nil && e.Code != c.code) {
			t.Errorf("%s reading %s's usage: %d %s, want %d %s", c.token, c.tenant, w.Code, w.Body, c.status, c.code)
		}
		if asked := slices.Contains(f.calls, "TenantUsage "+c.tenant); asked != (c.status == 200) {
			t.Errorf("%s reading %s's usage: backend asked %v (calls %v)", c.token, c.tenant, asked, f.calls)
		}
	}
	w := serve(t, routes, nil, http.MethodGet, "/admin/v1/tenants/t9/usage", "", "")
	if e := checkShape(t, "t9", w); e == nil || e.Code != CodeTenantNotFound || e.Field != "t" {
		t.Errorf("unknown tenant: %d %s", w.Code, w.Body)
	}
	w = serve(t, routes, nil, http.MethodGet, "/admin/v1/tenants/t.1/usage", "", "")
	if e := checkShape(t, "t.1", w); e == nil || e.Code != CodeInvalidField || e.Field != "t" {
		t.Errorf("bad tenant name: %d %s", w.Code, w.Body)
	}
}

// errUsage is a UsageBackend that fails with err.
type errUsage struct{ err error }

func (e errUsage) TenantUsage(context.Context, string) (Usage, error) { return Usage{}, e.err }

// TestUsageUnavailable: a region whose coordinator does not answer is
// 503 quota_unavailable, in the error shape, to every caller; without a
// usage backend the route is not served.
func TestUsageUnavailable(t *testing.T) {
	f := &fake{}
	b := f.backends()
	b.Usage = errUsage{Errorf(CodeQuotaUnavailable, "", "region r1: quota coordinator not wired")}
	w := serve(t, Routes(b), fakeAuth{}, http.MethodGet, "/admin/v1/tenants/t1/usage", "t1-admin", "")
	if e := checkShape(t, "unavailable", w); w.Code != 503 || e == nil || e.Code != CodeQuotaUnavailable || !strings.Contains(e.Message, "not wired") {
		t.Errorf("%d %s", w.Code, w.Body)
	}
	b.Usage = nil
	w = serve(t, Routes(b), nil, http.MethodGet, "/admin/v1/tenants/t1/usage", "", "")
	if w.Code != 404 {
		t.Errorf("without a usage backend: %d %s", w.Code, w.Body)
	}
}

// TestClientTenantUsage: the client decodes the answer into Usage and
// an error answer into an *APIError with its code.
func TestClientTenantUsage(t *testing.T) {
	f, mux := fakeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &Client{}
	u, err := c.TenantUsage(context.Background(), srv.URL, "t1")
	want, _ := f.TenantUsage(context.Background(), "t1")
	if err != nil || !reflect.DeepEqual(u, want) {
		t.Errorf("t1: %+v %v", u, err)
	}
	_, err = c.TenantUsage(context.Background(), srv.URL, "t9")
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.Code != CodeTenantNotFound {
		t.Errorf("t9: %v", err)
	}
}

// TestPutTenantRegionCaps: PUT /admin/v1/tenants/{t} refuses a per-region
// cap naming a region the mesh does not have, a negative one and one over
// its mesh-wide limit, naming the field; nothing is written. Valid caps
// are stored as given.
func TestPutTenantRegionCaps(t *testing.T) {
	f := &fake{}
	routes := Routes(f.backends()) // regions r1, r2
	for _, c := range []struct{ body, field, msg string }{
		{`{"quotas": {"publish_rate": 100, "regions": {"eu-north": {"publish_rate": 10}}}}`, "quotas.regions.eu-north",
			"quotas.regions.eu-north: no such region in the topology (regions: r1, r2)"},
		{`{"quotas": {"publish_rate": 100, "regions": {"r1": {"publish_rate": -1}}}}`, "quotas.regions.r1.publish_rate", "must be 0 (no cap) or more"},
		{`{"quotas": {"publish_rate": 100, "regions": {"r2": {"publish_rate": 101}}}}`, "quotas.regions.r2.publish_rate", "over the mesh-wide limit"},
		{`{"quotas": {"regions": {"r2": {"publish_bytes": 5}}}}`, "quotas.regions.r2.publish_bytes", "needs a mesh-wide limit"},
		{`{"quotas": {"storage": -1}}`, "quotas.storage", "must be 0 (unlimited) or more"},
		{`{"quotas": {"regions": {"r1": {"publish_rate": "600/s"}}}}`, "quotas.regions.r1.publish_rate", ""},
		{`{"quotas": {"regions": ["r1"]}}`, "quotas.regions", ""},
	} {
		f.calls = nil
		w := serve(t, routes, nil, http.MethodPut, "/admin/v1/tenants/t1", "", c.body)
		e := checkShape(t, c.body, w)
		if w.Code != 400 || e == nil || e.Code != CodeInvalidBody || e.Field != c.field || !strings.Contains(e.Message, c.msg) {
			t.Errorf("%s: %d %s, want 400 invalid_body naming %s", c.body, w.Code, w.Body, c.field)
		}
		if len(f.calls) > 0 {
			t.Errorf("%s: backend called %v", c.body, f.calls)
		}
	}
	w := serve(t, routes, nil, http.MethodPut, "/admin/v1/tenants/t1", "", `{"quotas": {"publish_rate": 100, "regions": {"r1": {"publish_rate": 60}}}}`)
	var got Tenant
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 201 ||
		!reflect.DeepEqual(got.Quotas.Regions, map[string]RegionQuotas{"r1": {PublishRate: 60}}) {
		t.Errorf("valid caps: %d %s", w.Code, w.Body)
	}
}

// TestTypeErrorPath: a wrong type under a map is named with its key
// (encoding/json leaves map keys out of the path it reports).
func TestTypeErrorPath(t *testing.T) {
	for _, c := range []struct{ body, field string }{
		{`{"quotas": {"regions": {"r1": {"publish_rate": 1}, "r2": {"publish_rate": "600/s"}}}}`, "quotas.regions.r2.publish_rate"},
		{`{"quotas": {"regions": {"r1": {"publish_bytes": 1.5}}}}`, "quotas.regions.r1.publish_bytes"},
		{`{"quotas": {"regions": {"r1": 5}}}`, "quotas.regions.r1"},
		{`{"quotas": {"regions": {"r1": {"publish_rate": 99999999999999999999}}}}`, "quotas.regions.r1.publish_rate"},
		{`{"quotas": {"topics": "ten"}}`, "quotas.topics"},
		{`{"admins": ["a", 5]}`, "admins[1]"},
	} {
		var req TenantRequest
		e := decode(strings.NewReader(c.body), &req, true)
		if e == nil || e.Code != CodeInvalidBody || e.Field != c.field || !strings.Contains(e.Message, `"`+c.field+`"`) {
			t.Errorf("%s: %+v, want invalid_body naming %s", c.body, e, c.field)
		}
	}
}
