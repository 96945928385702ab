package broker

import (
	"crypto/subtle"
	"errors"
	"time"
)

// ConnectInfo is what a client presented in CONNECT, for an Authenticator
// (NATS protocol: CONNECT user/pass/auth_token, and jwt/nkey/sig for NATS
// decentralized auth).
type ConnectInfo struct {
	User, Pass, Token string
	// JWT is the user JWT (CONNECT "jwt"); Sig is the client's signature of
	// Nonce with the user's nkey, base64url (CONNECT "sig"); NKey is the
	// user's public nkey when it logs in with a bare nkey (CONNECT "nkey").
	JWT, Sig, NKey string
	// Nonce is the nonce this broker sent the connection in INFO ("" when
	// the Authenticator asked for none).
	Nonce string
	// Name is the client's connection name (CONNECT name).
	Name string
	// RemoteAddr is the client's host:port.
	RemoteAddr string
}

// Identity is who a connection logged in as, as an Authenticator decides.
type Identity struct {
	// Account is the tenant the connection is confined to: its subjects
	// live in that tenant's own subject space (a ">" subscription sees only
	// the tenant's messages) and its JetStream requests address only the
	// tenant's streams. "" is the mesh's system account (the broker's own
	// links, the superuser's tools; with auth off, every client): the
	// unconfined space.
	Account string
	// User names the user for logs and revocation (a user JWT's subject,
	// its public nkey).
	User string
	// Perms narrows what the user may publish and subscribe to within its
	// account (nil: anything in it).
	Perms *Permissions
	// Expires, when not zero, is when the credentials expire: the
	// connection is closed then with -ERR 'User Authentication Expired'.
	Expires time.Time
	// MaxSubs and MaxPayload, when > 0, lower the broker's per-connection
	// limits for this user (a user JWT's limits).
	MaxSubs, MaxPayload int
}

// Authenticator decides whether a client may connect and as whom. A
// non-nil error refuses it: the client gets -ERR 'Authorization Violation'
// and is closed (the error itself is only logged, never sent).
type Authenticator interface {
	Authenticate(ConnectInfo) (Identity, error)
}

// NonceAuthenticator is an Authenticator that needs a nonce in INFO, which
// the client signs (NATS protocol: INFO nonce; CONNECT sig).
type NonceAuthenticator interface {
	Authenticator
	NeedsNonce() bool
}

// ErrAuthFailed is StaticAuth's refusal.
var ErrAuthFailed = errors.New("broker: authentication failed")

// StaticAuth accepts a fixed token or fixed user/password pairs (either may
// be empty), as the system account. Comparison is in constant time.
type StaticAuth struct {
	Token string
	Users map[string]string // user → password
}

// Authenticate implements Authenticator.
func (a StaticAuth) Authenticate(ci ConnectInfo) (Identity, error) {
	if a.Token != "" && ci.Token != "" && subtle.ConstantTimeCompare([]byte(a.Token), []byte(ci.Token)) == 1 {
		return Identity{User: "token"}, nil
	}
	if ci.User != "" {
		if pass, ok := a.Users[ci.User]; ok && subtle.ConstantTimeCompare([]byte(pass), []byte(ci.Pass)) == 1 {
			return Identity{User: ci.User}, nil
		}
	}
	return Identity{}, ErrAuthFailed
}
