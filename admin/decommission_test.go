package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stratamesh/strata/tenancy"
)

// DecommissionBackend: region r2 can be decommissioned (namespace
// t1/ns1 lists r1 and r2); r1 is the only region of t2/ns1.
func (f *fake) Decommission(region string) (tenancy.Decommission, bool) {
	return tenancy.Decommission{}, false
}
func (f *fake) PlanDecommission(region string) ([]tenancy.DecomNamespace, error) {
	f.record("PlanDecommission " + region)
	nss := []tenancy.Namespace{
		{Tenant: "t1", Name: "ns1", Policies: tenancy.Policies{Replication: []string{"r1", "r2"}}},
		{Tenant: "t2", Name: "ns1", Policies: tenancy.Policies{Replication: []string{"r1"}}},
	}
	return tenancy.PlanDecommission(nss, region, []string{"r1", "r2"})
}
func (f *fake) StepDecommission(_ context.Context, region, action string) (tenancy.Decommission, error) {
	f.record("StepDecommission " + region + " " + action)
	plan, err := f.PlanDecommission(region)
	if err != nil && action == tenancy.DecomStart {
		return tenancy.Decommission{}, err
	}
	d, _, err := tenancy.StepDecommission(nil, region, action, plan, tenancy.HLC{Wall: 5, Region: "r1"})
	return d, err
}
func (f *fake) DecomCursors(string) ([]ParkedCursor, []StaleCursor) { return nil, nil }
func (f *fake) BrokerName() string                                  { return "b1" }

// TestDecommissionRoutes: superuser only; a dry run and a start answer
// the plan (only the start writes); bad bodies are 400 invalid_body
// naming the field; the core's refusals map to 404 and 409.
func TestDecommissionRoutes(t *testing.T) {
	f := &fake{}
	routes := Routes(f.backends())
	path := DecommissionPath("r2")
	for _, tok := range []string{"t1-admin", ""} {
		before := len(f.calls)
		w := serve(t, routes, fakeAuth{}, http.MethodPost, path, tok, `{"action":"start"}`)
		checkShape(t, path, w)
		if w.Code != 403 && w.Code != 401 || len(f.calls) != before {
			t.Fatalf("token %q: %d, calls %v", tok, w.Code, f.calls[before:])
		}
	}
	for _, c := range []struct {
		body, path string
		code       int
		errCode    Code
		field      string
		call       string
	}{
		{`{"action":"start","dry_run":true}`, path, 200, "", "", "PlanDecommission r2"},
		{`{"action":"start"}`, path, 200, "", "", "StepDecommission r2 start"},
		{`{"action":"confirm"}`, path, 404, CodeNotFound, "region", "StepDecommission r2 confirm"},
		{`{"action":"start"}`, DecommissionPath("r1"), 409, CodeConflict, "", "StepDecommission r1 start"},
		{`{"action":"start"}`, DecommissionPath("r9"), 404, CodeNotFound, "region", "StepDecommission r9 start"},
		{`{"action":"stop"}`, path, 400, CodeInvalidBody, "action", ""},
		{`{}`, path, 400, CodeInvalidBody, "action", ""},
		{``, path, 400, CodeInvalidBody, "", ""},
		{`{"action":"confirm","dry_run":true}`, path, 400, CodeInvalidBody, "dry_run", ""},
		{`{"action":"start","force":true}`, path, 400, CodeInvalidBody, "force", ""},
		{`{"action":1}`, path, 400, CodeInvalidBody, "action", ""},
		{`{"action":"start"} {}`, path, 400, CodeInvalidBody, "", ""},
		{`{"action":"start"}`, "/admin/v1/regions/r.2/decommission", 400, CodeInvalidField, "region", ""},
	} {
		before := len(f.calls)
		w := serve(t, routes, fakeAuth{}, http.MethodPost, c.path, "super", c.body)
		e := checkShape(t, c.body, w)
		if w.Code != c.code {
			t.Fatalf("%s %s: %d, want %d: %s", c.path, c.body, w.Code, c.code, w.Body)
		}
		if e != nil && (e.Code != c.errCode || e.Field != c.field) {
			t.Fatalf("%s: error %+v, want %s field %q", c.body, e, c.errCode, c.field)
		}
		calls := strings.Join(f.calls[before:], ";")
		if c.call == "" && calls != "" || c.call != "" && !strings.HasPrefix(calls, c.call) {
			t.Fatalf("%s: backend calls %q, want %q", c.body, calls, c.call)
		}
		if w.Code == 200 {
			var v DecommissionView
			if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || len(v.Namespaces) != 1 || v.Namespaces[0].Namespace != "t1/ns1" ||
				strings.Join(v.Namespaces[0].After, ",") != "r1" || v.DryRun != strings.Contains(c.body, "dry_run") || v.Parked == nil {
				t.Fatalf("%s: answer %s (%v)", c.body, w.Body, err)
			}
		}
	}
	w := serve(t, routes, fakeAuth{}, http.MethodGet, path, "super", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"state": ""`) {
		t.Fatalf("GET: %d %s", w.Code, w.Body)
	}
}

// FuzzDecodeDecommission: any body either decodes to a request that
// passes its checks, or is refused with invalid_body or body_too_large;
// never a panic.
func FuzzDecodeDecommission(f *testing.F) {
	for _, b := range []string{`{"action":"start"}`, `{"action":"start","dry_run":true}`, `{"action":"cancel"}`, `{"action":"x"}`, `{"dry_run":1}`, `{`, ``, `[]`} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req DecommissionRequest
		e := decode(http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(body)), MaxBodyBytes), &req, false)
		if e != nil {
			if (e.Code != CodeInvalidBody && e.Code != CodeBodyTooLarge) || e.Message == "" {
				t.Fatalf("refused with %+v", e)
			}
			return
		}
		switch {
		case req.Action != tenancy.DecomStart && req.Action != tenancy.DecomConfirm && req.Action != tenancy.DecomCancel:
			t.Fatalf("action %q accepted", req.Action)
		case req.DryRun && req.Action != tenancy.DecomStart:
			t.Fatalf("dry_run with %q accepted", req.Action)
		}
	})
}
