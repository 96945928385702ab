package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stratamesh/strata/tenancy"
)

// TestTenancyClient: the client methods of the tenancy routes against
// the routes themselves (fake backend): answers decoded, created told
// apart, a 204 delete decoded as no operation, and error answers as
// *APIError with their code and field.
func TestTenancyClient(t *testing.T) {
	_, mux := fakeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := context.Background()
	c := &Client{}
	base := srv.URL

	ts, err := c.Tenants(ctx, base)
	if err != nil || len(ts) != 2 || ts[0].Name != "t1" {
		t.Fatalf("Tenants = %+v, %v", ts, err)
	}
	if tn, err := c.Tenant(ctx, base, "t2"); err != nil || tn.Name != "t2" {
		t.Fatalf("Tenant = %+v, %v", tn, err)
	}
	_, err = c.Tenant(ctx, base, "nope")
	var api *APIError
	if !errors.As(err, &api) || api.Status != 404 || api.Code != CodeTenantNotFound || api.Field != "t" {
		t.Fatalf("Tenant of a missing tenant = %v, want tenant_not_found on t", err)
	}
	if tn, created, err := c.PutTenant(ctx, base, "t3", TenantRequest{Admins: []string{"a"}}); err != nil || !created || tn.Name != "t3" {
		t.Fatalf("PutTenant = %+v, %v, %v", tn, created, err)
	}
	if _, _, err := c.PutTenant(ctx, base, "t3", TenantRequest{Quotas: Quotas{Topics: -1}}); !errors.As(err, &api) || api.Code != CodeInvalidBody || api.Field != "quotas.topics" {
		t.Fatalf("PutTenant with a negative quota = %v, want invalid_body on quotas.topics", err)
	}
	if err := c.DeleteTenant(ctx, base, "t1", true); err != nil {
		t.Fatal(err)
	}
	n := tenancy.NSName{Tenant: "t1", Namespace: "ns1"}
	if nss, err := c.Namespaces(ctx, base, "t1"); err != nil || len(nss) != 1 || nss[0].Name != "ns1" {
		t.Fatalf("Namespaces = %+v, %v", nss, err)
	}
	if ns, err := c.Namespace(ctx, base, n); err != nil || ns.Policies.Bundles != tenancy.DefaultBundles {
		t.Fatalf("Namespace = %+v, %v", ns, err)
	}
	if ns, created, err := c.PutNamespace(ctx, base, n, json.RawMessage(`{"bundles": 8}`)); err != nil || created || ns.Name != "ns1" {
		t.Fatalf("PutNamespace = %+v, %v, %v", ns, created, err)
	}
	if p, err := c.Policies(ctx, base, n); err != nil || len(p.Replication) != 1 {
		t.Fatalf("Policies = %+v, %v", p, err)
	}
	if _, err := c.PatchPolicies(ctx, base, n, json.RawMessage(`{"bundles": 8}`)); err != nil {
		t.Fatal(err)
	}
	if op, err := c.DeleteNamespace(ctx, base, n, false); err != nil || op != nil {
		t.Fatalf("DeleteNamespace (204) = %+v, %v; want no operation", op, err)
	}
	if toks, err := c.Tokens(ctx, base); err != nil || len(toks) != 1 || toks[0].ID != "7" {
		t.Fatalf("Tokens = %+v, %v", toks, err)
	}
	if tok, err := c.CreateToken(ctx, base, TokenRequest{Tenant: "t1"}); err != nil || tok.Secret != "s" || tok.ID != "8" {
		t.Fatalf("CreateToken = %+v, %v", tok, err)
	}
	if err := c.RevokeToken(ctx, base, "7"); err != nil {
		t.Fatal(err)
	}
	if err := c.RevokeToken(ctx, base, "9"); !errors.As(err, &api) || api.Code != CodeTokenNotFound {
		t.Fatalf("RevokeToken of a missing token = %v", err)
	}
}

// TestDeleteNamespaceOperation: a 202 answer is the operation following
// the deletion of the namespace's topics; ?force=true is sent.
func TestDeleteNamespaceOperation(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodDelete || r.URL.Path != "/admin/v1/namespaces/t1/ns1" || r.URL.Query().Get("force") != "true" {
			WriteError(w, Errorf(CodeNotFound, "", "unexpected %s %s", r.Method, r.URL))
			return
		}
		WriteJSON(w, http.StatusAccepted, OperationAnswer{Region: "r1", Operation: Operation{ID: "op1", Kind: "delete-namespace", State: OperationRunning, Total: 3}})
	}))
	defer srv.Close()
	op, err := (&Client{}).DeleteNamespace(context.Background(), srv.URL, tenancy.NSName{Tenant: "t1", Namespace: "ns1"}, true)
	if err != nil || op == nil || op.ID != "op1" || op.Total != 3 {
		t.Fatalf("DeleteNamespace = %+v, %v; want operation op1", op, err)
	}
}
