package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/stratamesh/strata/broker/bundle"
	"github.com/stratamesh/strata/tenancy"
)

// fake implements every backend with canned answers, and records what
// the handlers passed it.
type fake struct {
	mu    sync.Mutex
	calls []string
	// lastTenant is the tenant the last Topics call was narrowed to.
	lastTenant string
	// lastSub is the last subscription request; lastKeep the last offload's
	// keep_bytes; lastTo the last unload's target; lastRO the last
	// read-only request.
	lastSub  SubscriptionRequest
	lastKeep int64
	lastTo   string
	lastRO   ReadOnlyRequest
	lastUser UserRequest
}

func (f *fake) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fake) backends() Backends {
	return Backends{
		Region: "r1", Regions: []string{"r1", "r2"}, Health: f, Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte("# metrics\n"))
		}),
		Members: f, Bookie: f, Bookies: f, Ledgers: f, Topics: f, Subscriptions: f,
		Offload: f, Bundles: f, Replication: f, Tier: f, Tenancy: f, Users: f, Usage: f, Decommission: f,
		Audit: f, RegionStates: f,
	}
}

// UsageBackend: t1 has a publish_rate limit of 1000 msgs/s, r1 using
// 420 of its 700 (capped at 800) and r2, unreachable, its last 30; t2
// has no quotas.
func (f *fake) TenantUsage(_ context.Context, tenant string) (Usage, error) {
	f.record("TenantUsage " + tenant)
	if tenant != "t1" {
		return Usage{Tenant: tenant}, nil
	}
	return Usage{Tenant: tenant, Quotas: []QuotaUsage{{Quota: "publish_rate", Unit: "msgs/s", Limit: 1000, Use: 450,
		Regions: []RegionUsage{{Region: "r1", Use: 420, Share: 700, Cap: 800, Reachable: true}, {Region: "r2", Use: 30, Share: 300}}}}}, nil
}

// TenancyBackend: tenants t1 and t2, each with namespace ns1; token 7
// of t1.
func (f *fake) Tenants() []Tenant { return []Tenant{{Name: "t1"}, {Name: "t2"}} }
func (f *fake) Tenant(name string) (Tenant, bool) {
	return Tenant{Name: name}, name == "t1" || name == "t2"
}
func (f *fake) PutTenant(_ context.Context, t Tenant) (bool, error) {
	f.record("PutTenant")
	return true, nil
}
func (f *fake) DeleteTenant(_ context.Context, name string, force bool) error {
	f.record("DeleteTenant")
	return nil
}
func (f *fake) Namespaces(tenant string) []Namespace {
	return []Namespace{{Tenant: tenant, Name: "ns1", Policies: tenancy.DefaultPolicies([]string{"r1"})}}
}
func (f *fake) Namespace(n tenancy.NSName) (Namespace, bool) {
	return Namespace{Tenant: n.Tenant, Name: n.Namespace, Policies: tenancy.DefaultPolicies([]string{"r1"})}, n.Namespace == "ns1"
}
func (f *fake) PutNamespace(_ context.Context, n tenancy.NSName, _ json.RawMessage) (Namespace, bool, error) {
	f.record("PutNamespace")
	return Namespace{Tenant: n.Tenant, Name: n.Namespace}, false, nil
}
func (f *fake) PatchPolicies(_ context.Context, n tenancy.NSName, _ json.RawMessage) (Policies, error) {
	f.record("PatchPolicies")
	return tenancy.DefaultPolicies([]string{"r1"}), nil
}
func (f *fake) DeleteNamespace(_ context.Context, n tenancy.NSName, _ bool) (*Operation, error) {
	f.record("DeleteNamespace")
	return nil, nil
}
func (f *fake) Tokens() []TokenInfo { return []TokenInfo{{ID: "7", Tenant: "t1"}} }
func (f *fake) CreateToken(_ context.Context, req TokenRequest) (TokenCreated, error) {
	f.record("CreateToken")
	return TokenCreated{TokenInfo: TokenInfo{ID: "8", Tenant: req.Tenant}, Secret: "s"}, nil
}
func (f *fake) Token(id string) (TokenInfo, bool) { return TokenInfo{ID: id, Tenant: "t1"}, id == "7" }
func (f *fake) RevokeToken(_ context.Context, id string) error {
	f.record("RevokeToken")
	return nil
}

// UsersBackend: user u1 in every tenant.
func (f *fake) Users(tenant string) ([]UserInfo, error) {
	f.mu.Lock()
	f.lastTenant = tenant
	f.mu.Unlock()
	return []UserInfo{{Tenant: tenant, Name: "u1", PublicKey: "UKEY"}}, nil
}
func (f *fake) AddUser(_ context.Context, tenant string, req UserRequest) (UserCreated, error) {
	f.record("AddUser")
	f.mu.Lock()
	f.lastTenant, f.lastUser = tenant, req
	f.mu.Unlock()
	if req.Name == "u1" {
		return UserCreated{}, Errorf(CodeAlreadyExists, "name", "tenant %s has a user u1", tenant)
	}
	return UserCreated{UserInfo: UserInfo{Tenant: tenant, Name: req.Name, Pub: req.Pub, Sub: req.Sub}, Creds: "-----BEGIN NATS USER JWT-----"}, nil
}
func (f *fake) RevokeUser(_ context.Context, tenant, name string) error {
	f.record("RevokeUser " + tenant + "/" + name)
	if name != "u1" {
		return Errorf(CodeUserNotFound, "user", "tenant %s has no user %s", tenant, name)
	}
	return nil
}

func (f *fake) Ready(context.Context) map[string]string { return nil }
func (f *fake) Members() MembersView {
	return MembersView{Node: "r1.b1", Region: "r1", Role: "broker", LAN: []Member{{Name: "r1.b1", State: "alive"}}}
}
func (f *fake) LocalBookie() BookieView { return BookieView{ID: "k1"} }
func (f *fake) SetReadOnly(_ context.Context, req ReadOnlyRequest) (BookieView, error) {
	f.record("SetReadOnly")
	f.mu.Lock()
	f.lastRO = req
	f.mu.Unlock()
	return BookieView{ID: "k1", ReadOnly: *req.ReadOnly, ReadOnlySet: *req.ReadOnly}, nil
}
func (f *fake) Bookies(context.Context) ([]BookieView, error) { return []BookieView{{ID: "k1"}}, nil }
func (f *fake) Ledgers(context.Context) ([]LedgerView, error) {
	return []LedgerView{{LedgerID: 7, State: LedgerClosed}}, nil
}
func (f *fake) Ledger(_ context.Context, id int64) (LedgerView, error) {
	if id != 7 {
		return LedgerView{}, Errorf(CodeNoSuchLedger, "id", "no ledger %d", id)
	}
	lac := int64(3)
	return LedgerView{LedgerID: 7, State: LedgerClosed, LAC: &lac}, nil
}
func (f *fake) Entries(_ context.Context, id, from, to int64) (EntriesView, error) {
	f.record("Entries")
	return EntriesView{Ledger: id, LAC: 3, From: from, To: min(to, 3)}, nil
}
func (f *fake) Topics(tenant, _ string) []TopicSummary {
	f.mu.Lock()
	f.lastTenant = tenant
	f.mu.Unlock()
	return []TopicSummary{{Tenant: "t1", Namespace: "ns1", Topic: "tp"}}
}
func (f *fake) TopicStats(_ context.Context, name tenancy.Name) (*TopicStats, error) {
	switch name.Topic {
	case "tp":
	case "empty":
		return &TopicStats{TopicSummary: TopicSummary{Tenant: name.Tenant, Namespace: name.Namespace, Topic: name.Topic}}, nil
	case "msgs":
		return &TopicStats{TopicSummary: TopicSummary{Tenant: name.Tenant, Namespace: name.Namespace, Topic: name.Topic}, Messages: 5}, nil
	default:
		return nil, Errorf(CodeTopicNotFound, "topic", "no topic %s", name)
	}
	return &TopicStats{TopicSummary: TopicSummary{Tenant: name.Tenant, Namespace: name.Namespace, Topic: name.Topic},
		Subscriptions: []SubscriptionStats{{Name: "s1"}}}, nil
}
func (f *fake) CreateTopic(_ context.Context, name tenancy.Name) (bool, error) {
	f.record("CreateTopic")
	switch {
	case name.Namespace != "ns1":
		return false, Errorf(CodeNamespaceNotFound, "ns", "tenant %s has no namespace %s", name.Tenant, name.Namespace)
	case name.Topic == "tp":
		return false, nil
	}
	return true, nil
}
func (f *fake) DeleteTopic(_ context.Context, name tenancy.Name) error {
	f.record("DeleteTopic " + name.String())
	return nil
}
func (f *fake) PutSubscription(_ context.Context, _ tenancy.Name, _ string, req SubscriptionRequest) error {
	f.record("PutSubscription")
	f.mu.Lock()
	f.lastSub = req
	f.mu.Unlock()
	return nil
}
func (f *fake) DeleteSubscription(context.Context, tenancy.Name, string) error {
	f.record("DeleteSubscription")
	return nil
}
func (f *fake) Offload(_ context.Context, _ tenancy.Name, start bool, keep int64) (*OffloadStatus, error) {
	if start {
		f.record("Offload")
		f.mu.Lock()
		f.lastKeep = keep
		f.mu.Unlock()
	}
	return &OffloadStatus{Tier: true}, nil
}
func (f *fake) TierInfo() TierInfo { return TierInfo{Kind: "fs", Where: "/tier"} }
func (f *fake) Bundles() []BundleInfo {
	return []BundleInfo{{Bundle: "t1/ns1/0x00000000_0xffffffff", Owner: "r1.b1"}, {Bundle: "t2/ns1/0x00000000_0xffffffff"}}
}
func (f *fake) Unload(_ context.Context, id bundle.ID, to string) (Operation, error) {
	f.record("Unload")
	f.mu.Lock()
	f.lastTo = to
	f.mu.Unlock()
	return Operation{ID: "op1", Kind: "unload", Target: id.String(), State: OperationRunning, Total: 1}, nil
}
func (f *fake) Operation(_ context.Context, id string) (Operation, error) {
	if id != "op1" && id != "7" {
		return Operation{}, Errorf(CodeOperationNotFound, "id", "no operation %s", id)
	}
	return Operation{ID: id, State: OperationDone}, nil
}
func (f *fake) Replication() ReplicationView        { return ReplicationView{Broker: "r1.b1"} }
func (f *fake) TierUsage(context.Context) TierUsage { return TierUsage{Kind: "fs"} }
func (f *fake) Regions() RegionsView {
	return RegionsView{Broker: "r1.b1", SwitchBackDelay: 30, Regions: []RegionState{{Region: "r2", CatchUp: CatchUpCaughtUp, SwitchBack: "settling", Guests: 2}}}
}

// pathFor fills a route pattern's parameters with valid values: tenant
// t (t1 unless given), namespace ns1, topic tp, subscription s1, ledger
// or operation id 7, a whole bundle range.
func pathFor(pattern, tenant string) string {
	if tenant == "" {
		tenant = "t1"
	}
	return strings.NewReplacer("{t}", tenant, "{ns}", "ns1", "{topic}", "tp", "{sub}", "s1", "{id}", "7",
		"{range}", "0x00000000_0xffffffff", "{user}", "u1", "{region}", "r2").Replace(pattern)
}

// targetFor is pathFor(r.Pattern, "") with the query a valid request of
// r has: a topic DELETE is forced (topic tp holds a subscription).
func targetFor(r Route) string {
	p := pathFor(r.Pattern, "")
	if r.Method == http.MethodDelete && r.Pattern == "/admin/v1/topics/{t}/{ns}/{topic}" {
		p += "?force=true"
	}
	return p
}

// validBody is a body route r accepts ("" for none).
func validBody(r Route) string {
	if r.Method == http.MethodPut && r.Pattern == "/admin/v1/bookie/read-only" {
		return `{"read_only": true}`
	}
	if r.Method == http.MethodPatch {
		return `{"bundles": 8}`
	}
	if r.Method == http.MethodPost && r.Pattern == "/admin/v1/tenants/{t}/users" {
		return `{"name": "u2", "pub": {"allow": ["t1.>"]}, "expiry": "720h"}`
	}
	if r.Method == http.MethodPost && r.Pattern == "/admin/v1/testhooks/topics/{t}/{ns}/{topic}" {
		return `{"action": "freeze-replicator", "remote": "r2"}`
	}
	if r.Method == http.MethodPost && r.Pattern == "/admin/v1/regions/{region}/decommission" {
		return `{"action": "start"}`
	}
	if r.Method == http.MethodPost && r.Pattern == "/admin/v1/tokens" {
		return `{"description": "ci"}` // the caller's own tenant (a superuser token for the superuser)
	}
	return ""
}
