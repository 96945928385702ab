package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/stratamesh/strata/tenancy"
)

// The control plane's wire types are tenancy's model, as is: a tenant,
// its quotas, a namespace and its policies (ARCHITECTURE §5).
type (
	Tenant       = tenancy.Tenant
	Quotas       = tenancy.Quotas
	RegionQuotas = tenancy.RegionQuotas
	Namespace    = tenancy.Namespace
	Policies     = tenancy.Policies
	Retention    = tenancy.Retention
	BacklogQuota = tenancy.BacklogQuota
	OffloadRule  = tenancy.Offload
	Duration     = tenancy.Duration
)

// TenancyTimeout bounds one tenant, namespace or token write (etcd).
const TenancyTimeout = 10 * time.Second

// TenantRequest is the body of PUT /admin/v1/tenants/{t}: the tenant's
// admins and quotas (the whole tenant: omitted fields are empty). The
// quotas' per-region caps (quotas.regions) must name regions of the
// mesh (Backends.Regions): one that does not is 400 invalid_body naming
// quotas.regions.<region>.
type TenantRequest struct {
	Admins []string `json:"admins"`
	Quotas Quotas   `json:"quotas"`
}

// NamespaceRequest is the body of PUT /admin/v1/namespaces/{t}/{ns}
// (optional): the namespace's policies, merged over the defaults
// (replicated to every region, limits retention, 4 bundles, topics
// auto-created, a two-minute dedup window) field by field.
type NamespaceRequest struct {
	Policies json.RawMessage `json:"policies"`
}

// TenantList answers GET /admin/v1/tenants.
type TenantList struct {
	Tenants []Tenant `json:"tenants"`
}

// NamespaceList answers GET /admin/v1/namespaces/{t}.
type NamespaceList struct {
	Tenant     string      `json:"tenant"`
	Namespaces []Namespace `json:"namespaces"`
}

// TokenInfo is an admin token as listed: never its secret.
type TokenInfo struct {
	ID          string    `json:"id"`
	Tenant      string    `json:"tenant,omitempty"` // "": a superuser token
	Created     time.Time `json:"created"`
	Description string    `json:"description,omitempty"`
}

// TokenRequest is the body of POST /admin/v1/tokens: a superuser token
// (Tenant "", superuser only) or a tenant-admin token of Tenant (a
// tenant admin makes tokens of its own tenant only; Tenant "" means its
// own).
type TokenRequest struct {
	Tenant      string `json:"tenant"`
	Description string `json:"description"`
}

func (r *TokenRequest) validate() *Error {
	if r.Tenant != "" && !tenancy.ValidToken(r.Tenant) {
		return Errorf(CodeInvalidBody, "tenant", "tenant %q is not a valid name: want [A-Za-z0-9_-]+", r.Tenant)
	}
	if len(r.Description) > 256 {
		return Errorf(CodeInvalidBody, "description", "description over 256 bytes")
	}
	return nil
}

// TokenCreated answers POST /admin/v1/tokens: the token's secret, shown
// this once (only its hash is stored). Send it as "Authorization: Bearer
// <secret>".
type TokenCreated struct {
	TokenInfo
	Secret string `json:"secret"`
}

// TokenList answers GET /admin/v1/tokens.
type TokenList struct {
	Tokens []TokenInfo `json:"tokens"`
}

// TenancyBackend changes and reads the mesh's tenants, namespaces and
// admin tokens (the region's copy of the mesh-wide configuration; writes
// reach the other regions by themselves). Errors are *Error:
// tenant_not_found, namespace_not_found (field ns), not_empty,
// invalid_body (field the policy at fault), metadata_unavailable.
type TenancyBackend interface {
	Tenants() []Tenant
	Tenant(name string) (Tenant, bool)
	PutTenant(ctx context.Context, t Tenant) (created bool, err error)
	DeleteTenant(ctx context.Context, name string, force bool) error
	Namespaces(tenant string) []Namespace
	Namespace(n tenancy.NSName) (Namespace, bool)
	// PutNamespace creates or replaces n with the default policies
	// merged with policies (a JSON object; nil: the defaults).
	PutNamespace(ctx context.Context, n tenancy.NSName, policies json.RawMessage) (ns Namespace, created bool, err error)
	// PatchPolicies applies a JSON merge patch to n's policies.
	PatchPolicies(ctx context.Context, n tenancy.NSName, patch json.RawMessage) (Policies, error)
	// DeleteNamespace deletes n. A namespace whose topics this region
	// holds needs force (not_empty otherwise); then op is the operation
	// that tracks their deletion here (nil when there were none).
	DeleteNamespace(ctx context.Context, n tenancy.NSName, force bool) (op *Operation, err error)
	Tokens() []TokenInfo
	CreateToken(ctx context.Context, req TokenRequest) (TokenCreated, error)
	// Token is token id, for the revoke's authorization.
	Token(id string) (TokenInfo, bool)
	RevokeToken(ctx context.Context, id string) error
}

func (b Backends) tenancyRoutes() []Route {
	tb := b.Tenancy
	return []Route{
		{http.MethodGet, "/admin/v1/tenants", Authenticated, func(w http.ResponseWriter, r *http.Request) {
			scope := scopeOf(r)
			var out []Tenant
			for _, t := range tb.Tenants() {
				if scope == "" || t.Name == scope {
					out = append(out, t)
				}
			}
			WriteJSON(w, http.StatusOK, TenantList{Tenants: nonNil(out)})
		}},
		{http.MethodGet, "/admin/v1/tenants/{t}", TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			t, ok := tenantParam(w, r, tb)
			if ok {
				WriteJSON(w, http.StatusOK, t)
			}
		}},
		{http.MethodPut, "/admin/v1/tenants/{t}", Superuser, func(w http.ResponseWriter, r *http.Request) {
			name, e := Token(r, "t")
			if e != nil {
				WriteError(w, e)
				return
			}
			var req TenantRequest
			if e := DecodeBody(w, r, &req, true); e != nil {
				WriteError(w, e)
				return
			}
			t := Tenant{Name: name, Admins: req.Admins, Quotas: req.Quotas}
			if err := t.ValidateIn(b.Regions); err != nil {
				WriteError(w, FieldErrorOf(err, ""))
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), TenancyTimeout)
			defer cancel()
			created, err := tb.PutTenant(ctx, t)
			if err != nil {
				WriteError(w, err)
				return
			}
			WriteJSON(w, createdStatus(created), t)
		}},
		{http.MethodDelete, "/admin/v1/tenants/{t}", Superuser, func(w http.ResponseWriter, r *http.Request) {
			name, e := Token(r, "t")
			if e != nil {
				WriteError(w, e)
				return
			}
			force, e := QueryBool(r, "force")
			if e != nil {
				WriteError(w, e)
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), TenancyTimeout)
			defer cancel()
			if err := tb.DeleteTenant(ctx, name, force); err != nil {
				WriteError(w, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}},
		{http.MethodGet, "/admin/v1/namespaces/{t}", TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			t, ok := tenantParam(w, r, tb)
			if ok {
				WriteJSON(w, http.StatusOK, NamespaceList{Tenant: t.Name, Namespaces: nonNil(tb.Namespaces(t.Name))})
			}
		}},
		{http.MethodGet, "/admin/v1/namespaces/{t}/{ns}", TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			if ns, ok := namespaceParam(w, r, tb); ok {
				WriteJSON(w, http.StatusOK, ns)
			}
		}},
		{http.MethodPut, "/admin/v1/namespaces/{t}/{ns}", TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			n, e := NSName(r)
			if e != nil {
				WriteError(w, e)
				return
			}
			var req NamespaceRequest
			if e := DecodeBody(w, r, &req, true); e != nil {
				WriteError(w, e)
				return
			}
			if len(req.Policies) > 0 && req.Policies[0] != '{' && string(req.Policies) != "null" {
				WriteError(w, Errorf(CodeInvalidBody, "policies", "request body: field \"policies\": want an object"))
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), TenancyTimeout)
			defer cancel()
			ns, created, err := tb.PutNamespace(ctx, n, req.Policies)
			if err != nil {
				WriteError(w, err)
				return
			}
			WriteJSON(w, createdStatus(created), ns)
		}},
		{http.MethodDelete, "/admin/v1/namespaces/{t}/{ns}", TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			n, e := NSName(r)
			if e != nil {
				WriteError(w, e)
				return
			}
			force, e := QueryBool(r, "force")
			if e != nil {
				WriteError(w, e)
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), TenancyTimeout)
			defer cancel()
			op, err := tb.DeleteNamespace(ctx, n, force)
			if err != nil {
				WriteError(w, err)
				return
			}
			if op != nil {
				WriteJSON(w, http.StatusAccepted, OperationAnswer{Region: b.Region, Operation: *op})
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}},
		{http.MethodGet, "/admin/v1/namespaces/{t}/{ns}/policies", TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			if ns, ok := namespaceParam(w, r, tb); ok {
				WriteJSON(w, http.StatusOK, ns.Policies)
			}
		}},
		{http.MethodPatch, "/admin/v1/namespaces/{t}/{ns}/policies", TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			n, e := NSName(r)
			if e != nil {
				WriteError(w, e)
				return
			}
			var patch json.RawMessage
			if e := DecodeBody(w, r, &patch, false); e != nil {
				WriteError(w, e)
				return
			}
			if patch[0] != '{' {
				WriteError(w, Errorf(CodeInvalidBody, "", "request body: want a JSON object (a merge patch of the policies)"))
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), TenancyTimeout)
			defer cancel()
			p, err := tb.PatchPolicies(ctx, n, patch)
			if err != nil {
				WriteError(w, err)
				return
			}
			WriteJSON(w, http.StatusOK, p)
		}},
		{http.MethodGet, "/admin/v1/tokens", Authenticated, func(w http.ResponseWriter, r *http.Request) {
			scope := scopeOf(r)
			var out []TokenInfo
			for _, t := range tb.Tokens() {
				if scope == "" || t.Tenant == scope {
					out = append(out, t)
				}
			}
			WriteJSON(w, http.StatusOK, TokenList{Tokens: nonNil(out)})
		}},
		{http.MethodPost, "/admin/v1/tokens", Authenticated, func(w http.ResponseWriter, r *http.Request) {
			var req TokenRequest
			if e := DecodeBody(w, r, &req, true); e != nil {
				WriteError(w, e)
				return
			}
			if p, on := PrincipalFrom(r.Context()); on && !p.Superuser {
				if req.Tenant == "" {
					req.Tenant = p.Tenant // a tenant admin's token is of its tenant
				}
				if req.Tenant != p.Tenant {
					WriteError(w, Errorf(CodeForbidden, "tenant", "a tenant admin of %s makes tokens of tenant %s only", p.Tenant, p.Tenant))
					return
				}
			}
			if _, ok := tb.Tenant(req.Tenant); req.Tenant != "" && !ok {
				WriteError(w, Errorf(CodeTenantNotFound, "tenant", "the mesh has no tenant %s", req.Tenant))
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), TenancyTimeout)
			defer cancel()
			tok, err := tb.CreateToken(ctx, req)
			if err != nil {
				WriteError(w, err)
				return
			}
			WriteJSON(w, http.StatusCreated, tok)
		}},
		{http.MethodDelete, "/admin/v1/tokens/{id}", Authenticated, func(w http.ResponseWriter, r *http.Request) {
			id, e := Token(r, "id")
			if e != nil {
				WriteError(w, e)
				return
			}
			t, ok := tb.Token(id)
			if !ok {
				WriteError(w, Errorf(CodeTokenNotFound, "id", "the mesh has no admin token %s", id))
				return
			}
			if p, on := PrincipalFrom(r.Context()); on && !p.Superuser && t.Tenant != p.Tenant {
				WriteError(w, Errorf(CodeForbidden, "id", "token %s is not of tenant %s", id, p.Tenant))
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), TenancyTimeout)
			defer cancel()
			if err := tb.RevokeToken(ctx, id); err != nil {
				WriteError(w, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}},
	}
}

func createdStatus(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// tenantParam answers the tenant of path parameter {t}, or writes the
// error.
func tenantParam(w http.ResponseWriter, r *http.Request, tb TenancyBackend) (Tenant, bool) {
	name, e := Token(r, "t")
	if e != nil {
		WriteError(w, e)
		return Tenant{}, false
	}
	t, ok := tb.Tenant(name)
	if !ok {
		WriteError(w, Errorf(CodeTenantNotFound, "t", "the mesh has no tenant %s", name))
		return Tenant{}, false
	}
	return t, true
}

// namespaceParam answers the namespace of path parameters {t}/{ns}, or
// writes the error.
func namespaceParam(w http.ResponseWriter, r *http.Request, tb TenancyBackend) (Namespace, bool) {
	n, e := NSName(r)
	if e != nil {
		WriteError(w, e)
		return Namespace{}, false
	}
	ns, ok := tb.Namespace(n)
	if !ok {
		if _, tok := tb.Tenant(n.Tenant); !tok {
			WriteError(w, Errorf(CodeTenantNotFound, "t", "the mesh has no tenant %s", n.Tenant))
		} else {
			WriteError(w, Errorf(CodeNamespaceNotFound, "ns", "tenant %s has no namespace %s", n.Tenant, n.Namespace))
		}
		return Namespace{}, false
	}
	return ns, true
}

// NSName returns path parameters {t}/{ns} as a namespace name, or a 400
// naming the bad one.
func NSName(r *http.Request) (tenancy.NSName, *Error) {
	t, e := Token(r, "t")
	if e != nil {
		return tenancy.NSName{}, e
	}
	ns, e := Token(r, "ns")
	if e != nil {
		return tenancy.NSName{}, e
	}
	return tenancy.NSName{Tenant: t, Namespace: ns}, nil
}

// QueryBool returns query parameter name as a boolean: absent is false;
// "true"/"false"/"1"/"0"; anything else a 400 naming it.
func QueryBool(r *http.Request, name string) (bool, *Error) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return false, nil
	}
	v, err := strconv.ParseBool(raw)
	if err != nil {
		return false, Errorf(CodeInvalidField, name, "query parameter %s=%q: want true or false", name, raw)
	}
	return v, nil
}

// FieldErrorOf turns tenancy's validation errors (FieldErrors, joined)
// into one 400 invalid_body naming the first field at fault, under
// prefix ("policies." for a policies object inside a body; "" at the
// top), with every problem in the message.
func FieldErrorOf(err error, prefix string) *Error {
	var fe *tenancy.FieldError
	field := ""
	if asFieldError(err, &fe) {
		field = prefix + fe.Field
	}
	return Errorf(CodeInvalidBody, field, "%s", joinLines(err))
}

func asFieldError(err error, target **tenancy.FieldError) bool {
	switch e := err.(type) {
	case *tenancy.FieldError:
		*target = e
		return true
	case interface{ Unwrap() []error }:
		for _, x := range e.Unwrap() {
			if asFieldError(x, target) {
				return true
			}
		}
	case interface{ Unwrap() error }:
		return asFieldError(e.Unwrap(), target)
	}
	return false
}

// joinLines is err's message with errors.Join's newlines as "; ".
func joinLines(err error) string {
	b := []byte(err.Error())
	for i, c := range b {
		if c == '\n' {
			b[i] = ';'
		}
	}
	return string(b)
}
