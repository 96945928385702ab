package admin

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/stratamesh/strata/tenancy"
)

// A tenant's NATS users (issue 24): each is an nkey with a user JWT signed
// by the tenant's account. Adding one answers its .creds file once (the
// user's private key is not stored); revoking one re-signs the tenant's
// account JWT with the user in its revocations, mesh-wide.

// Permission is a NATS allow/deny pair of subject lists (empty Allow:
// every subject of the tenant).
type Permission = tenancy.Permission

// UserRequest is the body of POST /admin/v1/tenants/{t}/users.
type UserRequest struct {
	// Name is the user's name: a token ([A-Za-z0-9_-]+), unique within the
	// tenant among its live users. Required.
	Name string     `json:"name"`
	Pub  Permission `json:"pub"`
	Sub  Permission `json:"sub"`
	// Expiry is how long the credentials are valid ("720h", "30d"; 0 or
	// omitted: they do not expire).
	Expiry Duration `json:"expiry"`
}

func (r *UserRequest) validate() *Error {
	if r.Name == "" {
		return Errorf(CodeInvalidBody, "name", "request body: field \"name\" is required: the user's name, [A-Za-z0-9_-]+")
	}
	if r.Expiry < 0 {
		return Errorf(CodeInvalidBody, "expiry", "expiry %s is negative: want a duration such as \"720h\" (0: no expiry)", r.Expiry)
	}
	// The tenant is the path's; a valid placeholder lets the user's own
	// checks name the body's fields.
	u := tenancy.User{Tenant: "t", Name: r.Name, Pub: r.Pub, Sub: r.Sub}
	if err := u.Validate(); err != nil {
		return FieldErrorOf(err, "")
	}
	return nil
}

// UserInfo is a user as listed: never a secret.
type UserInfo struct {
	Tenant string `json:"tenant"`
	Name   string `json:"name"`
	// PublicKey is the user's nkey ("U…"); Account the public key of the
	// account that signed its JWT.
	PublicKey string     `json:"public_key"`
	Account   string     `json:"account"`
	Pub       Permission `json:"pub"`
	Sub       Permission `json:"sub"`
	// Expires is when the credentials stop working (absent: never).
	Expires *time.Time `json:"expires,omitempty"`
	Created time.Time  `json:"created"`
	// Stale: the tenant's account is no longer the one that signed the
	// user (two regions made the tenant's account at once and the other
	// one's was kept): its credentials are refused; add it again.
	Stale bool `json:"stale,omitempty"`
}

// UserCreated answers POST /admin/v1/tenants/{t}/users: the user and its
// .creds file (the user JWT and the user's nkey seed, in the standard
// decorated form that `nats --creds` and nats.go's UserCredentials read),
// shown this once.
type UserCreated struct {
	UserInfo
	Creds string `json:"creds"`
}

// UserList answers GET /admin/v1/tenants/{t}/users.
type UserList struct {
	Tenant string     `json:"tenant"`
	Users  []UserInfo `json:"users"`
}

// UsersBackend manages tenants' NATS users. Errors are *Error:
// tenant_not_found, user_not_found (field user), already_exists (field
// name), nats_auth_off, metadata_unavailable.
type UsersBackend interface {
	Users(tenant string) ([]UserInfo, error)
	AddUser(ctx context.Context, tenant string, req UserRequest) (UserCreated, error)
	RevokeUser(ctx context.Context, tenant, name string) error
}

func (b Backends) userRoutes() []Route {
	ub := b.Users
	return []Route{
		{http.MethodGet, "/admin/v1/tenants/{t}/users", TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			t, e := Token(r, "t")
			if e != nil {
				WriteError(w, e)
				return
			}
			users, err := ub.Users(t)
			if err != nil {
				WriteError(w, err)
				return
			}
			WriteJSON(w, http.StatusOK, UserList{Tenant: t, Users: nonNil(users)})
		}},
		{http.MethodPost, "/admin/v1/tenants/{t}/users", TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			t, e := Token(r, "t")
			if e != nil {
				WriteError(w, e)
				return
			}
			var req UserRequest
			if e := DecodeBody(w, r, &req, false); e != nil {
				WriteError(w, e)
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), TenancyTimeout)
			defer cancel()
			u, err := ub.AddUser(ctx, t, req)
			if err != nil {
				WriteError(w, err)
				return
			}
			WriteJSON(w, http.StatusCreated, u)
		}},
		{http.MethodDelete, "/admin/v1/tenants/{t}/users/{user}", TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			t, e := Token(r, "t")
			if e != nil {
				WriteError(w, e)
				return
			}
			name, e := Token(r, "user")
			if e != nil {
				WriteError(w, e)
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), TenancyTimeout)
			defer cancel()
			if err := ub.RevokeUser(ctx, t, name); err != nil {
				WriteError(w, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}},
	}
}

func usersPath(tenant string) string { return "/admin/v1/tenants/" + url.PathEscape(tenant) + "/users" }

// Users answers GET /admin/v1/tenants/{t}/users.
func (c *Client) Users(ctx context.Context, base, tenant string) ([]UserInfo, error) {
	var l UserList
	if err := c.Get(ctx, base, usersPath(tenant), &l); err != nil {
		return nil, err
	}
	return l.Users, nil
}

// AddUser makes a NATS user of tenant (POST /admin/v1/tenants/{t}/users):
// the answer holds its .creds text, which no later call shows again.
func (c *Client) AddUser(ctx context.Context, base, tenant string, req UserRequest) (UserCreated, error) {
	var u UserCreated
	err := c.Post(ctx, base, usersPath(tenant), req, &u)
	return u, err
}

// RevokeUser revokes tenant's user name mesh-wide (DELETE
// /admin/v1/tenants/{t}/users/{user}): its live connections are closed
// and its credentials refused.
func (c *Client) RevokeUser(ctx context.Context, base, tenant, name string) error {
	return c.Send(ctx, http.MethodDelete, base, usersPath(tenant)+"/"+url.PathEscape(name), nil, nil)
}
