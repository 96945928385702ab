package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/stratamesh/strata/tenancy"
)

// The client side of the control plane's routes (tenants.go): tenants,
// namespaces and their policies, admin tokens. Each method asks the
// broker at base (e.g. http://127.0.0.1:18001); an error answer is an
// *APIError with the catalog's code and field (tenant_not_found,
// namespace_not_found, not_empty, invalid_body, forbidden, …).

// Tenants answers GET /admin/v1/tenants: every tenant (a tenant admin's
// token sees its own only).
func (c *Client) Tenants(ctx context.Context, base string) ([]Tenant, error) {
	var l TenantList
	if err := c.Get(ctx, base, "/admin/v1/tenants", &l); err != nil {
		return nil, err
	}
	return l.Tenants, nil
}

// Tenant answers GET /admin/v1/tenants/{t}.
func (c *Client) Tenant(ctx context.Context, base, name string) (Tenant, error) {
	var t Tenant
	err := c.Get(ctx, base, "/admin/v1/tenants/"+url.PathEscape(name), &t)
	return t, err
}

// PutTenant creates or replaces tenant name (PUT /admin/v1/tenants/{t}):
// its admins and quotas become req's. created is whether it is new.
func (c *Client) PutTenant(ctx context.Context, base, name string, req TenantRequest) (t Tenant, created bool, err error) {
	status, err := c.sendStatus(ctx, http.MethodPut, base, "/admin/v1/tenants/"+url.PathEscape(name), req, &t)
	return t, status == http.StatusCreated, err
}

// DeleteTenant deletes tenant name; one with namespaces needs force
// (not_empty otherwise), which deletes them (and their topics) too.
func (c *Client) DeleteTenant(ctx context.Context, base, name string, force bool) error {
	return c.Send(ctx, http.MethodDelete, base, "/admin/v1/tenants/"+url.PathEscape(name)+forceQuery(force), nil, nil)
}

// Namespaces answers GET /admin/v1/namespaces/{t}.
func (c *Client) Namespaces(ctx context.Context, base, tenant string) ([]Namespace, error) {
	var l NamespaceList
	if err := c.Get(ctx, base, "/admin/v1/namespaces/"+url.PathEscape(tenant), &l); err != nil {
		return nil, err
	}
	return l.Namespaces, nil
}

// Namespace answers GET /admin/v1/namespaces/{t}/{ns}.
func (c *Client) Namespace(ctx context.Context, base string, n tenancy.NSName) (Namespace, error) {
	var ns Namespace
	err := c.Get(ctx, base, nsPath(n), &ns)
	return ns, err
}

// PutNamespace creates or replaces namespace n (PUT
// /admin/v1/namespaces/{t}/{ns}) with the default policies merged with
// policies, a JSON object (nil: the defaults). created is whether it is
// new.
func (c *Client) PutNamespace(ctx context.Context, base string, n tenancy.NSName, policies json.RawMessage) (ns Namespace, created bool, err error) {
	status, err := c.sendStatus(ctx, http.MethodPut, base, nsPath(n), NamespaceRequest{Policies: policies}, &ns)
	return ns, status == http.StatusCreated, err
}

// Policies answers GET /admin/v1/namespaces/{t}/{ns}/policies.
func (c *Client) Policies(ctx context.Context, base string, n tenancy.NSName) (Policies, error) {
	var p Policies
	err := c.Get(ctx, base, nsPath(n)+"/policies", &p)
	return p, err
}

// PatchPolicies applies patch, a JSON merge patch (RFC 7386), to n's
// policies and answers the result (PATCH …/policies).
func (c *Client) PatchPolicies(ctx context.Context, base string, n tenancy.NSName, patch json.RawMessage) (Policies, error) {
	var p Policies
	err := c.Send(ctx, http.MethodPatch, base, nsPath(n)+"/policies", patch, &p)
	return p, err
}

// DeleteNamespace deletes namespace n. One whose topics the broker's
// region holds needs force (not_empty otherwise); then the answer may be
// 202 with op, the operation that follows their deletion in that region
// (GET /admin/v1/operations/{id}); op is nil when the delete is done.
func (c *Client) DeleteNamespace(ctx context.Context, base string, n tenancy.NSName, force bool) (op *Operation, err error) {
	var a OperationAnswer
	status, err := c.sendStatus(ctx, http.MethodDelete, base, nsPath(n)+forceQuery(force), nil, &a)
	if err != nil || status != http.StatusAccepted {
		return nil, err
	}
	return &a.Operation, nil
}

// Tokens answers GET /admin/v1/tokens: the admin tokens (never their
// secrets; a tenant admin sees its tenant's).
func (c *Client) Tokens(ctx context.Context, base string) ([]TokenInfo, error) {
	var l TokenList
	if err := c.Get(ctx, base, "/admin/v1/tokens", &l); err != nil {
		return nil, err
	}
	return l.Tokens, nil
}

// CreateToken makes an admin token (POST /admin/v1/tokens); the answer
// holds its secret, which the mesh does not keep.
func (c *Client) CreateToken(ctx context.Context, base string, req TokenRequest) (TokenCreated, error) {
	var t TokenCreated
	err := c.Post(ctx, base, "/admin/v1/tokens", req, &t)
	return t, err
}

// RevokeToken revokes admin token id mesh-wide.
func (c *Client) RevokeToken(ctx context.Context, base, id string) error {
	return c.Send(ctx, http.MethodDelete, base, "/admin/v1/tokens/"+url.PathEscape(id), nil, nil)
}

func nsPath(n tenancy.NSName) string {
	return "/admin/v1/namespaces/" + url.PathEscape(n.Tenant) + "/" + url.PathEscape(n.Namespace)
}

func forceQuery(force bool) string {
	if force {
		return "?force=true"
	}
	return ""
}

// sendStatus is Send that also answers the HTTP status of a 2xx answer,
// and decodes an empty answer (204) as nothing rather than an error.
func (c *Client) sendStatus(ctx context.Context, method, base, path string, in, v any) (int, error) {
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+path, rd)
	if err != nil {
		return 0, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c != nil && c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := http.DefaultClient
	if c != nil && c.HTTP != nil {
		hc = c.HTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var eb ErrorBody
		if json.Unmarshal(body, &eb) == nil && eb.Error.Code != "" {
			return resp.StatusCode, &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message, Field: eb.Error.Field}
		}
		return resp.StatusCode, &APIError{Status: resp.StatusCode, Message: strings.TrimSpace(string(body))}
	}
	if v == nil || len(bytes.TrimSpace(body)) == 0 {
		return resp.StatusCode, nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return resp.StatusCode, fmt.Errorf("admin: %s%s: %w", base, path, err)
	}
	return resp.StatusCode, nil
}
