package status

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/meshfile"
)

func TestNearLimits(t *testing.T) {
	u := admin.Usage{Tenant: "t", Quotas: []admin.QuotaUsage{
		{Quota: "publish_rate", Unit: "msgs/s", Limit: 1000, Use: 800},
		{Quota: "publish_bytes", Unit: "bytes/s", Limit: 1000, Use: 799.9},
		{Quota: "storage", Unit: "bytes", Limit: 10, Use: 12},
		{Quota: "topics", Unit: "topics", Limit: 0, Use: 5},
	}}
	got := NearLimits(u, NearFraction)
	want := []Near{{Tenant: "t", Quota: "publish_rate", Unit: "msgs/s", Limit: 1000, Use: 800}, {Tenant: "t", Quota: "storage", Unit: "bytes", Limit: 10, Use: 12}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%+v", got)
	}
}

// quotaMesh serves the tenant list and usage of three tenants on one
// broker: hot (publish_rate at 85%, connections at 10%), free (no
// quotas), dark (its usage is 503); it records the paths asked.
type quotaMesh struct {
	mu    sync.Mutex
	paths []string
	hot   float64 // hot's publish_rate use
}

func (m *quotaMesh) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.paths = append(m.paths, r.URL.Path)
	m.mu.Unlock()
	switch r.URL.Path {
	case "/admin/v1/tenants":
		admin.WriteJSON(w, 200, admin.TenantList{Tenants: []admin.Tenant{
			{Name: "dark", Quotas: admin.Quotas{Storage: 10}},
			{Name: "free"},
			{Name: "hot", Quotas: admin.Quotas{PublishRate: 1000, Connections: 50}},
		}})
	case "/admin/v1/tenants/hot/usage":
		admin.WriteJSON(w, 200, admin.Usage{Tenant: "hot", Quotas: []admin.QuotaUsage{
			{Quota: "publish_rate", Unit: "msgs/s", Limit: 1000, Use: m.hot},
			{Quota: "connections", Unit: "connections", Limit: 50, Use: 5},
		}})
	case "/admin/v1/tenants/dark/usage":
		admin.WriteError(w, admin.Errorf(admin.CodeQuotaUnavailable, "", "region r1: quota coordinator not wired on this node"))
	default:
		http.NotFound(w, r)
	}
}

// TestCollectQuotas: status asks one broker for the tenants and, for
// each tenant with quotas only, its usage once; it reports the quotas at
// 80% or more and the tenants whose usage is unknown, and prints nothing
// when there is neither. A broker that does not answer is skipped.
func TestCollectQuotas(t *testing.T) {
	m := &quotaMesh{hot: 850}
	srv := httptest.NewServer(m)
	defer srv.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // refuses connections
	f := &meshfile.File{Regions: []meshfile.Region{{Name: "r1", Nodes: []meshfile.Node{
		{ID: "k1", Role: "bookie", Admin: "http://bookie.invalid", State: "alive"},
		{ID: "b1", Role: "broker", Admin: dead.URL, State: "alive"},
		{ID: "b2", Role: "broker", Admin: srv.URL, State: "suspect"},
	}}}}
	q, err := CollectQuotas(context.Background(), &admin.Client{}, f)
	if err != nil {
		t.Fatal(err)
	}
	want := []Near{{Tenant: "hot", Quota: "publish_rate", Unit: "msgs/s", Limit: 1000, Use: 850}}
	if !reflect.DeepEqual(q.Near, want) || len(q.Unknown) != 1 || !strings.Contains(q.Unknown["dark"], "quota_unavailable") {
		t.Errorf("quotas %+v", q)
	}
	slices.Sort(m.paths)
	if wantPaths := []string{"/admin/v1/tenants", "/admin/v1/tenants/dark/usage", "/admin/v1/tenants/hot/usage"}; !slices.Equal(m.paths, wantPaths) {
		t.Errorf("asked %v, want %v", m.paths, wantPaths)
	}
	var out bytes.Buffer
	PrintQuotas(&out, q)
	if got := out.String(); got != "\ntenants near a limit (80% or more of a mesh-wide quota):\n  hot: publish_rate 850/s of 1000/s (85%)\n"+
		"quota usage unknown for dark: admin API: 503 quota_unavailable: region r1: quota coordinator not wired on this node\n" {
		t.Errorf("printed %q", got)
	}

	m.hot = 799
	q, err = CollectQuotas(context.Background(), &admin.Client{}, f)
	if err != nil || len(q.Near) != 0 {
		t.Fatalf("at 79.9%%: %+v %v", q, err)
	}
	q.Unknown = nil
	out.Reset()
	PrintQuotas(&out, q)
	if out.Len() != 0 {
		t.Errorf("nothing near: printed %q", out.String())
	}

	if _, err := CollectQuotas(context.Background(), &admin.Client{}, &meshfile.File{}); err == nil {
		t.Error("no broker: no error")
	}
}

func TestQuotaValue(t *testing.T) {
	for _, c := range []struct {
		unit string
		v    float64
		want string
	}{
		{"msgs/s", 812.4, "812/s"}, {"msgs/s", 0.5, "1/s"}, {"bytes/s", 1.5 * 1024 * 1024, "1.5 MiB/s"},
		{"bytes", 1 << 30, "1.0 GiB"}, {"connections", 37, "37"}, {"topics", 2.6, "3"},
	} {
		if got := QuotaValue(c.unit, c.v); got != c.want {
			t.Errorf("QuotaValue(%s, %v) = %q, want %q", c.unit, c.v, got, c.want)
		}
	}
	if Percent(812, 1000) != "81%" || Percent(5, 0) != "-" || Percent(1000, 1000) != "100%" {
		t.Error("Percent")
	}
}
