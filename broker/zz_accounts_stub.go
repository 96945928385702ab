package broker

// TEMPORARY (branch accounts only): the declarations the broker side of
// issue 24 lands on main (broker/jwtauth.go, Server.Reauthorize), so
// that region compiles until then. Delete this file when merging main.

import "time"

// AccountResolver: account public key -> its current account JWT.
type AccountResolver interface {
	AccountJWT(accountPub string) (string, bool)
}

// JWTAuth is a stand-in that refuses every client.
type JWTAuth struct {
	Operators     []string
	SystemAccount string
	Accounts      AccountResolver
	Now           func() time.Time
}

// Authenticate refuses (stand-in).
func (a *JWTAuth) Authenticate(ConnectInfo) error { return ErrAuthFailed }

// Reauthorize is a stand-in that checks nothing.
func (s *Server) Reauthorize() int { return 0 }
