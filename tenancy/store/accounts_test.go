package store

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stratamesh/strata/tenancy"
)

func acct(tenant, pub string) tenancy.Account {
	return tenancy.Account{Tenant: tenant, PublicKey: pub, Seed: "S" + pub, JWT: "jwt-" + pub}
}

func user(tenant, name, pub, account string) tenancy.User {
	return tenancy.User{Tenant: tenant, Name: name, PublicKey: pub, Account: account, Created: 1000}
}

// TestAccountsReplicate: an account and users made in one region reach
// the others; revocations made in two regions at once both stay (they
// are records of their own, not a field of the account that one region's
// write would overwrite); a tenant's delete takes its account, users and
// revocations with it.
func TestAccountsReplicate(t *testing.T) {
	m := newMesh(t)
	ctx := context.Background()
	a, b := m.stores["A"], m.stores["B"]
	if _, _, err := a.EnsureAccount(ctx, acct("pay", "A1")); !errors.Is(err, ErrNoTenant) {
		t.Fatalf("an account of no tenant: %v", err)
	}
	if _, err := a.PutTenant(ctx, tenancy.Tenant{Name: "pay"}); err != nil {
		t.Fatal(err)
	}
	got, created, err := a.EnsureAccount(ctx, acct("pay", "A1"))
	if err != nil || !created || got.PublicKey != "A1" {
		t.Fatalf("EnsureAccount: %+v %v %v", got, created, err)
	}
	if got, created, err = a.EnsureAccount(ctx, acct("pay", "A2")); err != nil || created || got.PublicKey != "A1" {
		t.Fatalf("a second EnsureAccount: %+v %v %v", got, created, err)
	}
	for _, u := range []tenancy.User{user("pay", "al", "UAL", "A1"), user("pay", "bo", "UBO", "A1")} {
		if err := a.PutUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.PutUser(ctx, user("pay", "al", "UAL2", "A1")); !errors.Is(err, ErrExists) {
		t.Fatalf("a second user al: %v", err)
	}
	if err := a.PutUser(ctx, user("nobody", "al", "UAL", "A1")); !errors.Is(err, ErrNoTenant) {
		t.Fatalf("a user of no tenant: %v", err)
	}
	if err := a.PutUser(ctx, user("pay", "a.b", "UAB", "A1")); err == nil {
		t.Fatal("a bad user name accepted")
	}
	m.converged(t)
	if u := m.stores["C"].Users("pay"); len(u) != 2 {
		t.Fatalf("C's users: %+v", u)
	}

	// Concurrent revocations in A and B.
	var wg sync.WaitGroup
	for r, name := range map[string]string{"A": "al", "B": "bo"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.stores[r].RevokeUser(ctx, "pay", name, func(u tenancy.User) tenancy.Revocation {
				return tenancy.Revocation{Tenant: u.Tenant, User: u.Name, PublicKey: u.PublicKey, At: 5}
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	m.converged(t)
	for _, r := range regions {
		if revs, users := m.stores[r].Revocations("pay"), m.stores[r].Users("pay"); len(revs) != 2 || len(users) != 0 {
			t.Fatalf("%s: revocations %+v, users %+v", r, revs, users)
		}
	}
	if _, err := b.RevokeUser(ctx, "pay", "al", nil); !errors.Is(err, tenancy.ErrNotFound) {
		t.Fatalf("revoking a revoked user: %v", err)
	}

	// The JWT is replaced only for the account it was signed for.
	if err := b.SetAccountJWT(ctx, "pay", "A1", "jwt-2"); err != nil {
		t.Fatal(err)
	}
	if err := b.SetAccountJWT(ctx, "pay", "A9", "jwt-3"); !errors.Is(err, ErrAccountChanged) {
		t.Fatalf("a JWT for another account: %v", err)
	}
	m.converged(t)
	if got, _ := m.stores["C"].Account("pay"); got.JWT != "jwt-2" {
		t.Fatalf("C's account JWT %q", got.JWT)
	}

	if err := a.PutUser(ctx, user("pay", "cy", "UCY", "A1")); err != nil {
		t.Fatal(err)
	}
	// (A user made in one region while its tenant is deleted in another
	// stays hidden with the tenant; were the tenant made again it would
	// be stale: signed by the old account, refused by every broker.)
	waitFor(t, func() bool { _, ok := b.User("pay", "cy"); return ok })
	if err := b.DeleteTenant(ctx, "pay", false); err != nil {
		t.Fatal(err)
	}
	for _, r := range m.converged(t) {
		if !r.Deleted {
			t.Fatalf("%s survived its tenant's delete", r.ID())
		}
	}
	if _, err := a.PutTenant(ctx, tenancy.Tenant{Name: "pay"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Account("pay"); ok {
		t.Fatal("a tenant made again inherited the old account")
	}
}
