package store

import (
	"context"
	"slices"
	"testing"

	"github.com/stratamesh/strata/internal/meta/metatest"
	"github.com/stratamesh/strata/tenancy"
)

// TestStoreDecommission: a dry-run plan writes nothing; start removes
// the region from every list naming it and writes the record; cancel
// restores the lists with the old epochs; a later start and confirm
// leave the region out, and adding it back by a namespace update gives
// it a new epoch.
func TestStoreDecommission(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, Config{Meta: metatest.OpenStore(t), Region: "A"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	regions := []string{"A", "B", "C"}
	if _, err := st.PutTenant(ctx, tenancy.Tenant{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []struct {
		name string
		repl []string
	}{{"a", []string{"A", "B", "C"}}, {"b", []string{"A", "B"}}} {
		p := tenancy.DefaultPolicies(n.repl)
		if _, err := st.PutNamespace(ctx, tenancy.Namespace{Tenant: "t", Name: n.name, Policies: p}, regions); err != nil {
			t.Fatal(err)
		}
	}
	a0, _ := st.Namespace(tenancy.NSName{Tenant: "t", Namespace: "a"})
	epochC := a0.ReplicationEpochs["C"]
	if epochC.IsZero() {
		t.Fatalf("a created namespace has no epoch for C: %+v", a0)
	}
	records := len(st.Records())
	plan, err := st.PlanDecommission("C", regions)
	if err != nil || len(plan) != 1 || plan[0].Namespace != "t/a" || len(st.Records()) != records {
		t.Fatalf("plan %+v %v (records %d → %d)", plan, err, records, len(st.Records()))
	}
	repl := func(n string) []string {
		ns, _ := st.Namespace(tenancy.NSName{Tenant: "t", Namespace: n})
		return ns.Policies.Replication
	}
	d, err := st.StepDecommission(ctx, "C", tenancy.DecomStart, regions)
	if err != nil || d.State != tenancy.DecomPending || !slices.Equal(repl("a"), []string{"A", "B"}) || !slices.Equal(repl("b"), []string{"A", "B"}) {
		t.Fatalf("start: %+v %v, a %v", d, err, repl("a"))
	}
	if got, ok := st.Decommission("C"); !ok || got.State != tenancy.DecomPending {
		t.Fatalf("record %+v", got)
	}
	if _, err := st.StepDecommission(ctx, "C", tenancy.DecomCancel, regions); err != nil {
		t.Fatal(err)
	}
	a1, _ := st.Namespace(tenancy.NSName{Tenant: "t", Namespace: "a"})
	if !slices.Equal(a1.Policies.Replication, []string{"A", "B", "C"}) || a1.ReplicationEpochs["C"] != epochC {
		t.Fatalf("cancel: %+v, want C back with epoch %v", a1, epochC)
	}
	if _, err := st.StepDecommission(ctx, "C", tenancy.DecomStart, regions); err != nil {
		t.Fatal(err)
	}
	if d, err := st.StepDecommission(ctx, "C", tenancy.DecomConfirm, regions); err != nil || d.State != tenancy.DecomConfirmed || !slices.Equal(repl("a"), []string{"A", "B"}) {
		t.Fatalf("confirm: %+v %v", d, err)
	}
	if _, err := st.PatchPolicies(ctx, tenancy.NSName{Tenant: "t", Namespace: "a"}, []byte(`{"replication":["A","B","C"]}`), regions); err != nil {
		t.Fatal(err)
	}
	a2, _ := st.Namespace(tenancy.NSName{Tenant: "t", Namespace: "a"})
	if e := a2.ReplicationEpochs["C"]; e.IsZero() || e == epochC || a2.ReplicationEpochs["A"] != a0.ReplicationEpochs["A"] {
		t.Fatalf("added back: epochs %v, want a new one for C (was %v) and A's kept", a2.ReplicationEpochs, epochC)
	}
}
