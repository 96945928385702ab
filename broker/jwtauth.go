package broker

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/stratamesh/strata/tenancy"
)

// AccountResolver gives an account's current JWT (signed by the mesh's
// operator) by the account's public key; ok is false for an unknown
// account. Region wiring backs it with the tenancy store's account
// records, replicated between regions like other configuration. It must
// be safe for concurrent use and must not block.
type AccountResolver interface {
	AccountJWT(accountPub string) (string, bool)
}

// JWTAuth is NATS decentralized auth (NATS protocol: INFO nonce, CONNECT
// jwt + sig): the mesh is the operator, each tenant an account whose JWT
// the operator signed, each user an nkey with a user JWT its account (or
// one of the account's signing keys) signed. A CONNECT is accepted when
//   - the user JWT decodes, its signature is its issuer's, and it is
//     valid now (not expired, not before its start),
//   - the issuing account's JWT (from Accounts) decodes, was signed by one
//     of Operators, is valid now, and the account signed the user JWT,
//   - the account has not revoked the user (jwt.AccountClaims.Revocations,
//     as of the user JWT's issue time),
//   - and, unless the user JWT is a bearer token, Sig is the user nkey's
//     signature of the nonce this broker sent.
//
// The connection's Identity.Account is the account JWT's name (the tenant)
// — or "" for SystemAccount's users — and its permissions are the user
// JWT's pub/sub allow/deny lists and response permission. A connection
// without a JWT is refused. Safe for concurrent use.
type JWTAuth struct {
	// Operators are the trusted operator public keys (nkeys "O…").
	Operators []string
	// SystemAccount is the public key of the mesh's system account, whose
	// users (the brokers' own links, the superuser's tools) are not
	// confined to a tenant.
	SystemAccount string
	// Accounts resolves account JWTs. Required.
	Accounts AccountResolver
	// Now is the clock for expiry checks; nil is time.Now.
	Now func() time.Time

	// decoded caches account JWTs already decoded and checked against
	// Operators (by the token's text, so a re-signed account is decoded
	// afresh): a connect then costs one user-JWT decode and one nonce
	// check, not an account decode and its signature check too.
	mu      sync.Mutex
	decoded map[string]*jwt.AccountClaims
}

// maxDecodedAccounts bounds JWTAuth's cache of decoded account JWTs; it is
// emptied when full.
const maxDecodedAccounts = 4096

// Refusals of JWTAuth; each is wrapped with the detail (which key, which
// time) and only logged: the client is told 'Authorization Violation'.
var (
	ErrNoJWT          = errors.New("broker: CONNECT carries no user JWT")
	ErrBadJWT         = errors.New("broker: user JWT is not valid")
	ErrUnknownAccount = errors.New("broker: account is not known")
	ErrUntrusted      = errors.New("broker: account JWT is not signed by a trusted operator")
	ErrExpired        = errors.New("broker: credentials expired")
	ErrRevoked        = errors.New("broker: user is revoked by its account")
	ErrBadSignature   = errors.New("broker: nonce signature does not verify")
)

// NeedsNonce implements NonceAuthenticator.
func (a *JWTAuth) NeedsNonce() bool { return true }

func (a *JWTAuth) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Authenticate implements Authenticator.
func (a *JWTAuth) Authenticate(ci ConnectInfo) (Identity, error) {
	if ci.JWT == "" {
		return Identity{}, ErrNoJWT
	}
	now := a.now()
	uc, err := jwt.DecodeUserClaims(ci.JWT)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrBadJWT, err)
	}
	if err := claimsValidAt(uc.Claims(), now); err != nil {
		return Identity{}, fmt.Errorf("user %s: %w", uc.Subject, err)
	}
	vr := jwt.CreateValidationResults()
	uc.Validate(vr)
	if vr.IsBlocking(false) {
		return Identity{}, fmt.Errorf("%w: user %s: %v", ErrBadJWT, uc.Subject, vr.Errors())
	}
	acctPub := uc.Issuer
	if uc.IssuerAccount != "" {
		acctPub = uc.IssuerAccount
	}
	ac, err := a.account(acctPub, now)
	if err != nil {
		return Identity{}, err
	}
	if !ac.DidSign(uc) {
		return Identity{}, fmt.Errorf("%w: user %s was not signed by account %s or its signing keys", ErrBadJWT, uc.Subject, acctPub)
	}
	if ac.IsClaimRevoked(uc) {
		return Identity{}, fmt.Errorf("%w: user %s of account %s", ErrRevoked, uc.Subject, ac.Name)
	}
	if !uc.IsBearerToken() {
		if err := verifyNonce(uc.Subject, ci.Nonce, ci.Sig); err != nil {
			return Identity{}, err
		}
	}
	id := Identity{User: uc.Subject, Perms: permissionsOf(uc)}
	if acctPub != a.SystemAccount {
		if !tenancy.ValidToken(ac.Name) {
			return Identity{}, fmt.Errorf("%w: account %s is named %q, not a tenant name", ErrUnknownAccount, acctPub, ac.Name)
		}
		id.Account = ac.Name
	}
	if uc.Expires > 0 {
		id.Expires = time.Unix(uc.Expires, 0)
	}
	if ac.Expires > 0 && (id.Expires.IsZero() || ac.Expires < id.Expires.Unix()) {
		id.Expires = time.Unix(ac.Expires, 0)
	}
	if uc.Limits.Subs > 0 {
		id.MaxSubs = int(uc.Limits.Subs)
	}
	if uc.Limits.Payload > 0 {
		id.MaxPayload = int(uc.Limits.Payload)
	}
	return id, nil
}

// account resolves and checks the account JWT of acctPub.
func (a *JWTAuth) account(acctPub string, now time.Time) (*jwt.AccountClaims, error) {
	if !nkeys.IsValidPublicAccountKey(acctPub) {
		return nil, fmt.Errorf("%w: %q is not an account public key", ErrBadJWT, acctPub)
	}
	if a.Accounts == nil {
		return nil, fmt.Errorf("%w: %s (no account resolver)", ErrUnknownAccount, acctPub)
	}
	tok, ok := a.Accounts.AccountJWT(acctPub)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownAccount, acctPub)
	}
	ac, err := a.decodeAccount(tok)
	if err != nil {
		return nil, fmt.Errorf("%w: account %s: %v", ErrUntrusted, acctPub, err)
	}
	if ac.Subject != acctPub {
		return nil, fmt.Errorf("%w: the JWT held for account %s is account %s's", ErrUntrusted, acctPub, ac.Subject)
	}
	if err := claimsValidAt(ac.Claims(), now); err != nil {
		return nil, fmt.Errorf("account %s: %w", acctPub, err)
	}
	return ac, nil
}

// decodeAccount decodes an account JWT and checks that one of Operators
// signed it, once per token text (cached). The claims returned are shared:
// callers only read them.
func (a *JWTAuth) decodeAccount(tok string) (*jwt.AccountClaims, error) {
	a.mu.Lock()
	ac := a.decoded[tok]
	a.mu.Unlock()
	if ac != nil {
		return ac, nil
	}
	ac, err := jwt.DecodeAccountClaims(tok)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(a.Operators, ac.Issuer) {
		return nil, fmt.Errorf("signed by %s, not a trusted operator", ac.Issuer)
	}
	a.mu.Lock()
	if a.decoded == nil || len(a.decoded) >= maxDecodedAccounts {
		a.decoded = map[string]*jwt.AccountClaims{}
	}
	a.decoded[tok] = ac
	a.mu.Unlock()
	return ac, nil
}

// claimsValidAt checks a JWT's time window (exp, nbf) against now; the
// library's own check reads the wall clock, this one the injected clock.
func claimsValidAt(c *jwt.ClaimsData, now time.Time) error {
	if c.Expires > 0 && now.Unix() >= c.Expires {
		return fmt.Errorf("%w at %s", ErrExpired, time.Unix(c.Expires, 0).UTC().Format(time.RFC3339))
	}
	if c.NotBefore > 0 && now.Unix() < c.NotBefore {
		return fmt.Errorf("%w: not valid before %s", ErrBadJWT, time.Unix(c.NotBefore, 0).UTC().Format(time.RFC3339))
	}
	return nil
}

// verifyNonce checks sig (base64url, raw or padded, or standard base64:
// clients differ) as userPub's ed25519 signature of nonce.
func verifyNonce(userPub, nonce, sig string) error {
	if nonce == "" || sig == "" {
		return fmt.Errorf("%w: user %s sent no signature", ErrBadSignature, userPub)
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		if raw, err = base64.StdEncoding.DecodeString(sig); err != nil {
			return fmt.Errorf("%w: user %s: signature is not base64", ErrBadSignature, userPub)
		}
	}
	kp, err := nkeys.FromPublicKey(userPub)
	if err != nil {
		return fmt.Errorf("%w: user %s: %v", ErrBadJWT, userPub, err)
	}
	if err := kp.Verify([]byte(nonce), raw); err != nil {
		return fmt.Errorf("%w: user %s", ErrBadSignature, userPub)
	}
	return nil
}

// permissionsOf is a user JWT's permissions (nil when it has none).
func permissionsOf(uc *jwt.UserClaims) *Permissions {
	p := uc.Permissions
	if p.Pub.Empty() && p.Sub.Empty() && p.Resp == nil {
		return nil
	}
	perms := &Permissions{
		Pub: SubjectRule{Allow: slices.Clone(p.Pub.Allow), Deny: slices.Clone(p.Pub.Deny)},
		Sub: SubjectRule{Allow: slices.Clone(p.Sub.Allow), Deny: slices.Clone(p.Sub.Deny)},
	}
	if p.Resp != nil {
		perms.Resp = &ResponseRule{MaxMsgs: p.Resp.MaxMsgs, Expires: p.Resp.Expires}
	}
	return perms
}

// newNonce is a fresh per-connection nonce (NATS protocol: INFO nonce):
// 16 random bytes, base64url.
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
