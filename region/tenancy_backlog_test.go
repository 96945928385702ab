package region

import (
	"testing"
	"time"

	"github.com/stratamesh/strata/tenancy"
)

// TestJSNamespaceBacklogQuota: a namespace's backlog_quota reaches the
// JetStream layer with its size, age and policy; none stays none.
func TestJSNamespaceBacklogQuota(t *testing.T) {
	p := tenancy.DefaultPolicies([]string{"us"})
	if ns := jsNamespace(p); ns.BacklogQuota != nil {
		t.Fatalf("no backlog_quota gave %+v", ns.BacklogQuota)
	}
	p.BacklogQuota = &tenancy.BacklogQuota{Size: 1 << 20, Time: tenancy.Duration(90 * time.Second), Policy: tenancy.BacklogEvictOld}
	q := jsNamespace(p).BacklogQuota
	if q == nil || q.Size != 1<<20 || q.Age != 90*time.Second || q.Policy != tenancy.BacklogEvictOld {
		t.Fatalf("backlog_quota became %+v", q)
	}
}
