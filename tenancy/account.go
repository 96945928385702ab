package tenancy

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Kinds of the records of NATS credentials (issue 24: the mesh is the
// NATS operator, each tenant an account, users are nkeys with JWTs
// signed by their tenant's account).
const (
	KindAccount    Kind = "account"    // key "tenant", value Account
	KindUser       Kind = "user"       // key "tenant/user", value User
	KindRevocation Kind = "revocation" // key "tenant/user public key", value Revocation
)

// Account is a tenant's NATS account: its nkey and its current account
// JWT, signed by the mesh's operator. The JWT's Name is the tenant's name
// and it lists every revoked user (Revocations): brokers verify users
// against it. Seed is the account's private nkey (it signs the tenant's
// user JWTs); it is kept in the region's etcd like the rest of the
// configuration and travels between regions only in sealed batches.
type Account struct {
	Tenant    string `json:"tenant"`
	PublicKey string `json:"public_key"` // "A…"
	Seed      string `json:"seed"`       // "SA…"
	JWT       string `json:"jwt"`
}

// Permission is a NATS allow/deny pair of subject lists; an empty Allow
// allows every subject (the broker still confines a tenant's users to the
// tenant's subjects).
type Permission struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// User is a NATS user of a tenant: what its user JWT grants. The user's
// private nkey is never stored: it is given to whoever asked for the user,
// once, in the .creds file.
type User struct {
	Tenant string `json:"tenant"`
	Name   string `json:"name"`
	// PublicKey is the user's nkey ("U…"), the JWT's subject.
	PublicKey string `json:"public_key"`
	// Account is the public key of the account that signed the JWT: when
	// it is no longer the tenant's account (two regions made one at once
	// and the other's won), the user's credentials are refused.
	Account string     `json:"account"`
	Pub     Permission `json:"pub"`
	Sub     Permission `json:"sub"`
	// Expires is the JWT's expiry, Unix seconds (0: never).
	Expires int64 `json:"expires,omitempty"`
	// Created is the Unix millisecond time of creation.
	Created int64 `json:"created"`
}

// Key is the user's record key, "tenant/name".
func (u User) Key() string { return u.Tenant + "/" + u.Name }

// Validate checks the user's names and subjects, naming the field at
// fault (pub.allow[0], …).
func (u User) Validate() error {
	var errs []error
	if err := checkName("tenant", "tenant", u.Tenant); err != nil {
		errs = append(errs, err)
	}
	if err := checkName("name", "user", u.Name); err != nil {
		errs = append(errs, err)
	}
	for _, p := range []struct {
		field string
		list  []string
	}{{"pub.allow", u.Pub.Allow}, {"pub.deny", u.Pub.Deny}, {"sub.allow", u.Sub.Allow}, {"sub.deny", u.Sub.Deny}} {
		if len(p.list) > MaxSubjects {
			errs = append(errs, fieldErr(p.field, "%d subjects: at most %d", len(p.list), MaxSubjects))
			continue
		}
		for i, s := range p.list {
			if err := CheckSubject(s); err != nil {
				errs = append(errs, fieldErr(fmt.Sprintf("%s[%d]", p.field, i), "%v", err))
			}
		}
	}
	if u.Expires < 0 {
		errs = append(errs, fieldErr("expiry", "negative expiry"))
	}
	return errors.Join(errs...)
}

// MaxSubjects bounds each of a user's allow and deny lists.
const MaxSubjects = 64

// maxSubjectLen bounds one subject of a permission.
const maxSubjectLen = 256

// CheckSubject checks a subject of a permission list (a NATS subject,
// wildcards allowed): tokens separated by ".", none empty, no
// whitespace, "*" and ">" only as whole tokens and ">" only last.
func CheckSubject(s string) error {
	if s == "" {
		return fmt.Errorf("subject is empty")
	}
	if len(s) > maxSubjectLen {
		return fmt.Errorf("subject %.32q… over %d bytes", s, maxSubjectLen)
	}
	toks := strings.Split(s, ".")
	for i, t := range toks {
		switch {
		case t == "":
			return fmt.Errorf("subject %q has an empty token", s)
		case strings.ContainsAny(t, " \t\r\n\x00"):
			return fmt.Errorf("subject %q contains whitespace", s)
		case t == ">" && i != len(toks)-1:
			return fmt.Errorf("subject %q: \">\" must be the last token", s)
		case t != "*" && t != ">" && strings.ContainsAny(t, "*>"):
			return fmt.Errorf("subject %q: wildcards must be whole tokens", s)
		}
	}
	return nil
}

// Revocation records that a user's credentials were revoked: its
// tenant's account JWT must list PublicKey in its revocations from At on.
// Revocations are only added (never changed), so two regions revoking
// different users at once both count: whichever account JWT wins, every
// region re-signs it until it lists every revocation of the tenant.
type Revocation struct {
	Tenant    string `json:"tenant"`
	User      string `json:"user"`
	PublicKey string `json:"public_key"`
	// At is the Unix second from which JWTs issued to PublicKey are
	// refused (NATS revokes the JWTs issued at or before it).
	At int64 `json:"at"`
}

// Key is the revocation's record key, "tenant/public key".
func (r Revocation) Key() string { return r.Tenant + "/" + r.PublicKey }

// checkCreds validates a live account, user or revocation record's
// value against its key.
func checkCreds(r Record) error {
	bad := fmt.Errorf("tenancy: record %s: bad %s value", r.ID(), r.Kind)
	switch r.Kind {
	case KindAccount:
		if !ValidToken(r.Key) {
			return fmt.Errorf("tenancy: record %s: bad tenant name", r.ID())
		}
		if r.Deleted {
			return nil
		}
		var a Account
		if json.Unmarshal(r.Value, &a) != nil || a.Tenant != r.Key || !strings.HasPrefix(a.PublicKey, "A") || a.JWT == "" {
			return bad
		}
	case KindUser, KindRevocation:
		t, rest, ok := strings.Cut(r.Key, "/")
		if !ok || !ValidToken(t) || rest == "" || strings.Contains(rest, "/") {
			return fmt.Errorf("tenancy: record %s: want key tenant/name", r.ID())
		}
		if r.Deleted {
			return nil
		}
		if r.Kind == KindUser {
			var u User
			if json.Unmarshal(r.Value, &u) != nil || u.Key() != r.Key || !strings.HasPrefix(u.PublicKey, "U") {
				return bad
			}
			return nil
		}
		var v Revocation
		if json.Unmarshal(r.Value, &v) != nil || v.Key() != r.Key || !strings.HasPrefix(v.PublicKey, "U") {
			return bad
		}
	}
	return nil
}

// Account returns tenant's account when it and its tenant are live.
func (s *State) Account(tenant string) (Account, bool) {
	if _, ok := s.Tenant(tenant); !ok {
		return Account{}, false
	}
	r, ok := s.Get(KindAccount, tenant)
	if !ok || r.Deleted {
		return Account{}, false
	}
	var a Account
	if json.Unmarshal(r.Value, &a) != nil {
		return Account{}, false
	}
	return a, true
}

// Accounts returns the visible accounts, sorted by tenant.
func (s *State) Accounts() []Account {
	var out []Account
	for _, t := range s.Tenants() {
		if a, ok := s.Account(t.Name); ok {
			out = append(out, a)
		}
	}
	return out
}

// User returns tenant's user name when it and its tenant are live.
func (s *State) User(tenant, name string) (User, bool) {
	if _, ok := s.Tenant(tenant); !ok {
		return User{}, false
	}
	r, ok := s.Get(KindUser, tenant+"/"+name)
	if !ok || r.Deleted {
		return User{}, false
	}
	var u User
	if json.Unmarshal(r.Value, &u) != nil {
		return User{}, false
	}
	return u, true
}

// Users returns tenant's visible users, sorted by name.
func (s *State) Users(tenant string) []User {
	return collect(s, KindUser, tenant, func(key string) (User, bool) {
		_, name, _ := strings.Cut(key, "/")
		return s.User(tenant, name)
	})
}

// Revocations returns tenant's revocations (when the tenant is live),
// sorted by user public key.
func (s *State) Revocations(tenant string) []Revocation {
	if _, ok := s.Tenant(tenant); !ok {
		return nil
	}
	return collect(s, KindRevocation, tenant, func(key string) (Revocation, bool) {
		r, _ := s.Get(KindRevocation, key)
		var v Revocation
		if r.Deleted || json.Unmarshal(r.Value, &v) != nil {
			return v, false
		}
		return v, true
	})
}

// collect is the live values of kind under "tenant/", sorted by key.
func collect[T any](s *State, kind Kind, tenant string, get func(key string) (T, bool)) []T {
	var keys []string
	for id := range s.recs {
		if k, ok := strings.CutPrefix(id, string(kind)+"/"+tenant+"/"); ok && k != "" {
			keys = append(keys, tenant+"/"+k)
		}
	}
	sort.Strings(keys)
	var out []T
	for _, k := range keys {
		if v, ok := get(k); ok {
			out = append(out, v)
		}
	}
	return out
}
