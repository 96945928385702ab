package region

import (
	"fmt"
	"maps"
	"math/rand"
	"testing"

	"github.com/stratamesh/strata/tenancy"
)

type stateOf struct{ s *tenancy.State }

func (v stateOf) View(fn func(*tenancy.State)) { fn(v.s) }

// TestPolicyViewUpdate: the view updated record by record is the view
// rebuilt from scratch, through random creates, edits and deletes of
// tenants and namespaces (a tenant's deletion hides its namespaces; its
// re-creation shows them again).
func TestPolicyViewUpdate(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	st := tenancy.NewState()
	clock := tenancy.NewClock("r1")
	var inc policyView
	inc.rebuild(stateOf{st})
	for i := 0; i < 2000; i++ {
		stamp := clock.Now(int64(1000 + i))
		tn := fmt.Sprintf("t%d", rng.Intn(3))
		var rec tenancy.Record
		switch op := rng.Intn(5); {
		case op == 0:
			rec = tenancy.Tombstone(tenancy.KindTenant, tn, stamp)
		case op == 1:
			rec, _ = tenancy.NewRecord(tenancy.Tenant{Name: tn}, stamp)
		case op == 2:
			rec = tenancy.Tombstone(tenancy.KindNamespace, tn+"/"+fmt.Sprintf("n%d", rng.Intn(5)), stamp)
		default:
			p := tenancy.DefaultPolicies([]string{"r1"})
			p.Bundles = 1 + rng.Intn(8)
			rec, _ = tenancy.NewRecord(tenancy.Namespace{Tenant: tn, Name: fmt.Sprintf("n%d", rng.Intn(5)), Policies: p}, stamp)
		}
		if !st.Merge(rec) {
			continue
		}
		inc.update(stateOf{st}, []tenancy.Record{rec})
		var full policyView
		full.rebuild(stateOf{st})
		a, b := inc.cur.Load(), full.cur.Load()
		if !maps.Equal(a.tenants, b.tenants) || len(a.nss) != len(b.nss) || len(a.list) != len(b.list) {
			t.Fatalf("step %d (%s): updated view %v / %d namespaces, rebuilt %v / %d", i, rec.ID(), a.tenants, len(a.nss), b.tenants, len(b.nss))
		}
		for k, ns := range b.nss {
			if got, ok := a.nss[k]; !ok || got.Bundles != ns.Bundles {
				t.Fatalf("step %d: namespace %v: updated %+v, rebuilt %+v", i, k, got, ns)
			}
		}
	}
}
