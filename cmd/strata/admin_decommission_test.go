package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/tenancy"
)

// TestPrintDecomCancelled: after --cancel the table still shows the
// record's before and after, so the report says which one is in force.
func TestPrintDecomCancelled(t *testing.T) {
	view := admin.DecommissionView{Region: "ap-south", Namespaces: []tenancy.DecomNamespace{
		{Namespace: "demo/events", Before: []string{"us-east", "ap-south"}, After: []string{"us-east"}}}}
	for _, tc := range []struct {
		state  string
		banner bool
	}{{"cancelled", true}, {"pending", false}} {
		view.State = tc.state
		var b bytes.Buffer
		printDecom(&b, decomReport{DecommissionView: view, Asked: "us-east"})
		out := b.String()
		if !strings.Contains(out, "demo/events") || !strings.Contains(out, "decommission of ap-south: "+tc.state) {
			t.Fatalf("%s: %q", tc.state, out)
		}
		if got := strings.Contains(out, "replication list back as BEFORE"); got != tc.banner {
			t.Errorf("%s: says the lists are back: %v, want %v:\n%s", tc.state, got, tc.banner, out)
		}
	}
}
