package region

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/broker"
	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/tenancy/creds"
	"github.com/stratamesh/strata/tenancy/store"
)

// This file wires NATS decentralized auth (issue 24) into a broker node
// when the topology has auth.nats: the broker's authenticator
// (broker.JWTAuth over the region's account records), the re-signing of
// account JWTs so that they list every revocation, the mesh credentials
// the node's own nats.go connections log in with, and the admin routes of
// tenants' users (admin.UsersBackend).
//
// Accounts made in two regions at once: a tenant's account is made by
// the region that first needs it (a tenant's creation through the admin
// API, or its first user). Should two regions make one for the same
// tenant at the same moment, the records merge like any other (the later
// stamp wins, in every region); the users the other region signed with
// its account are then refused everywhere and listed as stale, and must
// be added again. Revocations are records of their own, so two regions
// revoking users at once both count: every broker signs the account JWT
// again until it lists every revocation of the tenant.

// natsAuth is a broker node's share of NATS auth.
type natsAuth struct {
	n   *Node
	sys *creds.System
	// jwts maps account public keys to their current JWTs (the store's
	// visible accounts), rebuilt when an account or tenant record changes.
	jwts atomic.Pointer[map[string]string]
	kick chan struct{}
	// meshJWT and meshKey are the node's own user of the system account.
	meshJWT string
	meshKey nkeys.KeyPair
}

// openNATSAuth reads the topology's seed files; nil when auth.nats is
// off. Errors name the file at fault.
func (n *Node) openNATSAuth() (*natsAuth, error) {
	cfg := n.cfg.Mesh.NATSAuth()
	if cfg == nil {
		return nil, nil
	}
	opFile, sysFile := cfg.Files(n.cfg.DataDir)
	op, err := readSeed(opFile, nkeys.PrefixByteOperator, "auth.nats.operator_seed_file")
	if err != nil {
		return nil, err
	}
	acct, err := readSeed(sysFile, nkeys.PrefixByteAccount, "auth.nats.system_account_seed_file")
	if err != nil {
		return nil, err
	}
	sys, err := creds.NewSystem(op, acct)
	if err != nil {
		return nil, err
	}
	a := &natsAuth{n: n, sys: sys, kick: make(chan struct{}, 1)}
	if a.meshJWT, a.meshKey, err = sys.MeshUser("strata-mesh "+n.name, 0, time.Now()); err != nil {
		return nil, err
	}
	empty := map[string]string{}
	a.jwts.Store(&empty)
	return a, nil
}

func readSeed(path string, kind nkeys.PrefixByte, field string) (nkeys.KeyPair, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	kp, err := creds.ParseSeed(b, kind)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", field, path, err)
	}
	return kp, nil
}

// authenticator is the broker's Config.Auth.
func (a *natsAuth) authenticator() *broker.JWTAuth {
	return &broker.JWTAuth{Operators: []string{a.sys.OperatorKey()}, SystemAccount: a.sys.AccountKey(), Accounts: a}
}

// AccountJWT implements broker.AccountResolver: the system account's
// JWT, or a visible tenant account's current one.
func (a *natsAuth) AccountJWT(pub string) (string, bool) {
	if pub == a.sys.AccountKey() {
		return a.sys.JWT, true
	}
	token, ok := (*a.jwts.Load())[pub]
	return token, ok
}

// natsOptions log a nats.go connection in as the node's user of the
// system account (nil a: none needed).
func (a *natsAuth) natsOptions() []nats.Option {
	if a == nil {
		return nil
	}
	return []nats.Option{nats.UserJWT(
		func() (string, error) { return a.meshJWT, nil },
		func(nonce []byte) ([]byte, error) { return a.meshKey.Sign(nonce) },
	)}
}

// start builds the account index and starts the loop that signs account
// JWTs again and has the broker re-check its connections when accounts
// change. Store change callbacks only kick it (they must not block).
func (a *natsAuth) start(st *store.Store) {
	st.OnChange(func(changed []tenancy.Record) {
		for _, r := range changed {
			switch r.Kind {
			case tenancy.KindAccount, tenancy.KindRevocation, tenancy.KindTenant:
				select {
				case a.kick <- struct{}{}:
				default:
				}
				return
			}
		}
	})
	a.index(st)
	a.n.goLoop(func() {
		tick := time.NewTicker(5 * time.Second) // retries failed re-signs
		defer tick.Stop()
		for {
			select {
			case <-a.n.stop:
				return
			case <-a.kick:
			case <-tick.C:
			}
			a.resign(st)
			if a.index(st) && a.n.broker != nil {
				a.n.broker.Reauthorize()
			}
		}
	})
}

// index rebuilds the account index; it reports whether it changed.
func (a *natsAuth) index(st *store.Store) bool {
	m := map[string]string{}
	for _, acct := range st.Accounts() {
		m[acct.PublicKey] = acct.JWT
	}
	old := *a.jwts.Load()
	same := len(old) == len(m)
	for k, v := range m {
		if old[k] != v {
			same = false
		}
	}
	a.jwts.Store(&m)
	return !same
}

// resign signs again every account JWT that lacks a revocation of its
// tenant (or was signed by another operator).
func (a *natsAuth) resign(st *store.Store) {
	for _, acct := range st.Accounts() {
		if err := a.resignOne(context.Background(), st, acct); err != nil && !errors.Is(err, store.ErrAccountChanged) {
			a.n.logger.Warn("signing a tenant's account JWT again", "tenant", acct.Tenant, "err", err)
		}
	}
}

func (a *natsAuth) resignOne(ctx context.Context, st *store.Store, acct tenancy.Account) error {
	revs := st.Revocations(acct.Tenant)
	if !creds.NeedsSigning(a.sys.OperatorKey(), acct, revs) {
		return nil
	}
	token, err := creds.SignAccount(a.sys.Operator, acct, revs)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, admin.TenancyTimeout)
	defer cancel()
	return st.SetAccountJWT(ctx, acct.Tenant, acct.PublicKey, token)
}

// ensureAccount returns tenant's account, making it when it has none.
func (a *natsAuth) ensureAccount(ctx context.Context, st *store.Store, tenant string) (tenancy.Account, error) {
	if acct, ok := st.Account(tenant); ok {
		return acct, nil
	}
	acct, err := creds.NewAccount(a.sys.Operator, tenant)
	if err != nil {
		return tenancy.Account{}, err
	}
	acct, _, err = st.EnsureAccount(ctx, acct)
	return acct, err
}
