package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/stratamesh/strata/tenancy"
)

// This file is the store's side of the tenants' NATS credentials:
// accounts, users and revocations (tenancy/account.go). Signing is the
// caller's (tenancy/creds); the store keeps the records.

// Account returns tenant's visible account from the cache.
func (s *Store) Account(tenant string) (a tenancy.Account, ok bool) {
	s.View(func(st *tenancy.State) { a, ok = st.Account(tenant) })
	return
}

// Accounts returns the visible accounts from the cache.
func (s *Store) Accounts() (out []tenancy.Account) {
	s.View(func(st *tenancy.State) { out = st.Accounts() })
	return
}

// User returns tenant's visible user name from the cache.
func (s *Store) User(tenant, name string) (u tenancy.User, ok bool) {
	s.View(func(st *tenancy.State) { u, ok = st.User(tenant, name) })
	return
}

// Users returns tenant's visible users from the cache.
func (s *Store) Users(tenant string) (out []tenancy.User) {
	s.View(func(st *tenancy.State) { out = st.Users(tenant) })
	return
}

// Revocations returns tenant's revocations from the cache.
func (s *Store) Revocations(tenant string) (out []tenancy.Revocation) {
	s.View(func(st *tenancy.State) { out = st.Revocations(tenant) })
	return
}

// EnsureAccount returns tenant's account: the stored one, or a (made by
// the caller, e.g. creds.NewAccount) stored now when there is none
// (created true). ErrNoTenant when the tenant does not exist.
//
// Two regions may each store an account for a tenant at the same time;
// the records then merge like any other (the later stamp wins, in every
// region), and users signed by the losing account are refused once the
// regions have converged (User.Account names the account that signed
// them; list shows them as stale).
func (s *Store) EnsureAccount(ctx context.Context, a tenancy.Account) (tenancy.Account, bool, error) {
	if _, ok := s.Tenant(a.Tenant); !ok {
		return tenancy.Account{}, false, fmt.Errorf("account of tenant %s: %w", a.Tenant, ErrNoTenant)
	}
	out, created := a, false
	_, err := s.write(ctx, tenancy.KindAccount, a.Tenant, func(cur tenancy.Record, st tenancy.HLC) (tenancy.Record, error) {
		if live(cur) {
			var have tenancy.Account
			if err := json.Unmarshal(cur.Value, &have); err == nil {
				out, created = have, false
				return tenancy.Record{}, nil
			}
		}
		out, created = a, true
		return tenancy.NewRecord(a, st)
	})
	if err != nil {
		return tenancy.Account{}, false, err
	}
	return out, created, nil
}

// ErrAccountChanged: the tenant's account is no longer the one a write
// was made for (another region's account won meanwhile).
var ErrAccountChanged = errors.New("store: the tenant's account changed")

// SetAccountJWT stores token as tenant's account JWT when the stored
// account is still the one with public key pub (ErrAccountChanged
// otherwise; tenancy.ErrNotFound when there is none).
func (s *Store) SetAccountJWT(ctx context.Context, tenant, pub, token string) error {
	_, err := s.write(ctx, tenancy.KindAccount, tenant, func(cur tenancy.Record, st tenancy.HLC) (tenancy.Record, error) {
		if !live(cur) {
			return tenancy.Record{}, fmt.Errorf("account of tenant %s: %w", tenant, tenancy.ErrNotFound)
		}
		var a tenancy.Account
		if err := json.Unmarshal(cur.Value, &a); err != nil {
			return tenancy.Record{}, err
		}
		if a.PublicKey != pub {
			return tenancy.Record{}, fmt.Errorf("account of tenant %s is %s, not %s: %w", tenant, a.PublicKey, pub, ErrAccountChanged)
		}
		if a.JWT == token {
			return tenancy.Record{}, nil
		}
		a.JWT = token
		return tenancy.NewRecord(a, st)
	})
	return err
}

// PutUser stores new user u (validated). ErrExists when the tenant has a
// live user of that name; ErrNoTenant when the tenant does not exist.
func (s *Store) PutUser(ctx context.Context, u tenancy.User) error {
	if err := u.Validate(); err != nil {
		return err
	}
	if _, ok := s.Tenant(u.Tenant); !ok {
		return fmt.Errorf("user %s: tenant %s: %w", u.Key(), u.Tenant, ErrNoTenant)
	}
	_, err := s.write(ctx, tenancy.KindUser, u.Key(), func(cur tenancy.Record, st tenancy.HLC) (tenancy.Record, error) {
		if live(cur) {
			return tenancy.Record{}, fmt.Errorf("user %s of tenant %s: %w", u.Name, u.Tenant, ErrExists)
		}
		return tenancy.NewRecord(u, st)
	})
	return err
}

// RevokeUser records the revocation rev makes of tenant's user name,
// then tombstones the user (the caller signs the account JWT again; a
// revocation written without its JWT is signed by whichever region sees
// it first). It returns the revoked user. tenancy.ErrNotFound when the
// user does not exist.
func (s *Store) RevokeUser(ctx context.Context, tenant, name string, rev func(tenancy.User) tenancy.Revocation) (tenancy.User, error) {
	u, ok := s.User(tenant, name)
	if !ok {
		return tenancy.User{}, fmt.Errorf("user %s of tenant %s: %w", name, tenant, tenancy.ErrNotFound)
	}
	r := rev(u)
	if _, err := s.write(ctx, tenancy.KindRevocation, r.Key(), func(cur tenancy.Record, st tenancy.HLC) (tenancy.Record, error) {
		if live(cur) {
			return tenancy.Record{}, nil // revoked already (a retry)
		}
		return tenancy.NewRecord(r, st)
	}); err != nil {
		return tenancy.User{}, err
	}
	if err := s.tombstone(ctx, tenancy.KindUser, u.Key()); err != nil && !errors.Is(err, tenancy.ErrNotFound) {
		return tenancy.User{}, err
	}
	return u, nil
}

// deleteCreds tombstones tenant's users, revocations and account (with
// the tenant: a tenant made again under the name gets a new account).
func (s *Store) deleteCreds(ctx context.Context, tenant string) error {
	var keys []struct {
		kind tenancy.Kind
		key  string
	}
	s.View(func(st *tenancy.State) {
		for _, r := range st.Records() {
			switch {
			case r.Deleted:
			case r.Kind == tenancy.KindAccount && r.Key == tenant,
				(r.Kind == tenancy.KindUser || r.Kind == tenancy.KindRevocation) && len(r.Key) > len(tenant) && r.Key[:len(tenant)+1] == tenant+"/":
				keys = append(keys, struct {
					kind tenancy.Kind
					key  string
				}{r.Kind, r.Key})
			}
		}
	})
	for _, k := range keys {
		if err := s.tombstone(ctx, k.kind, k.key); err != nil && !errors.Is(err, tenancy.ErrNotFound) {
			return err
		}
	}
	return nil
}
