package creds

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/stratamesh/strata/tenancy"
)

// SystemAccountName is the system account JWT's Name.
const SystemAccountName = "strata-system"

// Errors.
var (
	// ErrSeed: a seed file holds no seed of the expected kind.
	ErrSeed = errors.New("creds: not a seed of the expected kind")
	// ErrAccount: an account record whose keys do not match.
	ErrAccount = errors.New("creds: bad account")
)

// ParseSeed reads an nkey seed of kind prefix (nkeys.PrefixByteOperator,
// PrefixByteAccount, …) from a seed file's contents: the seed alone
// ("SO…", "SA…", surrounding whitespace allowed) or a decorated one
// ("-----BEGIN … NKEY SEED-----").
func ParseSeed(b []byte, prefix nkeys.PrefixByte) (nkeys.KeyPair, error) {
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		kp, err = nkeys.FromSeed(bytes.TrimSpace(b))
	}
	if err != nil {
		return nil, fmt.Errorf("%w (%s): %v", ErrSeed, prefix, err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w (%s): %v", ErrSeed, prefix, err)
	}
	if got := nkeys.Prefix(pub); got != prefix {
		return nil, fmt.Errorf("%w: want a seed of kind %s, got %s", ErrSeed, prefix, got)
	}
	return kp, nil
}

// NewSeed makes a new seed of kind prefix ("SO…" for an operator, "SA…"
// for an account), for a seed file.
func NewSeed(prefix nkeys.PrefixByte) ([]byte, error) {
	kp, err := nkeys.CreatePair(prefix)
	if err != nil {
		return nil, err
	}
	return kp.Seed()
}

// PublicKey is kp's public key ("" when kp has none, which nkeys'
// pairs made from seeds always have).
func PublicKey(kp nkeys.KeyPair) string {
	pub, _ := kp.PublicKey()
	return pub
}

// NewAccount makes tenant's account: a new account nkey and its JWT
// signed by operator, with no revocations.
func NewAccount(operator nkeys.KeyPair, tenant string) (tenancy.Account, error) {
	kp, err := nkeys.CreateAccount()
	if err != nil {
		return tenancy.Account{}, err
	}
	seed, err := kp.Seed()
	if err != nil {
		return tenancy.Account{}, err
	}
	a := tenancy.Account{Tenant: tenant, PublicKey: PublicKey(kp), Seed: string(seed)}
	if a.JWT, err = SignAccount(operator, a, nil); err != nil {
		return tenancy.Account{}, err
	}
	return a, nil
}

// SignAccount is a's account JWT signed by operator: Name the tenant,
// Revocations every one of revs.
func SignAccount(operator nkeys.KeyPair, a tenancy.Account, revs []tenancy.Revocation) (string, error) {
	if !nkeys.IsValidPublicAccountKey(a.PublicKey) {
		return "", fmt.Errorf("%w: tenant %s: public key %q is not an account key", ErrAccount, a.Tenant, a.PublicKey)
	}
	ac := jwt.NewAccountClaims(a.PublicKey)
	ac.Name = a.Tenant
	for _, r := range revs {
		ac.RevokeAt(r.PublicKey, time.Unix(r.At, 0))
	}
	return ac.Encode(operator)
}

// NeedsSigning reports whether a's JWT must be signed again: it does not
// decode, is not signed by operatorPub (the operator changed), is not
// a's key, or lacks one of revs (a revocation made in another region at
// the same time as this JWT).
func NeedsSigning(operatorPub string, a tenancy.Account, revs []tenancy.Revocation) bool {
	ac, err := jwt.DecodeAccountClaims(a.JWT)
	if err != nil || ac.Issuer != operatorPub || ac.Subject != a.PublicKey || ac.Name != a.Tenant {
		return true
	}
	for _, r := range revs {
		if at, ok := ac.Revocations[r.PublicKey]; !ok || at < r.At {
			return true
		}
	}
	return false
}

// UserSpec is what a new user may do.
type UserSpec struct {
	Name     string
	Pub, Sub tenancy.Permission
	// Expiry is how long the user's JWT is valid (0: no expiry).
	Expiry time.Duration
}

// NewUser makes a user of account a: a new user nkey and its user JWT
// signed by the account, with spec's permissions and expiry from now. It
// returns the user's record and the standard .creds text (the JWT and
// the user's seed): the only copy of the seed.
func NewUser(a tenancy.Account, spec UserSpec, now time.Time) (tenancy.User, []byte, error) {
	akp, err := nkeys.FromSeed([]byte(a.Seed))
	if err != nil || PublicKey(akp) != a.PublicKey {
		return tenancy.User{}, nil, fmt.Errorf("%w: tenant %s: the seed is not the account's", ErrAccount, a.Tenant)
	}
	ukp, err := nkeys.CreateUser()
	if err != nil {
		return tenancy.User{}, nil, err
	}
	u := tenancy.User{Tenant: a.Tenant, Name: spec.Name, PublicKey: PublicKey(ukp), Account: a.PublicKey,
		Pub: spec.Pub, Sub: spec.Sub, Created: now.UnixMilli()}
	if spec.Expiry > 0 {
		u.Expires = now.Add(spec.Expiry).Unix()
	}
	if err := u.Validate(); err != nil {
		return tenancy.User{}, nil, err
	}
	uc := jwt.NewUserClaims(u.PublicKey)
	uc.Name = spec.Name
	uc.IssuerAccount = "" // signed by the account's own key
	uc.Expires = u.Expires
	uc.Pub.Allow = append(jwt.StringList(nil), spec.Pub.Allow...)
	uc.Pub.Deny = append(jwt.StringList(nil), spec.Pub.Deny...)
	uc.Sub.Allow = append(jwt.StringList(nil), spec.Sub.Allow...)
	uc.Sub.Deny = append(jwt.StringList(nil), spec.Sub.Deny...)
	token, err := uc.Encode(akp)
	if err != nil {
		return tenancy.User{}, nil, err
	}
	seed, err := ukp.Seed()
	if err != nil {
		return tenancy.User{}, nil, err
	}
	text, err := jwt.FormatUserConfig(token, seed)
	if err != nil {
		return tenancy.User{}, nil, err
	}
	return u, text, nil
}

// Revoke is the revocation of u at now (never before the JWT was issued:
// NATS refuses JWTs issued at or before the revocation's second).
func Revoke(u tenancy.User, now time.Time) tenancy.Revocation {
	at := max(now.Unix(), u.Created/1000)
	return tenancy.Revocation{Tenant: u.Tenant, User: u.Name, PublicKey: u.PublicKey, At: at}
}

// System is the mesh's system account: what the mesh's own connections
// (replication and configuration links between regions) and the
// superuser's tools log in as. It is not a tenant.
type System struct {
	// Operator signs account JWTs; System signs the system account's
	// users.
	Operator, Account nkeys.KeyPair
	// JWT is the system account's JWT, signed by Operator.
	JWT string
}

// NewSystem signs the system account's JWT.
func NewSystem(operator, account nkeys.KeyPair) (*System, error) {
	pub := PublicKey(account)
	if !nkeys.IsValidPublicAccountKey(pub) || !nkeys.IsValidPublicOperatorKey(PublicKey(operator)) {
		return nil, fmt.Errorf("%w: want an operator and an account key", ErrAccount)
	}
	ac := jwt.NewAccountClaims(pub)
	ac.Name = SystemAccountName
	token, err := ac.Encode(operator)
	if err != nil {
		return nil, err
	}
	return &System{Operator: operator, Account: account, JWT: token}, nil
}

// OperatorKey is the operator's public key ("O…").
func (s *System) OperatorKey() string { return PublicKey(s.Operator) }

// AccountKey is the system account's public key.
func (s *System) AccountKey() string { return PublicKey(s.Account) }

// MeshUser makes a user of the system account named name, with no
// permission limits and an expiry of expiry from now (0: none): the user
// JWT and the user's key, which signs the broker's nonce.
func (s *System) MeshUser(name string, expiry time.Duration, now time.Time) (string, nkeys.KeyPair, error) {
	ukp, err := nkeys.CreateUser()
	if err != nil {
		return "", nil, err
	}
	uc := jwt.NewUserClaims(PublicKey(ukp))
	uc.Name = name
	if expiry > 0 {
		uc.Expires = now.Add(expiry).Unix()
	}
	token, err := uc.Encode(s.Account)
	if err != nil {
		return "", nil, err
	}
	return token, ukp, nil
}

// MeshCreds is MeshUser as the text of a .creds file.
func (s *System) MeshCreds(name string, expiry time.Duration, now time.Time) ([]byte, error) {
	token, kp, err := s.MeshUser(name, expiry, now)
	if err != nil {
		return nil, err
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, err
	}
	return jwt.FormatUserConfig(token, seed)
}
