package admin

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// Policy says who may call a route. The zero Policy is invalid: every
// route must choose one (TestRoutePolicies checks the table).
type Policy int

const (
	policyUnset Policy = iota
	// Public routes answer anyone, token or not: /healthz and /readyz
	// (load balancers carry no token). /metrics is Superuser: its labels
	// name every tenant's topics (scrapers send the superuser's token).
	Public
	// Authenticated routes answer any valid token. A route under it that
	// lists objects of several tenants shows a tenant admin only its own
	// tenant's (Principal.Scope).
	Authenticated
	// TenantAdmin routes answer the superuser and the admins of the
	// tenant in path parameter {t}.
	TenantAdmin
	// Superuser routes answer the mesh operator only.
	Superuser
)

func (p Policy) String() string {
	switch p {
	case Public:
		return "public"
	case Authenticated:
		return "authenticated"
	case TenantAdmin:
		return "tenant-admin"
	case Superuser:
		return "superuser"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// Valid reports whether p is one of the policies above.
func (p Policy) Valid() bool { return p >= Public && p <= Superuser }

// Route is one admin route: net/http's method and pattern (path
// parameters in braces, e.g. /admin/v1/topics/{t}/{ns}), who may call it,
// and its handler. Handlers parse and check their parameters and body
// with this package's helpers, call a Backend, and answer with WriteJSON
// or WriteError.
type Route struct {
	Method  string
	Pattern string
	Policy  Policy
	Handler http.HandlerFunc
}

// String is the route's mux pattern, "METHOD /path".
func (r Route) String() string { return r.Method + " " + r.Pattern }

// Principal is who a request's token belongs to: the mesh operator
// (Superuser), or an admin of one tenant.
type Principal struct {
	Superuser bool
	Tenant    string
}

// Scope is the tenant a list route shows p: "" (every tenant) for the
// superuser, else p's tenant.
func (p Principal) Scope() string {
	if p.Superuser {
		return ""
	}
	return p.Tenant
}

// mayAdmin reports whether p may act on tenant t.
func (p Principal) mayAdmin(t string) bool { return p.Superuser || (p.Tenant != "" && p.Tenant == t) }

// Authenticator resolves a bearer token to its principal. An error means
// the token is not valid (401), unless it is an *Error, answered as is
// (e.g. not_ready while the token store is loading). Implementations
// must be safe for concurrent use.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (Principal, error)
}

type principalKey struct{}

// PrincipalFrom returns the request's principal and true when auth is on
// (an Authenticator is configured and the route is not Public); false
// when auth is off: everything is allowed.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// scopeOf is the tenant a list route narrows its answer to for the
// request's principal ("" for all: auth off, or the superuser).
func scopeOf(r *http.Request) string {
	if p, ok := PrincipalFrom(r.Context()); ok {
		return p.Scope()
	}
	return ""
}

// Authorize wraps route's handler with its policy. With auth nil (auth
// off), the handler is route's own. Otherwise, except for Public routes:
// no token, a malformed Authorization header or a token auth refuses:
// 401 unauthorized; a valid token the policy does not admit: 403
// forbidden. The principal is in the handler's context (PrincipalFrom).
func Authorize(route Route, auth Authenticator) http.Handler {
	if !route.Policy.Valid() {
		panic(fmt.Sprintf("admin: route %s has no valid policy (%v)", route, route.Policy))
	}
	if auth == nil || route.Policy == Public {
		return route.Handler
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="strata"`)
			WriteError(w, Errorf(CodeUnauthorized, "", "%s %s needs Authorization: Bearer <token>", r.Method, r.URL.Path))
			return
		}
		p, err := auth.Authenticate(r.Context(), token)
		if err != nil {
			if e, isAPI := err.(*Error); isAPI {
				WriteError(w, e)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="strata", error="invalid_token"`)
			WriteError(w, Errorf(CodeUnauthorized, "", "the bearer token is not valid"))
			return
		}
		if !p.Superuser && p.Tenant == "" {
			WriteError(w, Errorf(CodeForbidden, "", "the token is neither the superuser's nor a tenant admin's"))
			return
		}
		switch route.Policy {
		case Superuser:
			if !p.Superuser {
				WriteError(w, Errorf(CodeForbidden, "", "%s %s is for the mesh's superuser only", r.Method, r.URL.Path))
				return
			}
		case TenantAdmin:
			if t := r.PathValue("t"); !p.mayAdmin(t) {
				WriteError(w, Errorf(CodeForbidden, "t", "the token is not an admin of tenant %q", t))
				return
			}
		}
		route.Handler(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}

// Mux is where routes are mounted: internal/adminhttp.Server, or an
// http.ServeMux in tests.
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// Mount mounts routes on mux, each behind its policy (Authorize; auth
// nil: auth off).
func Mount(mux Mux, routes []Route, auth Authenticator) {
	for _, rt := range routes {
		mux.Handle(rt.String(), Authorize(rt, auth))
	}
}
