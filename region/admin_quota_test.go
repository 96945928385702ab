package region

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/tenancy/quota"
	"github.com/stratamesh/strata/topology"
)

// TestUsageOf: the usage route answers quota.Usage's JSON exactly, every
// field carried over.
func TestUsageOf(t *testing.T) {
	var u quota.Usage
	fill(reflect.ValueOf(&u), nil)
	sameJSON(t, "usage", u, usageOf(u))
	if got := usageOf(quota.Usage{Tenant: "t"}); got.Quotas == nil {
		t.Error("no quotas is [] on the wire, not null")
	}
}

// TestUsageUnwired: a node without the quota drivers (not a broker)
// answers 503 quota_unavailable saying to ask a broker; the
// coordinator's errors map to the catalog.
func TestUsageUnwired(t *testing.T) {
	n := &Node{cfg: NodeConfig{Region: "us-east"}, name: "us-east-meta", spec: topology.Node{Role: topology.RoleMeta}}
	_, err := quotaUsage{n}.TenantUsage(context.Background(), "t")
	var ae *admin.Error
	if !errors.As(err, &ae) || ae.Code != admin.CodeQuotaUnavailable || ae.Status() != 503 || !strings.Contains(ae.Message, "ask a broker") {
		t.Errorf("unwired: %v", err)
	}
	for _, c := range []struct {
		err  error
		code admin.Code
	}{
		{context.DeadlineExceeded, admin.CodeTimeout},
		{errors.New("no coordinator elected"), admin.CodeQuotaUnavailable},
		{admin.Errorf(admin.CodeNotReady, "", "loading"), admin.CodeNotReady},
	} {
		if !errors.As(usageError("us-east", c.err), &ae) || ae.Code != c.code {
			t.Errorf("%v: %v, want %s", c.err, ae, c.code)
		}
	}
}
