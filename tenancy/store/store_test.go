package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/meta/metatest"
	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/tenancy"
)

func TestMain(m *testing.M) { metatest.Main(m) }

var regions = []string{"A", "B", "C"}

// mesh is three regions' Stores and Syncers over one shared etcd (each
// region under its own prefix), pushing to each other in memory; a cut
// region's pushes in and out fail.
type mesh struct {
	stores  map[string]*Store
	syncers map[string]*Syncer
	mu      sync.Mutex
	cut     map[string]bool
	pushes  atomic.Int64
}

func newMesh(t *testing.T) *mesh {
	m := &mesh{stores: map[string]*Store{}, syncers: map[string]*Syncer{}, cut: map[string]bool{}}
	for _, r := range regions {
		st, err := Open(context.Background(), Config{Meta: metatest.OpenStore(t), Region: r})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		m.stores[r] = st
	}
	for _, r := range regions {
		r := r
		sy, err := StartSync(SyncConfig{
			Store: m.stores[r], Region: r, Interval: 100 * time.Millisecond,
			Remotes: func() []string {
				return slices.DeleteFunc(slices.Clone(regions), func(x string) bool { return x == r })
			},
			Publish: func(to string, data []byte) error {
				m.mu.Lock()
				cut := m.cut[r] || m.cut[to]
				m.mu.Unlock()
				if cut {
					return errors.New("cut")
				}
				m.pushes.Add(1)
				m.syncers[to].Receive(data)
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		m.syncers[r] = sy
	}
	t.Cleanup(func() {
		for _, sy := range m.syncers {
			sy.Close()
		}
	})
	return m
}

func (m *mesh) setCut(r string, v bool) {
	m.mu.Lock()
	m.cut[r] = v
	m.mu.Unlock()
}

// converged waits until every region holds the same records and returns
// them; fails after 10 s.
func (m *mesh) converged(t *testing.T) []tenancy.Record {
	t.Helper()
	var a []tenancy.Record
	testutil.Eventually(t, "the regions converge", 10*time.Second, func() bool {
		a = m.stores["A"].Records()
		for _, r := range regions[1:] {
			if !slices.EqualFunc(a, m.stores[r].Records(), func(x, y tenancy.Record) bool {
				return x.ID() == y.ID() && x.Stamp == y.Stamp && string(x.Value) == string(y.Value)
			}) {
				return false
			}
		}
		return true
	})
	return a
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, "the condition", 10*time.Second, cond)
}

func ns(tenant, name string) tenancy.Namespace {
	return tenancy.Namespace{Tenant: tenant, Name: name, Policies: tenancy.DefaultPolicies(regions)}
}

func TestStoreReplicatesAcrossRegions(t *testing.T) {
	m := newMesh(t)
	ctx := context.Background()
	if _, err := m.stores["A"].PutTenant(ctx, tenancy.Tenant{Name: "pay"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.stores["A"].PutNamespace(ctx, ns("pay", "orders"), regions); err != nil {
		t.Fatal(err)
	}
	m.converged(t)
	if _, ok := m.stores["C"].Namespace(tenancy.NSName{Tenant: "pay", Namespace: "orders"}); !ok {
		t.Fatal("C does not see pay/orders")
	}

	// Concurrent patches in A and B: one value everywhere.
	n := tenancy.NSName{Tenant: "pay", Namespace: "orders"}
	var wg sync.WaitGroup
	for i, r := range []string{"A", "B"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.stores[r].PatchPolicies(ctx, n, fmt.Appendf(nil, `{"bundles":%d}`, 8+i), regions); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	m.converged(t)
	got, _ := m.stores["C"].Namespace(n)
	if b := got.Policies.Bundles; b != 8 && b != 9 {
		t.Fatalf("bundles after concurrent patches: %d", b)
	}

	// C cut off: it keeps serving what it has; changes elsewhere reach it
	// once it is back, and its own edits made while cut reach the others.
	m.setCut("C", true)
	if _, err := m.stores["A"].PatchPolicies(ctx, n, []byte(`{"replication":["A","B"]}`), regions); err != nil {
		t.Fatal(err)
	}
	if _, err := m.stores["C"].PutNamespace(ctx, ns("pay", "audit"), regions); err != nil {
		t.Fatal(err)
	}
	// B hears of the change (pushes happen); C, cut off, does not.
	waitFor(t, func() bool { got, _ := m.stores["B"].Namespace(n); return len(got.Policies.Replication) == 2 })
	if got, _ := m.stores["C"].Namespace(n); len(got.Policies.Replication) != 3 {
		t.Fatalf("C, cut off, changed: %v", got.Policies.Replication)
	}
	m.setCut("C", false)
	m.converged(t)
	if got, _ := m.stores["C"].Namespace(n); !slices.Equal(got.Policies.Replication, []string{"A", "B"}) {
		t.Fatalf("C after the cut: %v", got.Policies.Replication)
	}
	if _, ok := m.stores["A"].Namespace(tenancy.NSName{Tenant: "pay", Namespace: "audit"}); !ok {
		t.Fatal("A lacks the namespace C made while cut off")
	}

	// Deletes are tombstones; a non-empty tenant needs force.
	if err := m.stores["B"].DeleteTenant(ctx, "pay", false); !errors.Is(err, tenancy.ErrNotEmpty) {
		t.Fatalf("delete of a tenant with namespaces: %v", err)
	}
	if err := m.stores["A"].PutToken(ctx, tenancy.Token{ID: "tok1", Tenant: "pay", Hash: tenancy.HashSecret("s")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, ok := m.stores["B"].Token("tok1"); return ok })
	if err := m.stores["B"].DeleteTenant(ctx, "pay", true); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.stores["B"].Token("tok1"); ok {
		t.Fatal("the deleted tenant's token is still there")
	}
	recs := m.converged(t)
	for _, r := range recs {
		if !r.Deleted {
			t.Fatalf("%s survived the forced delete", r.ID())
		}
	}
}

func TestStoreWritesAndErrors(t *testing.T) {
	ctx := context.Background()
	ms := metatest.OpenStore(t)
	a, err := Open(ctx, Config{Meta: ms, Region: "A"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// A second Store on the same etcd (another broker of the region)
	// learns the first one's writes from the watch.
	b, err := Open(ctx, Config{Meta: ms, Region: "A"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.PutNamespace(ctx, ns("nope", "x"), regions); !errors.Is(err, ErrNoTenant) {
		t.Fatalf("namespace without tenant: %v", err)
	}
	if created, err := a.PutTenant(ctx, tenancy.Tenant{Name: "t"}); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if created, err := a.PutTenant(ctx, tenancy.Tenant{Name: "t", Admins: []string{"al"}}); err != nil || created {
		t.Fatalf("update: %v %v", created, err)
	}
	bad := ns("t", "x")
	bad.Policies.Bundles = 0
	var fe *tenancy.FieldError
	if _, err := a.PutNamespace(ctx, bad, regions); !errors.As(err, &fe) || fe.Field != "policies.bundles" {
		t.Fatalf("bad bundles: %v", err)
	}
	if _, err := a.PutNamespace(ctx, ns("t", "x"), regions); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PatchPolicies(ctx, tenancy.NSName{Tenant: "t", Namespace: "x"}, []byte(`{"replication":["mars"]}`), regions); !errors.As(err, &fe) || fe.Field != "policies.replication[0]" {
		t.Fatalf("unknown region: %v", err)
	}
	if _, err := a.PatchPolicies(ctx, tenancy.NSName{Tenant: "t", Namespace: "y"}, []byte(`{}`), regions); !errors.Is(err, tenancy.ErrNotFound) {
		t.Fatalf("patch of a missing namespace: %v", err)
	}
	waitFor(t, func() bool {
		tn, ok := b.Tenant("t")
		_, nok := b.Namespace(tenancy.NSName{Tenant: "t", Namespace: "x"})
		return ok && nok && len(tn.Admins) == 1
	})
	// Merge keeps only newer records.
	rec, _ := b.state.Get(tenancy.KindTenant, "t")
	old := rec
	old.Stamp.Wall--
	old.Value, _ = json.Marshal(tenancy.Tenant{Name: "t"})
	if n, err := b.Merge(ctx, []tenancy.Record{old}); err != nil || n != 0 {
		t.Fatalf("merge of an older record: %d %v", n, err)
	}
	if n, err := b.Merge(ctx, []tenancy.Record{{Kind: "bogus", Key: "x", Stamp: rec.Stamp, Value: []byte("{}")}}); err == nil || n != 0 {
		t.Fatalf("merge of a malformed record: %d %v", n, err)
	}
	if err := a.DeleteNamespace(ctx, tenancy.NSName{Tenant: "t", Namespace: "zz"}); !errors.Is(err, tenancy.ErrNotFound) {
		t.Fatalf("delete of a missing namespace: %v", err)
	}
}

func TestEncodeBatchesSplits(t *testing.T) {
	var recs []tenancy.Record
	big := make([]byte, 100<<10)
	for i := range big {
		big[i] = 'x'
	}
	for i := 0; i < 7; i++ {
		v, _ := json.Marshal(tenancy.Tenant{Name: fmt.Sprintf("t%d", i), Admins: []string{string(big)}})
		recs = append(recs, tenancy.Record{Kind: tenancy.KindTenant, Key: fmt.Sprintf("t%d", i), Stamp: tenancy.HLC{Wall: 1, Region: "A"}, Value: v})
	}
	bs := encodeBatches("A", recs, true)
	if len(bs) < 3 {
		t.Fatalf("%d batches for 700 KiB", len(bs))
	}
	total := 0
	for _, b := range bs {
		if len(b) > maxBatchBytes+(110<<10) {
			t.Fatalf("batch of %d bytes", len(b))
		}
		d, err := DecodeBatch(b)
		if err != nil || !d.Full {
			t.Fatal(err)
		}
		total += len(d.Records)
	}
	if total != 7 {
		t.Fatalf("%d records after the split", total)
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add([]byte(`{"from":"A","records":[{"kind":"tenant","key":"t","stamp":{"wall":1,"region":"A"},"value":{"name":"t"}}]}`))
	f.Add([]byte(`{"from":"A","full":true,"records":[]}`))
	f.Add([]byte(`{"from":"","records":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeBatch(data)
		if err != nil {
			return
		}
		for _, r := range b.Records {
			if r.Check() != nil {
				t.Fatalf("accepted a bad record %v", r)
			}
		}
	})
}

// TestSealedBatches: with a key, a batch sealed with it opens, one
// unsealed, sealed with another key or tampered with is refused; a sealed
// batch's bytes do not show its records; without a key only unsealed
// batches are taken.
func TestSealedBatches(t *testing.T) {
	body := []byte(`{"from":"A","records":[{"kind":"token","key":"abc"}]}`)
	key, other := []byte("k1"), []byte("k2")
	sealed := Seal(key, body)
	if bytes.Contains(sealed, []byte("token")) {
		t.Fatal("the sealed batch shows its records")
	}
	if got, err := Unseal(key, sealed); err != nil || string(got) != string(body) {
		t.Fatalf("sealed with the key: %q, %v", got, err)
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	for name, data := range map[string][]byte{"unsealed": body, "other key": Seal(other, body), "tampered": tampered,
		"short": []byte(sealMagic + "x")} {
		if _, err := Unseal(key, data); !errors.Is(err, errUnsealed) {
			t.Errorf("%s: %v, want errUnsealed", name, err)
		}
	}
	if got, err := Unseal(nil, body); err != nil || string(got) != string(body) {
		t.Errorf("without a key: %q, %v", got, err)
	}
	if _, err := Unseal(nil, sealed); err == nil {
		t.Error("without a key, a sealed batch was taken")
	}
}
