package region

import (
	"context"
	"errors"
	"time"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/tenancy/creds"
	"github.com/stratamesh/strata/tenancy/store"
)

// usersAdmin is admin.UsersBackend over the region's configuration: a
// tenant's NATS users. With auth.nats off every call answers
// nats_auth_off.
type usersAdmin struct{ n *Node }

func (a usersAdmin) st() *store.Store { return a.n.cp.store }

// check answers the error of a call about tenant: NATS auth off, or no
// such tenant.
func (a usersAdmin) check(tenant string) error {
	if a.n.nauth == nil {
		return admin.Errorf(admin.CodeNATSAuthOff, "", "the mesh's NATS accounts are off: the topology has no auth.nats, so NATS clients need no credentials")
	}
	if _, ok := a.st().Tenant(tenant); !ok {
		return admin.Errorf(admin.CodeTenantNotFound, "t", "the mesh has no tenant %s", tenant)
	}
	return nil
}

func userInfo(u tenancy.User, acct tenancy.Account, haveAcct bool) admin.UserInfo {
	out := admin.UserInfo{Tenant: u.Tenant, Name: u.Name, PublicKey: u.PublicKey, Account: u.Account,
		Pub: u.Pub, Sub: u.Sub, Created: time.UnixMilli(u.Created).UTC(), Stale: !haveAcct || acct.PublicKey != u.Account}
	if u.Expires > 0 {
		t := time.Unix(u.Expires, 0).UTC()
		out.Expires = &t
	}
	return out
}

func (a usersAdmin) Users(tenant string) ([]admin.UserInfo, error) {
	if err := a.check(tenant); err != nil {
		return nil, err
	}
	acct, ok := a.st().Account(tenant)
	var out []admin.UserInfo
	for _, u := range a.st().Users(tenant) {
		out = append(out, userInfo(u, acct, ok))
	}
	return out, nil
}

func (a usersAdmin) AddUser(ctx context.Context, tenant string, req admin.UserRequest) (admin.UserCreated, error) {
	if err := a.check(tenant); err != nil {
		return admin.UserCreated{}, err
	}
	if _, ok := a.st().User(tenant, req.Name); ok {
		return admin.UserCreated{}, admin.Errorf(admin.CodeAlreadyExists, "name", "tenant %s has a user %s: revoke it first, or choose another name", tenant, req.Name)
	}
	acct, err := a.n.nauth.ensureAccount(ctx, a.st(), tenant)
	if err != nil {
		return admin.UserCreated{}, a.error(err, tenant, req.Name)
	}
	u, text, err := creds.NewUser(acct, creds.UserSpec{Name: req.Name, Pub: req.Pub, Sub: req.Sub, Expiry: time.Duration(req.Expiry)}, time.Now())
	if err != nil {
		return admin.UserCreated{}, a.error(err, tenant, req.Name)
	}
	if err := a.st().PutUser(ctx, u); err != nil {
		return admin.UserCreated{}, a.error(err, tenant, req.Name)
	}
	return admin.UserCreated{UserInfo: userInfo(u, acct, true), Creds: string(text)}, nil
}

// RevokeUser records the revocation and tombstones the user, then signs
// the account JWT again at once (the other brokers and regions would
// too, from the revocation record, should this fail).
func (a usersAdmin) RevokeUser(ctx context.Context, tenant, name string) error {
	if err := a.check(tenant); err != nil {
		return err
	}
	if _, err := a.st().RevokeUser(ctx, tenant, name, func(u tenancy.User) tenancy.Revocation { return creds.Revoke(u, time.Now()) }); err != nil {
		return a.error(err, tenant, name)
	}
	if acct, ok := a.st().Account(tenant); ok {
		if err := a.n.nauth.resignOne(ctx, a.st(), acct); err != nil && !errors.Is(err, store.ErrAccountChanged) {
			a.n.logger.Warn("signing the account JWT after a revocation (the brokers retry)", "tenant", tenant, "err", err)
		}
	}
	return nil
}

func (a usersAdmin) error(err error, tenant, user string) error {
	var fe *tenancy.FieldError
	switch {
	case errors.As(err, &fe):
		return admin.FieldErrorOf(err, "")
	case errors.Is(err, store.ErrExists):
		return admin.Errorf(admin.CodeAlreadyExists, "name", "tenant %s has a user %s: revoke it first, or choose another name", tenant, user)
	case errors.Is(err, store.ErrNoTenant):
		return admin.Errorf(admin.CodeTenantNotFound, "t", "the mesh has no tenant %s", tenant)
	case errors.Is(err, tenancy.ErrNotFound):
		return admin.Errorf(admin.CodeUserNotFound, "user", "tenant %s has no user %s", tenant, user)
	}
	return tenancyAdmin{a.n}.storeError(err, tenancy.NSName{Tenant: tenant})
}
