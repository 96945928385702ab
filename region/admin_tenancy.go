package region

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/tenancy/store"
	"github.com/stratamesh/strata/topology"
)

// This file is the region side of the control plane's admin routes:
// tenants, namespaces and policies, admin tokens (admin.TenancyBackend
// over the region's configuration store), and the admin API's
// authenticator.

type tenancyAdmin struct{ n *Node }

func (a tenancyAdmin) st() *store.Store { return a.n.cp.store }

func (a tenancyAdmin) regions() []string {
	out := make([]string, len(a.n.cfg.Mesh.Regions))
	for i := range a.n.cfg.Mesh.Regions {
		out[i] = a.n.cfg.Mesh.Regions[i].Name
	}
	return out
}

// storeError maps the store's and tenancy's errors to the catalog.
func (a tenancyAdmin) storeError(err error, n tenancy.NSName) error {
	var fe *tenancy.FieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return admin.FieldErrorOf(err, "")
	case errors.Is(err, store.ErrNoTenant):
		return admin.Errorf(admin.CodeTenantNotFound, "t", "the mesh has no tenant %s", n.Tenant)
	case errors.Is(err, tenancy.ErrNotFound) && n.Namespace != "":
		return admin.Errorf(admin.CodeNamespaceNotFound, "ns", "tenant %s has no namespace %s", n.Tenant, n.Namespace)
	case errors.Is(err, tenancy.ErrNotFound):
		return admin.Errorf(admin.CodeTenantNotFound, "t", "the mesh has no tenant %s", n.Tenant)
	case errors.Is(err, tenancy.ErrNotEmpty):
		return admin.Errorf(admin.CodeNotEmpty, "", "%v: delete with ?force=true", err)
	case errors.Is(err, meta.ErrConflict):
		return admin.Errorf(admin.CodeConflict, "", "%s was changed by other writers all along: try again (%v)", n, err)
	case errors.Is(err, meta.ErrClosed), errors.Is(err, context.DeadlineExceeded):
		return a.n.metadataError(err)
	}
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		return admin.Errorf(admin.CodeInvalidBody, ute.Field, "policy %s: %s", ute.Field, ute.Value)
	}
	if f, ok := strings.CutPrefix(err.Error(), `json: unknown field "`); ok {
		field := strings.TrimSuffix(f, `"`)
		return admin.Errorf(admin.CodeInvalidBody, field, "unknown policy %q", field)
	}
	if strings.HasPrefix(err.Error(), "policies patch:") {
		return admin.Errorf(admin.CodeInvalidBody, "", "%v", err)
	}
	return a.n.metadataError(err)
}

func (a tenancyAdmin) Tenants() []admin.Tenant { return a.st().Tenants() }

func (a tenancyAdmin) Tenant(name string) (admin.Tenant, bool) { return a.st().Tenant(name) }

func (a tenancyAdmin) PutTenant(ctx context.Context, t admin.Tenant) (bool, error) {
	created, err := a.st().PutTenant(ctx, t)
	if err == nil && created && a.n.nauth != nil {
		// The tenant's NATS account is made with it (or by its first
		// user, should this fail).
		if _, aerr := a.n.nauth.ensureAccount(ctx, a.st(), t.Name); aerr != nil {
			a.n.logger.Warn("making a new tenant's NATS account (its first user will)", "tenant", t.Name, "err", aerr)
		}
	}
	return created, a.storeError(err, tenancy.NSName{Tenant: t.Name})
}

func (a tenancyAdmin) DeleteTenant(ctx context.Context, name string, force bool) error {
	if force {
		for _, ns := range a.st().Namespaces(name) {
			if _, err := a.DeleteNamespace(ctx, ns.NS(), true); err != nil {
				return err
			}
		}
	} else if nss := a.st().Namespaces(name); len(nss) > 0 {
		names := make([]string, len(nss))
		for i, ns := range nss {
			names[i] = ns.Name
		}
		return admin.Errorf(admin.CodeNotEmpty, "", "tenant %s has namespaces %s: delete them first, or the tenant with ?force=true",
			name, strings.Join(names, ", "))
	}
	return a.storeError(a.st().DeleteTenant(ctx, name, force), tenancy.NSName{Tenant: name})
}

func (a tenancyAdmin) Namespaces(tenant string) []admin.Namespace { return a.st().Namespaces(tenant) }

func (a tenancyAdmin) Namespace(n tenancy.NSName) (admin.Namespace, bool) { return a.st().Namespace(n) }

func (a tenancyAdmin) PutNamespace(ctx context.Context, n tenancy.NSName, policies json.RawMessage) (admin.Namespace, bool, error) {
	p := tenancy.DefaultPolicies(a.regions())
	if len(policies) > 0 && string(policies) != "null" {
		var err error
		if p, err = tenancy.PatchPolicies(p, policies, p); err != nil {
			e := a.storeError(err, n)
			if ae, ok := e.(*admin.Error); ok && ae.Field != "" && !strings.HasPrefix(ae.Field, "policies") {
				ae.Field = "policies." + ae.Field
			}
			return admin.Namespace{}, false, e
		}
	}
	ns := tenancy.Namespace{Tenant: n.Tenant, Name: n.Namespace, Policies: p}
	created, err := a.st().PutNamespace(ctx, ns, a.regions())
	return ns, created, a.storeError(err, n)
}

func (a tenancyAdmin) PatchPolicies(ctx context.Context, n tenancy.NSName, patch json.RawMessage) (admin.Policies, error) {
	p, err := a.st().PatchPolicies(ctx, n, patch, a.regions())
	if err != nil {
		var fe *tenancy.FieldError
		if errors.As(err, &fe) {
			// The patch body is the policies object: name fields within it.
			e := admin.FieldErrorOf(err, "")
			e.Field = strings.TrimPrefix(e.Field, "policies.")
			return p, e
		}
	}
	return p, a.storeError(err, n)
}

// DeleteNamespace tombstones n mesh-wide. Every region's brokers then
// delete the topics they hold of it (jetstream's deleted-namespace
// rule); here an operation follows those of this region.
func (a tenancyAdmin) DeleteNamespace(ctx context.Context, n tenancy.NSName, force bool) (*admin.Operation, error) {
	if _, ok := a.st().Namespace(n); !ok {
		return nil, a.storeError(tenancy.ErrNotFound, n)
	}
	topics := a.n.js.Topics(n.Tenant, n.Namespace)
	if !force {
		// Every region's topics count, not only this one's: a namespace
		// replicated elsewhere only has its topics there.
		held := map[string][]string{}
		for _, t := range topics {
			held[a.n.cfg.Region] = append(held[a.n.cfg.Region], t.Topic)
		}
		remote, err := a.n.cp.remoteTopics(ctx, n, 3*time.Second)
		if err != nil {
			return nil, admin.Errorf(admin.CodeConflict, "", "cannot tell whether namespace %s holds topics: %v; delete with ?force=true to delete it (and any topics) anyway", n, err)
		}
		for r, ts := range remote {
			if len(ts) > 0 {
				held[r] = ts
			}
		}
		if len(held) > 0 {
			return nil, admin.Errorf(admin.CodeNotEmpty, "", "namespace %s holds topics (%s): delete with ?force=true to delete them too", n, describeHeld(held))
		}
	}
	if err := a.st().DeleteNamespace(ctx, n); err != nil {
		return nil, a.storeError(err, n)
	}
	if len(topics) == 0 {
		return nil, nil
	}
	op := admin.Operation{ID: newOperationID(), Kind: "delete-namespace", Target: n.String(), State: admin.OperationRunning,
		Total: len(topics), Started: time.Now().UTC()}
	if _, err := meta.PutJSON(ctx, a.n.store, operationsPrefix+op.ID, op); err != nil {
		return nil, a.n.metadataError(err)
	}
	a.n.goLoop(func() { a.followNamespaceDelete(op, n) })
	return &op, nil
}

// describeHeld is "r1: a, b; r2: c and 4 more" of topics by region.
func describeHeld(held map[string][]string) string {
	regions := make([]string, 0, len(held))
	for r := range held {
		regions = append(regions, r)
	}
	sort.Strings(regions)
	parts := make([]string, len(regions))
	for i, r := range regions {
		ts := held[r]
		if len(ts) > 5 {
			ts = append(ts[:5:5], fmt.Sprintf("and %d more", len(held[r])-5))
		}
		parts[i] = r + ": " + strings.Join(ts, ", ")
	}
	return strings.Join(parts, "; ")
}

// namespaceDeleteTimeout bounds how long a namespace deletion's
// operation waits for this region's topics to go.
const namespaceDeleteTimeout = 5 * time.Minute

// followNamespaceDelete records the deletion's progress until this
// region holds none of n's topics (or the node stops, or the timeout).
func (a tenancyAdmin) followNamespaceDelete(op admin.Operation, n tenancy.NSName) {
	deadline := time.Now().Add(namespaceDeleteTimeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := -1
	for {
		left := len(a.n.js.Topics(n.Tenant, n.Namespace))
		done := op.Total - left
		switch {
		case left == 0:
			op.State, op.Done, op.Finished = admin.OperationDone, op.Total, time.Now().UTC()
		case time.Now().After(deadline):
			op.State, op.Finished = admin.OperationFailed, time.Now().UTC()
			op.Error = fmt.Sprintf("%d topic(s) of %s still in region %s after %s (see the brokers' logs)", left, n, a.n.cfg.Region, namespaceDeleteTimeout)
		default:
			op.Done = max(done, 0)
		}
		if op.State != admin.OperationRunning || op.Done != last {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = meta.PutJSON(ctx, a.n.store, operationsPrefix+op.ID, op)
			cancel()
			last = op.Done
		}
		if op.State != admin.OperationRunning {
			return
		}
		select {
		case <-a.n.stop:
			return
		case <-tick.C:
		}
	}
}

func tokenInfo(t tenancy.Token) admin.TokenInfo {
	return admin.TokenInfo{ID: t.ID, Tenant: t.Tenant, Created: time.UnixMilli(t.Created).UTC(), Description: t.Description}
}

func (a tenancyAdmin) Tokens() []admin.TokenInfo {
	var out []admin.TokenInfo
	for _, t := range a.st().Tokens() {
		out = append(out, tokenInfo(t))
	}
	return out
}

func (a tenancyAdmin) Token(id string) (admin.TokenInfo, bool) {
	t, ok := a.st().Token(id)
	return tokenInfo(t), ok
}

// Admin token secrets are "stk_" + a 12-hex-digit id + "_" + 32 random
// bytes in base64url; only their SHA-256 is stored.
const (
	tokenPrefix = "stk_"
	tokenIDLen  = 12
)

func (a tenancyAdmin) CreateToken(ctx context.Context, req admin.TokenRequest) (admin.TokenCreated, error) {
	idb := make([]byte, tokenIDLen/2)
	sec := make([]byte, 32)
	if _, err := rand.Read(idb); err != nil {
		return admin.TokenCreated{}, err
	}
	if _, err := rand.Read(sec); err != nil {
		return admin.TokenCreated{}, err
	}
	id := hex.EncodeToString(idb)
	secret := tokenPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(sec)
	t := tenancy.Token{ID: id, Tenant: req.Tenant, Hash: tenancy.HashSecret(secret), Created: time.Now().UnixMilli(), Description: req.Description}
	if err := a.st().PutToken(ctx, t); err != nil {
		return admin.TokenCreated{}, a.n.metadataError(err)
	}
	return admin.TokenCreated{TokenInfo: tokenInfo(t), Secret: secret}, nil
}

func (a tenancyAdmin) RevokeToken(ctx context.Context, id string) error {
	err := a.st().RevokeToken(ctx, id)
	if errors.Is(err, tenancy.ErrNotFound) {
		return admin.Errorf(admin.CodeTokenNotFound, "id", "the mesh has no admin token %s", id)
	}
	if err != nil {
		return a.n.metadataError(err)
	}
	return nil
}

// tokenAuth is the admin API's authenticator (admin.Authenticator): the
// superuser's token, by its hash from the topology or the environment,
// and the admin tokens of the mesh's configuration (any region may have
// made them; revocations reach every region the same way).
type tokenAuth struct {
	superHash string
	store     *store.Store
}

// errBadToken: not a token of this mesh.
var errBadToken = errors.New("region: not a valid admin token")

func (t tokenAuth) Authenticate(_ context.Context, secret string) (admin.Principal, error) {
	if t.superHash != "" && subtle.ConstantTimeCompare([]byte(tenancy.HashSecret(secret)), []byte(strings.ToLower(t.superHash))) == 1 {
		return admin.Principal{Superuser: true}, nil
	}
	rest, ok := strings.CutPrefix(secret, tokenPrefix)
	if !ok || len(rest) <= tokenIDLen || rest[tokenIDLen] != '_' || t.store == nil {
		return admin.Principal{}, errBadToken
	}
	tok, ok := t.store.Token(rest[:tokenIDLen])
	if !ok || !tok.Matches(secret) {
		return admin.Principal{}, errBadToken
	}
	if tok.Tenant != "" {
		// A tenant's token is void once its tenant is gone (its deletion
		// also revokes it; this covers a token made concurrently).
		if _, live := t.store.Tenant(tok.Tenant); !live {
			return admin.Principal{}, errBadToken
		}
	}
	return admin.Principal{Superuser: tok.Tenant == "", Tenant: tok.Tenant}, nil
}

// authenticator is the node's admin authenticator, nil when the
// topology's auth is off. Errors: auth on without a superuser token hash.
func (n *Node) authenticator() (admin.Authenticator, error) {
	a := n.cfg.Mesh.Auth
	if a == nil || !a.Enabled {
		return nil, nil
	}
	hash := a.SuperuserTokenSHA256
	if hash == "" {
		hash = os.Getenv(topology.EnvSuperuserTokenSHA256)
	}
	if len(hash) != 64 {
		return nil, fmt.Errorf("auth is enabled but there is no superuser token: set auth.superuser_token_sha256 in the topology or %s (64 hex digits)", topology.EnvSuperuserTokenSHA256)
	}
	return tokenAuth{superHash: hash, store: n.cp.store}, nil
}
