package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/status"
)

// usageBody is a usage answer as a broker writes it (indented).
const usageBody = `{
  "tenant": "metered",
  "quotas": [
    {
      "quota": "publish_rate",
      "unit": "msgs/s",
      "limit": 1000,
      "use": 812.4,
      "regions": [
        {"region": "us-east", "use": 790.2, "share": 850, "cap": 900, "reachable": true},
        {"region": "eu-west", "use": 12, "share": 75, "reachable": true},
        {"region": "ap-south", "use": 10.2, "share": 75, "reachable": false}
      ]
    },
    {
      "quota": "storage",
      "unit": "bytes",
      "limit": 1073741824,
      "use": 3145728,
      "regions": [
        {"region": "us-east", "use": 1048576, "share": 357913941.3, "reachable": true},
        {"region": "eu-west", "use": 1048576, "share": 357913941.3, "reachable": true},
        {"region": "ap-south", "use": 1048576, "share": 357913941.3, "reachable": false}
      ]
    }
  ]
}
`

// runAdmin runs `strata admin ARGS…` and returns its output and error.
func runAdmin(args ...string) (string, error) {
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"admin"}, args...))
	err := root.Execute()
	return out.String(), err
}

// TestTenantsUsage: `tenants usage` prints a row per quota and region
// (limit, mesh-wide use and its share of the limit, each region's use,
// share, cap and reachability); --json prints the API's answer byte for
// byte; an unknown tenant is the API's error.
func TestTenantsUsage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/admin/v1/tenants/metered/usage":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(usageBody))
		case "/admin/v1/tenants/free/usage":
			admin.WriteJSON(w, http.StatusOK, admin.Usage{Tenant: "free", Quotas: []admin.QuotaUsage{}})
		case "/admin/v1/tenants/down/usage":
			admin.WriteError(w, admin.Errorf(admin.CodeQuotaUnavailable, "", "region us-east: quota coordinator not wired on this node"))
		default:
			admin.WriteError(w, admin.Errorf(admin.CodeTenantNotFound, "t", "the mesh has no tenant nope"))
		}
	}))
	defer srv.Close()
	out, err := runAdmin("tenants", "usage", "metered", "--url", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	want := `tenant metered (use is mesh-wide: rates where published, storage in every region)
QUOTA         LIMIT    USE           REGION    REGION USE  SHARE      CAP    REACHABLE
publish_rate  1000/s   812/s (81%)   us-east   790/s       850/s      900/s  yes
                                     eu-west   12/s        75/s       -      yes
                                     ap-south  10/s        75/s       -      no (last report)
storage       1.0 GiB  3.0 MiB (0%)  us-east   1.0 MiB     341.3 MiB  -      yes
                                     eu-west   1.0 MiB     341.3 MiB  -      yes
                                     ap-south  1.0 MiB     341.3 MiB  -      no (last report)
`
	if out != want {
		t.Errorf("table:\n%s\nwant:\n%s", out, want)
	}
	out, err = runAdmin("tenants", "usage", "metered", "--url", srv.URL, "--json")
	if err != nil || out != usageBody {
		t.Errorf("--json: %v\n%q\nwant the answer unchanged:\n%q", err, out, usageBody)
	}
	if out, err = runAdmin("tenants", "usage", "free", "--url", srv.URL); err != nil || out != "tenant free has no quotas: every quota is unlimited\n" {
		t.Errorf("no quotas: %v %q", err, out)
	}
	if _, err = runAdmin("tenants", "usage", "down", "--url", srv.URL); err == nil || !strings.Contains(err.Error(), "quota_unavailable") {
		t.Errorf("coordinator down: %v", err)
	}
	if _, err = runAdmin("tenants", "usage", "nope", "--url", srv.URL); err == nil || !strings.Contains(err.Error(), "tenant_not_found") {
		t.Errorf("unknown tenant: %v", err)
	}
	if _, err = runAdmin("tenants", "usage", "a.b", "--url", "http://127.0.0.1:1"); err == nil || strings.Contains(err.Error(), "connect") {
		t.Errorf("a bad name: %v, want a refusal before any request", err)
	}
}

// tenantServer serves one tenant (GET) and records the PUT requests.
type tenantServer struct {
	tenant admin.Tenant
	puts   []admin.TenantRequest
}

func (s *tenantServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/admin/v1/tenants/"+s.tenant.Name {
		admin.WriteError(w, admin.Errorf(admin.CodeTenantNotFound, "t", "no such tenant"))
		return
	}
	switch r.Method {
	case http.MethodGet:
		admin.WriteJSON(w, http.StatusOK, s.tenant)
	case http.MethodPut:
		var req admin.TenantRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		s.puts = append(s.puts, req)
		s.tenant.Admins, s.tenant.Quotas = req.Admins, req.Quotas
		admin.WriteJSON(w, http.StatusOK, s.tenant)
	}
}

// TestTenantsCreateRegionCaps: create sends the per-region caps the
// flags give, and prints them.
func TestTenantsCreateRegionCaps(t *testing.T) {
	s := &tenantServer{tenant: admin.Tenant{Name: "pay"}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	out, err := runAdmin("tenants", "create", "pay", "--url", srv.URL, "--publish-rate", "1000", "--publish-bytes", "4MiB/s",
		"--region-publish-rate", "us-east=600/s,eu-west=100", "--region-publish-bytes", "us-east=1MiB/s")
	if err != nil {
		t.Fatal(err)
	}
	want := admin.Quotas{PublishRate: 1000, PublishBytes: 4 << 20, Regions: map[string]admin.RegionQuotas{
		"us-east": {PublishRate: 600, PublishBytes: 1 << 20}, "eu-west": {PublishRate: 100}}}
	if len(s.puts) != 1 || !reflect.DeepEqual(s.puts[0].Quotas, want) {
		t.Fatalf("PUT %+v, want quotas %+v", s.puts, want)
	}
	if !strings.Contains(out, "region caps    eu-west: publish_rate 100/s; us-east: publish_rate 600/s, publish_bytes 1.0 MiB/s") {
		t.Errorf("output:\n%s", out)
	}
}

// TestTenantsUpdate: update changes only what its flags name (a cap of 0
// drops it), keeps the rest, and refuses to run without a flag.
func TestTenantsUpdate(t *testing.T) {
	s := &tenantServer{tenant: admin.Tenant{Name: "pay", Admins: []string{"al"}, Quotas: admin.Quotas{PublishRate: 1000, Storage: 5 << 30,
		Regions: map[string]admin.RegionQuotas{"us-east": {PublishRate: 600}, "eu-west": {PublishRate: 100}}}}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	if _, err := runAdmin("tenants", "update", "pay", "--url", srv.URL, "--region-publish-rate", "us-east=0", "--connections", "50"); err != nil {
		t.Fatal(err)
	}
	want := admin.TenantRequest{Admins: []string{"al"}, Quotas: admin.Quotas{PublishRate: 1000, Storage: 5 << 30, Connections: 50,
		Regions: map[string]admin.RegionQuotas{"eu-west": {PublishRate: 100}}}}
	if len(s.puts) != 1 || !reflect.DeepEqual(s.puts[0], want) {
		t.Fatalf("PUT %+v, want %+v", s.puts, want)
	}
	if _, err := runAdmin("tenants", "update", "pay", "--url", srv.URL, "--region-publish-rate", "eu-west=0", "--publish-rate", "0"); err != nil {
		t.Fatal(err)
	}
	if q := s.puts[1].Quotas; q.Regions != nil || q.PublishRate != 0 || q.Connections != 50 {
		t.Errorf("second update: %+v", q)
	}
	if _, err := runAdmin("tenants", "update", "pay", "--url", srv.URL); err == nil || !strings.Contains(err.Error(), "nothing to change") || len(s.puts) != 2 {
		t.Errorf("no flags: %v (%d PUTs)", err, len(s.puts))
	}
	if _, err := runAdmin("tenants", "update", "nope", "--url", srv.URL, "--topics", "5"); err == nil || !strings.Contains(err.Error(), "tenant_not_found") || len(s.puts) != 2 {
		t.Errorf("unknown tenant: %v", err)
	}
}

// TestRegionCapFlags: malformed per-region caps are refused before any
// request, naming the flag and what is wrong.
func TestRegionCapFlags(t *testing.T) {
	for _, c := range []struct{ flag, val, msg string }{
		{"--region-publish-rate", "us-east", "want REGION=VALUE"},
		{"--region-publish-rate", "us.east=5", "region name \"us.east\""},
		{"--region-publish-rate", "=5", "region name \"\""},
		{"--region-publish-rate", "us-east=", "no value after '='"},
		{"--region-publish-rate", "us-east=fast", "--region-publish-rate us-east"},
		{"--region-publish-rate", "us-east=-5", "--region-publish-rate us-east"},
		{"--region-publish-rate", "us-east=5,us-east=6", "region us-east given twice"},
		{"--region-publish-bytes", "us-east=lots", "--region-publish-bytes us-east"},
	} {
		_, err := runAdmin("tenants", "create", "pay", "--url", "http://127.0.0.1:1", "--publish-rate", "10", c.flag, c.val)
		if err == nil || !strings.Contains(err.Error(), c.msg) || strings.Contains(err.Error(), "connect") {
			t.Errorf("%s %s: %v, want a refusal saying %q", c.flag, c.val, err, c.msg)
		}
	}
	if _, err := runAdmin("tenants", "create", "pay", "--url", "http://127.0.0.1:1", "--topics", "-1"); err == nil || !strings.Contains(err.Error(), "--topics") {
		t.Errorf("--topics -1: %v", err)
	}
}

// FuzzRegionCapFlag: parseRegionCaps either refuses a value naming the
// flag, or returns one valid region name per value with a non-negative
// cap.
func FuzzRegionCapFlag(f *testing.F) {
	for _, s := range []string{"us-east=600/s", "us-east=600", "us-east=0", "us-east", "=5", "a=b=c", "us-east=1MiB/s", "r=9999999999999999999/s", "é=1"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, v string, bytesFlag bool) {
		flag, parse := "--region-publish-rate", parseMsgRate
		if bytesFlag {
			flag, parse = "--region-publish-bytes", parseByteRate
		}
		caps, err := parseRegionCaps(flag, []string{v}, parse)
		if err != nil {
			if !strings.HasPrefix(err.Error(), flag) {
				t.Fatalf("%q: error %q does not name the flag", v, err)
			}
			return
		}
		if len(caps) != 1 {
			t.Fatalf("%q: %v", v, caps)
		}
		for r, n := range caps {
			if !validName(r) || n < 0 || !strings.HasPrefix(v, r+"=") {
				t.Fatalf("%q accepted as %s=%d", v, r, n)
			}
		}
	})
}

// TestStatusJSONQuotas: `status --json` is mesh.json's shape, with
// "quotas" only when a tenant is near a limit or its usage is unknown.
func TestStatusJSONQuotas(t *testing.T) {
	f := &meshfile.File{Mesh: "m"}
	b, _ := json.Marshal(newStatusJSON(f, status.Quotas{}, status.Recovery{}))
	if strings.Contains(string(b), "quotas") || strings.Contains(string(b), "recovery") || !strings.Contains(string(b), `"mesh":"m"`) {
		t.Errorf("nothing to say: %s", b)
	}
	b, _ = json.Marshal(newStatusJSON(f, status.Quotas{Near: []status.Near{{Tenant: "t", Quota: "publish_rate", Unit: "msgs/s", Limit: 10, Use: 9}}}, status.Recovery{}))
	if !strings.Contains(string(b), `"quotas":{"near_limit":[{"tenant":"t","quota":"publish_rate","unit":"msgs/s","limit":10,"use":9}]}`) ||
		!strings.Contains(string(b), `"mesh":"m"`) {
		t.Errorf("a tenant near: %s", b)
	}
	var back meshfile.File
	if err := json.Unmarshal(b, &back); err != nil || back.Mesh != "m" {
		t.Errorf("not mesh.json's shape: %v", err)
	}
	b, _ = json.Marshal(newStatusJSON(f, status.Quotas{}, status.Recovery{Decommissions: []status.DecomAlert{{Region: "r2", State: "pending", Namespaces: 1}}}))
	if !strings.Contains(string(b), `"recovery":{"decommissions":[{"region":"r2","state":"pending","namespaces":1,"parked_cursors":0,"held_msgs":0}]}`) {
		t.Errorf("a decommission pending: %s", b)
	}
}

// TestQuotaFlagsEmpty: an empty value given to a quota flag is an error
// (an unset shell variable must not lift a limit), and a bad one is
// quoted as given.
func TestQuotaFlagsEmpty(t *testing.T) {
	for _, c := range []struct {
		parse func(string, string) (int64, error)
		flag  string
	}{{parseMsgRate, "--publish-rate"}, {parseByteRate, "--publish-bytes"}, {parseSizeFlag, "--storage"}} {
		if _, err := c.parse(c.flag, ""); err == nil || !strings.Contains(err.Error(), c.flag+": empty") {
			t.Errorf("%s \"\": %v; want an error saying it is empty", c.flag, err)
		}
	}
	if _, err := parseMsgRate("--publish-rate", "10/m"); err == nil || !strings.Contains(err.Error(), `"10/m" is not a message rate`) {
		t.Errorf("10/m: %v", err)
	}
}
