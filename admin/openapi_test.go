package admin

import (
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// TestRoutesInOpenAPI: docs/admin-api.yaml describes exactly the route
// table (every backend set): each route with its method, and nothing the
// table does not serve. Each route's security says whether it needs a
// token, and its x-strata-policy is the table's.
func TestRoutesInOpenAPI(t *testing.T) {
	raw, err := os.ReadFile("../docs/admin-api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Security *[]map[string][]string `yaml:"security"`
			Policy   string                 `yaml:"x-strata-policy"`
		} `yaml:"paths"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	f := &fake{}
	served := map[string]bool{}
	for _, r := range Routes(f.backends()) {
		served[r.String()] = true
		ops, ok := doc.Paths[r.Pattern]
		if !ok {
			t.Errorf("route %s is not in docs/admin-api.yaml", r)
			continue
		}
		op, ok := ops[strings.ToLower(r.Method)]
		if !ok {
			t.Errorf("route %s: method %s is not in docs/admin-api.yaml", r, r.Method)
			continue
		}
		if op.Policy != r.Policy.String() {
			t.Errorf("route %s: x-strata-policy %q in docs/admin-api.yaml, %q in the route table", r, op.Policy, r.Policy)
		}
		// Public routes say security: [] (no token); the others inherit
		// the document's bearer requirement.
		if public := op.Security != nil && len(*op.Security) == 0; public != (r.Policy == Public) {
			t.Errorf("route %s (%v): docs/admin-api.yaml says public=%v", r, r.Policy, public)
		}
	}
	var extra []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if m := strings.ToUpper(method); !served[m+" "+path] && m != "PARAMETERS" {
				extra = append(extra, m+" "+path)
			}
		}
	}
	sort.Strings(extra)
	for _, e := range extra {
		t.Errorf("docs/admin-api.yaml describes %s, which no route serves", e)
	}
}
