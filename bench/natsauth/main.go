// Command natsauth writes what a nats-server needs to run in operator
// mode (NATS decentralized auth) with TLS, for bench/auth.sh (issue 24),
// without nsc: an operator, a system account and an account "bench" with
// JetStream unlimited, a user of bench, and a development CA with a
// server certificate for 127.0.0.1/localhost.
//
//	go run ./bench/natsauth -dir DIR
//
// In DIR (absolute or not; made if missing) it writes:
//
//	operator.jwt   the operator, self-signed, naming the system account
//	auth.conf      a nats-server config fragment: operator, system_account,
//	               resolver: MEMORY, resolver_preload with both account
//	               JWTs, and a tls block with the server certificate;
//	               `include auth.conf` from a config in DIR
//	auth-only.conf the same without the tls block (JWT auth alone)
//	operator.nk, system.nk
//	               the operator's and the system account's seeds (0600),
//	               for a Strata topology's auth.nats (bench/auth.sh's
//	               strata-auth target); its accounts are its own
//	bench.creds    the user's JWT and seed (nats --creds, nats.UserCredentials)
//	tls/           internal/tlsconf.EnsureDev's files: ca.pem (for
//	               nats --tlsca), node.pem and node-key.pem (the server's)
//
// The JWTs and keys come from github.com/nats-io/jwt/v2 and nkeys, as
// Strata's own do, so both servers verify the same kind of chain. The
// bench account's seed is not kept: nothing is added later.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/stratamesh/strata/internal/tlsconf"
)

func main() {
	dir := flag.String("dir", "", "directory to write into (required)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "natsauth: -dir is required")
		os.Exit(2)
	}
	if err := write(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "natsauth:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	dev, err := tlsconf.EnsureDev(filepath.Join(dir, "tls"))
	if err != nil {
		return err
	}

	op, opPub, err := newKey(nkeys.CreateOperator)
	if err != nil {
		return err
	}
	sys, sysPub, err := newKey(nkeys.CreateAccount)
	if err != nil {
		return err
	}
	acct, acctPub, err := newKey(nkeys.CreateAccount)
	if err != nil {
		return err
	}
	user, userPub, err := newKey(nkeys.CreateUser)
	if err != nil {
		return err
	}

	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "bench-operator"
	oc.SystemAccount = sysPub
	opJWT, err := oc.Encode(op)
	if err != nil {
		return fmt.Errorf("operator JWT: %w", err)
	}

	sc := jwt.NewAccountClaims(sysPub)
	sc.Name = "SYS"
	sysJWT, err := sc.Encode(op)
	if err != nil {
		return fmt.Errorf("system account JWT: %w", err)
	}

	ac := jwt.NewAccountClaims(acctPub)
	ac.Name = "bench"
	// JetStream on, without limits (0 would mean disabled).
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	acctJWT, err := ac.Encode(op)
	if err != nil {
		return fmt.Errorf("account JWT: %w", err)
	}

	uc := jwt.NewUserClaims(userPub)
	uc.Name = "bench"
	userJWT, err := uc.Encode(acct)
	if err != nil {
		return fmt.Errorf("user JWT: %w", err)
	}
	userSeed, err := user.Seed()
	if err != nil {
		return err
	}
	creds, err := jwt.FormatUserConfig(userJWT, userSeed)
	if err != nil {
		return err
	}

	authOnly := fmt.Sprintf(`# written by bench/natsauth: operator mode
operator: %q
system_account: %s
resolver: MEMORY
resolver_preload: {
  %s: %q
  %s: %q
}
`, filepath.Join(dir, "operator.jwt"), sysPub, sysPub, sysJWT, acctPub, acctJWT)
	withTLS := authOnly + fmt.Sprintf(`tls {
  cert_file: %q
  key_file: %q
}
`, dev.Path(tlsconf.DevNodeCertFile), dev.Path(tlsconf.DevNodeKeyFile))
	opSeed, err := op.Seed()
	if err != nil {
		return err
	}
	sysSeed, err := sys.Seed()
	if err != nil {
		return err
	}

	return errors.Join(
		os.WriteFile(filepath.Join(dir, "operator.jwt"), []byte(opJWT+"\n"), 0o644),
		os.WriteFile(filepath.Join(dir, "auth.conf"), []byte(withTLS), 0o644),
		os.WriteFile(filepath.Join(dir, "auth-only.conf"), []byte(authOnly), 0o644),
		os.WriteFile(filepath.Join(dir, "bench.creds"), creds, 0o600),
		os.WriteFile(filepath.Join(dir, "operator.nk"), append(opSeed, '\n'), 0o600),
		os.WriteFile(filepath.Join(dir, "system.nk"), append(sysSeed, '\n'), 0o600),
	)
}

// newKey makes a key pair with create and returns it with its public key.
func newKey(create func() (nkeys.KeyPair, error)) (nkeys.KeyPair, string, error) {
	kp, err := create()
	if err != nil {
		return nil, "", err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, "", err
	}
	return kp, pub, nil
}
