package broker

import (
	"crypto/subtle"
	"errors"
)

// ConnectInfo is what a client presented in CONNECT, for an Authenticator
// (NATS protocol: CONNECT user/pass/auth_token).
type ConnectInfo struct {
	User, Pass, Token string
	// Name is the client's connection name (CONNECT name).
	Name string
	// RemoteAddr is the client's host:port.
	RemoteAddr string
}

// Authenticator decides whether a client may connect. A non-nil error
// refuses it: the client gets -ERR 'Authorization Violation' and is closed
// (the error itself is only logged, never sent).
type Authenticator interface {
	Authenticate(ConnectInfo) error
}

// ErrAuthFailed is StaticAuth's refusal.
var ErrAuthFailed = errors.New("broker: authentication failed")

// StaticAuth accepts a fixed token or fixed user/password pairs (either may
// be empty). Comparison is in constant time.
type StaticAuth struct {
	Token string
	Users map[string]string // user → password
}

// Authenticate implements Authenticator.
func (a StaticAuth) Authenticate(ci ConnectInfo) error {
	if a.Token != "" && ci.Token != "" && subtle.ConstantTimeCompare([]byte(a.Token), []byte(ci.Token)) == 1 {
		return nil
	}
	if ci.User != "" {
		if pass, ok := a.Users[ci.User]; ok && subtle.ConstantTimeCompare([]byte(pass), []byte(ci.Pass)) == 1 {
			return nil
		}
	}
	return ErrAuthFailed
}
