package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/tenancy"
)

// memTenancy is an in-memory admin.TenancyBackend for mesh regions r1
// and r2: what the routes of package admin answer, as a region's store
// would (policies merged over the defaults; not_empty refusals).
type memTenancy struct {
	mu      sync.Mutex
	tenants map[string]admin.Tenant
	nss     map[string]admin.Namespace
	topics  map[string]int // namespace key → topics it holds
	tokens  map[string]admin.TokenInfo
}

var memRegions = []string{"r1", "r2"}

func newMemTenancy() *memTenancy {
	return &memTenancy{tenants: map[string]admin.Tenant{}, nss: map[string]admin.Namespace{}, topics: map[string]int{}, tokens: map[string]admin.TokenInfo{}}
}

func (m *memTenancy) Tenants() []admin.Tenant {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []admin.Tenant
	for _, t := range m.tenants {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (m *memTenancy) Tenant(name string) (admin.Tenant, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tenants[name]
	return t, ok
}

func (m *memTenancy) PutTenant(_ context.Context, t admin.Tenant) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, had := m.tenants[t.Name]
	m.tenants[t.Name] = t
	return !had, nil
}

func (m *memTenancy) DeleteTenant(_ context.Context, name string, force bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.tenants[name]; !ok {
		return admin.Errorf(admin.CodeTenantNotFound, "t", "the mesh has no tenant %s", name)
	}
	for k := range m.nss {
		if strings.HasPrefix(k, name+"/") {
			if !force {
				return admin.Errorf(admin.CodeNotEmpty, "", "tenant %s has namespaces: delete them first, or the tenant with ?force=true", name)
			}
			delete(m.nss, k)
		}
	}
	delete(m.tenants, name)
	return nil
}

func (m *memTenancy) Namespaces(tenant string) []admin.Namespace {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []admin.Namespace
	for _, n := range m.nss {
		if n.Tenant == tenant {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (m *memTenancy) Namespace(n tenancy.NSName) (admin.Namespace, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ns, ok := m.nss[n.String()]
	return ns, ok
}

func (m *memTenancy) PutNamespace(_ context.Context, n tenancy.NSName, policies json.RawMessage) (admin.Namespace, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.tenants[n.Tenant]; !ok {
		return admin.Namespace{}, false, admin.Errorf(admin.CodeTenantNotFound, "t", "the mesh has no tenant %s", n.Tenant)
	}
	p := tenancy.DefaultPolicies(memRegions)
	if len(policies) > 0 && string(policies) != "null" {
		var err error
		if p, err = tenancy.PatchPolicies(p, policies, p); err != nil {
			return admin.Namespace{}, false, admin.Errorf(admin.CodeInvalidBody, "policies", "%v", err)
		}
	}
	ns := admin.Namespace{Tenant: n.Tenant, Name: n.Namespace, Policies: p}
	if err := ns.Validate(memRegions); err != nil {
		return admin.Namespace{}, false, admin.FieldErrorOf(err, "")
	}
	_, had := m.nss[n.String()]
	m.nss[n.String()] = ns
	return ns, !had, nil
}

func (m *memTenancy) PatchPolicies(_ context.Context, n tenancy.NSName, patch json.RawMessage) (admin.Policies, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ns, ok := m.nss[n.String()]
	if !ok {
		return admin.Policies{}, admin.Errorf(admin.CodeNamespaceNotFound, "ns", "tenant %s has no namespace %s", n.Tenant, n.Namespace)
	}
	p, err := tenancy.PatchPolicies(ns.Policies, patch, tenancy.DefaultPolicies(memRegions))
	if err != nil {
		return admin.Policies{}, admin.Errorf(admin.CodeInvalidBody, "", "%v", err)
	}
	ns.Policies = p
	m.nss[n.String()] = ns
	return p, nil
}

func (m *memTenancy) DeleteNamespace(_ context.Context, n tenancy.NSName, force bool) (*admin.Operation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.nss[n.String()]; !ok {
		return nil, admin.Errorf(admin.CodeNamespaceNotFound, "ns", "tenant %s has no namespace %s", n.Tenant, n.Namespace)
	}
	topics := m.topics[n.String()]
	if topics > 0 && !force {
		return nil, admin.Errorf(admin.CodeNotEmpty, "", "namespace %s holds %d topic(s) in region r1: delete with ?force=true to delete them too", n, topics)
	}
	delete(m.nss, n.String())
	if topics == 0 {
		return nil, nil
	}
	return &admin.Operation{ID: "op-" + n.Namespace, Kind: "delete-namespace", Target: n.String(), State: admin.OperationRunning, Total: topics}, nil
}

func (m *memTenancy) Tokens() []admin.TokenInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []admin.TokenInfo
	for _, t := range m.tokens {
		out = append(out, t)
	}
	return out
}

func (m *memTenancy) CreateToken(_ context.Context, req admin.TokenRequest) (admin.TokenCreated, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := admin.TokenInfo{ID: "0123456789ab", Tenant: req.Tenant, Created: time.Unix(1700000000, 0).UTC(), Description: req.Description}
	m.tokens[t.ID] = t
	return admin.TokenCreated{TokenInfo: t, Secret: "stk_0123456789ab_s3cret"}, nil
}

func (m *memTenancy) Token(id string) (admin.TokenInfo, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tokens[id]
	return t, ok
}

func (m *memTenancy) RevokeToken(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.tokens, id)
	return nil
}

// tenancyServer serves admin's tenancy routes over mem and records every
// write ("PUT /admin/v1/…").
type tenancyServer struct {
	*httptest.Server
	mem    *memTenancy
	mu     sync.Mutex
	writes []string
}

func newTenancyServer(t *testing.T) *tenancyServer {
	s := &tenancyServer{mem: newMemTenancy()}
	mux := http.NewServeMux()
	admin.Mount(mux, admin.Routes(admin.Backends{Region: "r1", Tenancy: s.mem}), nil)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			s.mu.Lock()
			s.writes = append(s.writes, r.Method+" "+r.URL.RequestURI())
			s.mu.Unlock()
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// takeWrites returns the writes since the last call.
func (s *tenancyServer) takeWrites() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.writes
	s.writes = nil
	return w
}

// run runs strata with args against s and returns stdout, stderr and the
// error.
func (s *tenancyServer) run(args ...string) (string, string, error) {
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append(args, "--url", s.URL))
	err := root.Execute()
	return out.String(), errOut.String(), err
}

const applyRegions = `mesh: m
defaults:
  ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}
regions:
  - name: r1
    brokers: 1
    bookies: 2
  - name: r2
    brokers: 1
    bookies: 2
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const paymentsFile = applyRegions + `tenants:
  - name: payments
    admins: [alice]
    quotas: {storage: 50GiB}
    namespaces:
      - name: orders
        replication: [r1]
        retention: {time: 7d}
`

// TestApplyDryRunWritesNothing: --dry-run prints the plan and the count,
// and sends no write.
func TestApplyDryRunWritesNothing(t *testing.T) {
	s := newTenancyServer(t)
	f := writeFile(t, "mesh.yaml", paymentsFile)
	out, _, err := s.run("apply", "-f", f, "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	want := "+ tenant payments\n+ namespace payments/orders\ndry run: 2 changes, nothing applied\n"
	if out != want {
		t.Fatalf("apply --dry-run printed\n%s\nwant\n%s", out, want)
	}
	if w := s.takeWrites(); len(w) != 0 {
		t.Fatalf("apply --dry-run wrote %v", w)
	}
	if len(s.mem.Tenants()) != 0 {
		t.Fatal("apply --dry-run created a tenant")
	}
}

// TestApplyTwiceThenEdit: apply creates what the file names; the same
// file again is "no changes" with no write; an edit of one field shows
// exactly that field and applies it with one PUT.
func TestApplyTwiceThenEdit(t *testing.T) {
	s := newTenancyServer(t)
	f := writeFile(t, "mesh.yaml", paymentsFile)
	out, _, err := s.run("apply", "-f", f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out, "2 changes applied\n") {
		t.Fatalf("apply printed\n%s", out)
	}
	if w := s.takeWrites(); strings.Join(w, "; ") != "PUT /admin/v1/tenants/payments; PUT /admin/v1/namespaces/payments/orders" {
		t.Fatalf("apply wrote %v", w)
	}
	ns, ok := s.mem.Namespace(tenancy.NSName{Tenant: "payments", Namespace: "orders"})
	if !ok || ns.Policies.Retention.Time != 7*tenancy.Day || strings.Join(ns.Policies.Replication, ",") != "r1" {
		t.Fatalf("namespace after apply: %+v, %v", ns, ok)
	}
	if tn, _ := s.mem.Tenant("payments"); tn.Quotas.Storage != 50<<30 || strings.Join(tn.Admins, ",") != "alice" {
		t.Fatalf("tenant after apply: %+v", tn)
	}

	out, _, err = s.run("apply", "-f", f)
	if err != nil || out != "no changes\n" {
		t.Fatalf("second apply: %v, printed %q; want \"no changes\"", err, out)
	}
	if w := s.takeWrites(); len(w) != 0 {
		t.Fatalf("second apply wrote %v", w)
	}

	f2 := writeFile(t, "mesh.yaml", strings.Replace(paymentsFile, "time: 7d", "time: 14d", 1))
	out, _, err = s.run("apply", "-f", f2)
	want := "~ namespace payments/orders: policies.retention.time \"7d\" → \"14d\"\n1 change applied\n"
	if err != nil || out != want {
		t.Fatalf("apply of the edit: %v, printed\n%s\nwant\n%s", err, out, want)
	}
	if w := s.takeWrites(); strings.Join(w, "; ") != "PUT /admin/v1/namespaces/payments/orders" {
		t.Fatalf("apply of the edit wrote %v", w)
	}
}

// TestApplyPrune: without --prune nothing the file does not name is
// deleted; with it the empty namespace goes, the one holding topics is
// refused (not_empty, "re-run with --force") and the apply stops; with
// --force it and then its tenant go, the operation of its topics named.
func TestApplyPrune(t *testing.T) {
	s := newTenancyServer(t)
	ctx := context.Background()
	s.mem.PutTenant(ctx, admin.Tenant{Name: "old"})
	s.mem.PutNamespace(ctx, tenancy.NSName{Tenant: "old", Namespace: "x"}, nil)
	s.mem.PutNamespace(ctx, tenancy.NSName{Tenant: "old", Namespace: "y"}, nil)
	s.mem.topics["old/y"] = 3
	f := writeFile(t, "mesh.yaml", paymentsFile)

	if out, _, err := s.run("apply", "-f", f); err != nil || strings.Contains(out, "- ") {
		t.Fatalf("apply without --prune: %v\n%s", err, out)
	}
	s.takeWrites()

	out, _, err := s.run("apply", "-f", f, "--prune", "--dry-run")
	if err != nil || out != "- namespace old/x\n- namespace old/y\n- tenant old\ndry run: 3 changes, nothing applied\n" {
		t.Fatalf("apply --prune --dry-run: %v\n%s", err, out)
	}
	out, _, err = s.run("apply", "-f", f, "--prune")
	if err == nil || !strings.Contains(err.Error(), "holds 3 topic(s)") || !strings.Contains(err.Error(), "re-run with --force") ||
		!strings.Contains(err.Error(), "delete namespace old/y") {
		t.Fatalf("apply --prune of a namespace with topics: %v\n%s", err, out)
	}
	if !strings.Contains(out, "1 change applied before the error") {
		t.Fatalf("apply --prune printed\n%s", out)
	}
	if w := s.takeWrites(); strings.Join(w, "; ") != "DELETE /admin/v1/namespaces/old/x; DELETE /admin/v1/namespaces/old/y" {
		t.Fatalf("apply --prune wrote %v", w)
	}

	out, _, err = s.run("apply", "-f", f, "--prune", "--force")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "deleted namespace old/y; its 3 topic(s) are being deleted: operation op-y") || !strings.HasSuffix(out, "2 changes applied\n") {
		t.Fatalf("apply --prune --force printed\n%s", out)
	}
	if w := s.takeWrites(); strings.Join(w, "; ") != "DELETE /admin/v1/namespaces/old/y?force=true; DELETE /admin/v1/tenants/old?force=true" {
		t.Fatalf("apply --prune --force wrote %v", w)
	}
	if out, _, err := s.run("apply", "-f", f, "--prune"); err != nil || out != "no changes\n" {
		t.Fatalf("apply --prune again: %v, %q", err, out)
	}
}

// TestApplyBadFile: an invalid file is refused with its problems as
// FILE:LINE:COL: PATH: MESSAGE, before the mesh is asked.
func TestApplyBadFile(t *testing.T) {
	s := newTenancyServer(t)
	f := writeFile(t, "bad.yaml", applyRegions+`tenants:
  - name: payments
    namespaces:
      - name: orders
        replication: [r9]
        retention: {time: 7 days}
`)
	out, _, err := s.run("apply", "-f", f)
	if err == nil {
		t.Fatalf("apply of a bad file succeeded:\n%s", out)
	}
	shape := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(f) + `:\d+:\d+: tenants\[0\]\.namespaces\[0\]\.\S+: .+`)
	if got := shape.FindAllString(err.Error(), -1); len(got) != 2 {
		t.Fatalf("apply of a bad file: %v; want two FILE:LINE:COL problems (replication, retention.time)", err)
	}
	if w := s.takeWrites(); len(w) != 0 {
		t.Fatalf("apply of a bad file wrote %v", w)
	}
}

// TestApplyJSON: --json prints the plan as a list of changes with each
// field's JSON values.
func TestApplyJSON(t *testing.T) {
	s := newTenancyServer(t)
	f := writeFile(t, "mesh.yaml", paymentsFile)
	if _, _, err := s.run("apply", "-f", f); err != nil {
		t.Fatal(err)
	}
	f2 := writeFile(t, "mesh.yaml", strings.Replace(paymentsFile, "replication: [r1]", "replication: [r1, r2]", 1))
	out, _, err := s.run("apply", "-f", f2, "--dry-run", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		DryRun  bool `json:"dry_run"`
		Applied int  `json:"applied"`
		Changes []struct {
			Op, Kind, Key string
			Fields        []struct {
				Path     string
				From, To []string
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !rep.DryRun || rep.Applied != 0 || len(rep.Changes) != 1 || rep.Changes[0].Op != "update" || rep.Changes[0].Key != "payments/orders" ||
		len(rep.Changes[0].Fields) != 1 || rep.Changes[0].Fields[0].Path != "policies.replication" ||
		strings.Join(rep.Changes[0].Fields[0].From, ",") != "r1" || strings.Join(rep.Changes[0].Fields[0].To, ",") != "r1,r2" {
		t.Fatalf("apply --json:\n%s", out)
	}
}

// TestPrintPlan: one line per create and delete, one per changed field of
// an update.
func TestPrintPlan(t *testing.T) {
	var b bytes.Buffer
	printPlan(&b, []tenancy.Change{
		{Op: "create", Kind: tenancy.KindTenant, Key: "payments"},
		{Op: "update", Kind: tenancy.KindTenant, Key: "acme", Fields: []tenancy.FieldChange{{Path: "quotas.topics", From: "0", To: "10"}}},
		{Op: "update", Kind: tenancy.KindNamespace, Key: "payments/orders", Fields: []tenancy.FieldChange{
			{Path: "policies.bundles", From: "4", To: "8"}, {Path: "policies.retention.time", From: `"0s"`, To: `"7d"`}}},
		{Op: "delete", Kind: tenancy.KindNamespace, Key: "old/x"},
	})
	want := `+ tenant payments
~ tenant acme: quotas.topics 0 → 10
~ namespace payments/orders: policies.bundles 4 → 8
~ namespace payments/orders: policies.retention.time "0s" → "7d"
- namespace old/x
`
	if b.String() != want {
		t.Fatalf("printPlan:\n%s\nwant\n%s", b.String(), want)
	}
}

// TestTenancyCommands: the admin commands over the same routes: create,
// list and get; set-policies from a file; a namespace delete refused
// without --force and then answered with its operation; a token's
// secret shown once.
func TestTenancyCommands(t *testing.T) {
	s := newTenancyServer(t)
	out, _, err := s.run("admin", "tenants", "create", "payments", "--admins", "alice,bob", "--storage", "50GiB", "--publish-rate", "5000", "--topics", "10")
	if err != nil || !strings.Contains(out, "created tenant payments") || !strings.Contains(out, "50.0 GiB") {
		t.Fatalf("tenants create: %v\n%s", err, out)
	}
	if tn, _ := s.mem.Tenant("payments"); tn.Quotas.PublishRate != 5000 || tn.Quotas.Topics != 10 || len(tn.Admins) != 2 {
		t.Fatalf("tenant created as %+v", tn)
	}
	out, _, err = s.run("admin", "tenant", "list")
	if err != nil || !regexp.MustCompile(`payments\s+alice,bob\s+5000/s\s+-\s+50.0 GiB\s+10\s+-\s+-`).MatchString(out) {
		t.Fatalf("tenants list: %v\n%s", err, out)
	}
	out, _, err = s.run("admin", "namespaces", "create", "payments/orders", "--replication", "r1", "--retention-time", "7d", "--bundles", "8",
		"--policies", `{"message_ttl": "1h", "retention": {"mode": "interest"}}`)
	if err != nil || !strings.Contains(out, "created namespace payments/orders") {
		t.Fatalf("namespaces create: %v\n%s", err, out)
	}
	ns, _ := s.mem.Namespace(tenancy.NSName{Tenant: "payments", Namespace: "orders"})
	if p := ns.Policies; p.Bundles != 8 || p.Retention.Mode != "interest" || p.Retention.Time != 7*tenancy.Day || p.MessageTTL != tenancy.Hour || len(p.Replication) != 1 {
		t.Fatalf("namespace created with %+v", p)
	}
	patch := writeFile(t, "patch.json", `{"bundles": 16}`)
	out, _, err = s.run("admin", "namespace", "set-policies", "payments/orders", "--file", patch)
	if err != nil || !regexp.MustCompile(`bundles\s+16`).MatchString(out) {
		t.Fatalf("set-policies: %v\n%s", err, out)
	}
	out, _, err = s.run("admin", "namespaces", "policies", "payments/orders", "--json")
	var p admin.Policies
	if err != nil || json.Unmarshal([]byte(out), &p) != nil || p.Bundles != 16 {
		t.Fatalf("policies --json: %v\n%s", err, out)
	}
	if _, _, err := s.run("admin", "namespaces", "get", "payments/nope"); err == nil || !strings.Contains(err.Error(), "namespace_not_found") {
		t.Fatalf("get of a missing namespace: %v", err)
	}
	s.mem.topics["payments/orders"] = 2
	if _, _, err := s.run("admin", "namespaces", "delete", "payments/orders"); err == nil || !strings.Contains(err.Error(), "re-run with --force") {
		t.Fatalf("delete of a namespace with topics: %v", err)
	}
	out, _, err = s.run("admin", "namespaces", "delete", "payments/orders", "--force")
	if err != nil || !strings.Contains(out, "operation op-orders") || !strings.Contains(out, "/admin/v1/operations/op-orders") {
		t.Fatalf("delete --force: %v\n%s", err, out)
	}
	out, _, err = s.run("admin", "tokens", "create", "--tenant", "payments", "--description", "ci")
	if err != nil || !strings.Contains(out, "secret: stk_0123456789ab_s3cret\n") || !strings.Contains(out, "shown only once") {
		t.Fatalf("tokens create: %v\n%s", err, out)
	}
	out, _, err = s.run("admin", "token", "list")
	if err != nil || !regexp.MustCompile(`0123456789ab\s+tenant payments\s+.*ci`).MatchString(out) || strings.Contains(out, "s3cret") {
		t.Fatalf("tokens list: %v\n%s", err, out)
	}
	if out, _, err := s.run("admin", "tokens", "revoke", "0123456789ab"); err != nil || !strings.Contains(out, "revoked token 0123456789ab") {
		t.Fatalf("tokens revoke: %v\n%s", err, out)
	}
	if out, _, err := s.run("admin", "tenants", "delete", "payments"); err != nil || out != "deleted tenant payments\n" {
		t.Fatalf("tenants delete: %v\n%s", err, out)
	}
}
