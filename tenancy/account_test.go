package tenancy

import (
	"strings"
	"testing"
)

func mustRecord(t *testing.T, v any, st HLC) Record {
	t.Helper()
	r, err := NewRecord(v, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Check(); err != nil {
		t.Fatalf("%s: %v", r.ID(), err)
	}
	return r
}

func at(wall int64, region string) HLC { return HLC{Wall: wall, Region: region} }

// TestAccountMerge: two regions make an account for one tenant at once;
// whatever order the records arrive in, every region keeps the same one
// (the later stamp), and users signed by the other account are told
// apart by their Account field.
func TestAccountMerge(t *testing.T) {
	ten := mustRecord(t, Tenant{Name: "pay"}, at(1, "r1"))
	a1 := mustRecord(t, Account{Tenant: "pay", PublicKey: "AONE", Seed: "SA1", JWT: "j1"}, at(10, "r1"))
	a2 := mustRecord(t, Account{Tenant: "pay", PublicKey: "ATWO", Seed: "SA2", JWT: "j2"}, at(10, "r2"))
	for _, order := range [][]Record{{ten, a1, a2}, {a2, ten, a1}, {a1, a2, a1, ten}} {
		s := NewState()
		for _, r := range order {
			s.Merge(r)
		}
		a, ok := s.Account("pay")
		if !ok || a.PublicKey != "ATWO" {
			t.Fatalf("order %v: account %+v %v, want ATWO (r2 wins the tie on region)", order, a, ok)
		}
		if n := len(s.Accounts()); n != 1 {
			t.Fatalf("%d accounts", n)
		}
	}
}

// TestUserMerge: a user's tombstone wins over the live record it
// follows and an older write never brings it back; a user and an account
// are hidden while their tenant is deleted, and come back with it.
func TestUserMerge(t *testing.T) {
	s := NewState()
	s.Merge(mustRecord(t, Tenant{Name: "pay"}, at(1, "r1")))
	u := User{Tenant: "pay", Name: "alice", PublicKey: "UALICE", Account: "AONE", Pub: Permission{Allow: []string{"pay.>"}}, Created: 5}
	live := mustRecord(t, u, at(5, "r1"))
	s.Merge(live)
	s.Merge(mustRecord(t, User{Tenant: "pay", Name: "bob", PublicKey: "UBOB", Account: "AONE"}, at(6, "r2")))
	s.Merge(mustRecord(t, Account{Tenant: "pay", PublicKey: "AONE", Seed: "S", JWT: "j"}, at(4, "r1")))
	if got := s.Users("pay"); len(got) != 2 || got[0].Name != "alice" || got[0].Pub.Allow[0] != "pay.>" || got[1].Name != "bob" {
		t.Fatalf("users %+v", got)
	}
	del := Tombstone(KindUser, "pay/alice", at(7, "r2"))
	if err := del.Check(); err != nil {
		t.Fatal(err)
	}
	if !s.Merge(del) || s.Merge(live) {
		t.Fatal("the tombstone did not win, or the older live record came back")
	}
	if _, ok := s.User("pay", "alice"); ok {
		t.Fatal("alice is still live")
	}
	s.Merge(mustRecord(t, Revocation{Tenant: "pay", User: "alice", PublicKey: "UALICE", At: 7}, at(7, "r2")))
	if r := s.Revocations("pay"); len(r) != 1 || r[0].PublicKey != "UALICE" {
		t.Fatalf("revocations %+v", r)
	}
	// Users of another tenant whose name has pay as a prefix are not pay's.
	s.Merge(mustRecord(t, Tenant{Name: "payroll"}, at(1, "r1")))
	s.Merge(mustRecord(t, User{Tenant: "payroll", Name: "carol", PublicKey: "UCAROL", Account: "AX"}, at(8, "r1")))
	if got := s.Users("pay"); len(got) != 1 || got[0].Name != "bob" {
		t.Fatalf("pay's users %+v", got)
	}
	s.Merge(Tombstone(KindTenant, "pay", at(9, "r1")))
	if _, ok := s.Account("pay"); ok || len(s.Users("pay")) != 0 || len(s.Revocations("pay")) != 0 {
		t.Fatal("a deleted tenant's account, users or revocations are visible")
	}
	s.Merge(mustRecord(t, Tenant{Name: "pay"}, at(10, "r1")))
	if _, ok := s.Account("pay"); !ok {
		t.Fatal("the account record is not visible with its tenant back (the store tombstones it with the tenant)")
	}
}

// TestCredsRecordCheck: records of the new kinds from another region are
// refused when their key and value disagree or the keys are of the wrong
// kind.
func TestCredsRecordCheck(t *testing.T) {
	st := at(3, "r1")
	bad := []Record{
		{Kind: KindAccount, Key: "pay", Stamp: st, Value: []byte(`{"tenant":"other","public_key":"A1","jwt":"j"}`)},
		{Kind: KindAccount, Key: "pay", Stamp: st, Value: []byte(`{"tenant":"pay","public_key":"U1","jwt":"j"}`)},
		{Kind: KindAccount, Key: "pay", Stamp: st, Value: []byte(`{"tenant":"pay","public_key":"A1"}`)},
		{Kind: KindAccount, Key: "p.y", Stamp: st, Deleted: true},
		{Kind: KindUser, Key: "pay", Stamp: st, Deleted: true},
		{Kind: KindUser, Key: "pay/a/b", Stamp: st, Deleted: true},
		{Kind: KindUser, Key: "pay/al", Stamp: st, Value: []byte(`{"tenant":"pay","name":"bo","public_key":"U1"}`)},
		{Kind: KindUser, Key: "pay/al", Stamp: st, Value: []byte(`{"tenant":"pay","name":"al","public_key":"A1"}`)},
		{Kind: KindUser, Key: "pay/al", Stamp: st, Value: []byte(`[]`)},
		{Kind: KindRevocation, Key: "pay/U1", Stamp: st, Value: []byte(`{"tenant":"pay","public_key":"U2"}`)},
	}
	for _, r := range bad {
		if err := r.Check(); err == nil {
			t.Errorf("%s %s accepted", r.ID(), r.Value)
		}
	}
	good := Record{Kind: KindRevocation, Key: "pay/U1", Stamp: st, Value: []byte(`{"tenant":"pay","user":"al","public_key":"U1","at":3}`)}
	if err := good.Check(); err != nil {
		t.Error(err)
	}
}

func TestUserValidate(t *testing.T) {
	ok := User{Tenant: "pay", Name: "alice", Pub: Permission{Allow: []string{"pay.orders.>", "$JS.API.>"}, Deny: []string{"pay.*.secret"}}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		u     User
		field string
	}{
		{User{Tenant: "pay", Name: "a.b"}, "name"},
		{User{Tenant: "p y", Name: "a"}, "tenant"},
		{User{Tenant: "pay", Name: "a", Pub: Permission{Allow: []string{"pay.>.x"}}}, "pub.allow[0]"},
		{User{Tenant: "pay", Name: "a", Sub: Permission{Deny: []string{"ok", "pay..x"}}}, "sub.deny[1]"},
		{User{Tenant: "pay", Name: "a", Sub: Permission{Allow: []string{"pay.a*"}}}, "sub.allow[0]"},
		{User{Tenant: "pay", Name: "a", Pub: Permission{Deny: []string{"pay. x"}}}, "pub.deny[0]"},
		{User{Tenant: "pay", Name: "a", Pub: Permission{Allow: make([]string, MaxSubjects+1)}}, "pub.allow"},
		{User{Tenant: "pay", Name: strings.Repeat("n", MaxNameLen+1)}, "name"},
	} {
		err := c.u.Validate()
		fe, isFE := firstFieldError(err)
		if !isFE || fe.Field != c.field {
			t.Errorf("%+v: %v, want an error about %s", c.u, err, c.field)
		}
	}
}

func firstFieldError(err error) (*FieldError, bool) {
	switch e := err.(type) {
	case *FieldError:
		return e, true
	case interface{ Unwrap() []error }:
		for _, x := range e.Unwrap() {
			if fe, ok := firstFieldError(x); ok {
				return fe, true
			}
		}
	}
	return nil, false
}
