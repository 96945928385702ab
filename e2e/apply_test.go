package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// applyRegion is a small mesh without tenants: one region, one broker,
// three bookies (E2/Qw2/Qa2).
const applyRegion = `mesh: e2e-apply
regions:
  - name: solo
    brokers: 1
    bookies: 3
    ledger: {ensemble: 2, write_quorum: 2, ack_quorum: 2}
`

// applyTenants is applyRegion with tenant payments and two namespaces.
const applyTenants = applyRegion + `tenants:
  - name: payments
    quotas: {topics: 100}
    namespaces:
      - name: orders
        retention: {time: 7d}
      - name: audit
`

// TestApply: `strata apply` against a running mesh. --dry-run changes
// nothing; apply creates the tenant and namespaces, where a JetStream
// publish is then stored; the same file again is "no changes"; an edit
// of one policy shows exactly that field and applies it; --prune deletes
// a namespace the file no longer names, and one holding topics only with
// --force.
func TestApply(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	up := startUp(t, dataDir, "-f", writeTopology(t, dir, "mesh.yaml", applyRegion))
	live, took := waitAlive(t, up, "the mesh alive")
	t.Logf("mesh alive after %v", took)
	file := writeTopology(t, dir, "tenants.yaml", applyTenants)
	apply := func(args ...string) (string, string, int) {
		t.Helper()
		return strata(t, append([]string{"apply", "-f", file, "--data-dir", dataDir}, args...)...)
	}
	tenants := func() string {
		t.Helper()
		out, errOut, code := strata(t, "admin", "tenants", "list", "--json", "--data-dir", dataDir)
		if code != 0 {
			t.Fatalf("admin tenants list: exit %d: %s", code, errOut)
		}
		var l struct {
			Tenants []struct{ Name string } `json:"tenants"`
		}
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("admin tenants list --json: %v\n%s", err, out)
		}
		var names []string
		for _, tn := range l.Tenants {
			names = append(names, tn.Name)
		}
		return strings.Join(names, ",")
	}

	out, errOut, code := apply("--dry-run")
	want := "+ tenant payments\n+ namespace payments/orders\n+ namespace payments/audit\ndry run: 3 changes, nothing applied\n"
	if code != 0 || out != want {
		t.Fatalf("apply --dry-run: exit %d\n%s%s\nwant\n%s", code, out, errOut, want)
	}
	if got := tenants(); got != "" {
		t.Fatalf("after apply --dry-run the mesh has tenants %q", got)
	}

	out, errOut, code = apply()
	if code != 0 || out != strings.Replace(want, "dry run: 3 changes, nothing applied", "3 changes applied", 1) {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	if got := tenants(); got != "payments" {
		t.Fatalf("after apply the mesh has tenants %q, want payments", got)
	}

	_, js := jsConnect(t, live.Node("solo", "b1").NATS)
	// The namespace is there as soon as apply returns: the first publish
	// on it is stored (topic auto-created), no retry needed.
	start := time.Now()
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	ack, err := js.Publish(pctx, "payments.orders.created", []byte("o1"), jetstream.WithMsgID("o1"))
	pcancel()
	if err != nil || ack.Sequence != 1 {
		t.Fatalf("the first publish on payments.orders.created after apply: %+v, %v; want a PubAck of seq 1", ack, err)
	}
	t.Logf("first publish stored in %v (stream %s)", time.Since(start), ack.Stream)

	if out, errOut, code := apply(); code != 0 || out != "no changes\n" {
		t.Fatalf("second apply: exit %d\n%s%s", code, out, errOut)
	}

	src := strings.Replace(applyTenants, "time: 7d", "time: 14d", 1)
	file = writeTopology(t, dir, "tenants.yaml", src)
	out, errOut, code = apply()
	if want := "~ namespace payments/orders: policies.retention.time \"7d\" → \"14d\"\n1 change applied\n"; code != 0 || out != want {
		t.Fatalf("apply of the edit: exit %d\n%s%s\nwant\n%s", code, out, errOut, want)
	}
	out, errOut, code = strata(t, "admin", "namespaces", "policies", "payments/orders", "--json", "--data-dir", dataDir)
	if code != 0 || !strings.Contains(out, `"time": "14d"`) {
		t.Fatalf("policies after the edit: exit %d\n%s%s", code, out, errOut)
	}

	src = strings.Replace(src, "      - name: audit\n", "", 1)
	file = writeTopology(t, dir, "tenants.yaml", src)
	if out, errOut, code := apply(); code != 0 || out != "no changes\n" {
		t.Fatalf("apply without --prune of a file without audit: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := apply("--prune"); code != 0 || out != "- namespace payments/audit\n1 change applied\n" {
		t.Fatalf("apply --prune: exit %d\n%s%s", code, out, errOut)
	}

	// orders holds a topic: deleted only with --force.
	src = strings.Replace(src, "      - name: orders\n        retention: {time: 14d}\n", "", 1)
	file = writeTopology(t, dir, "tenants.yaml", src)
	out, errOut, code = apply("--prune")
	if code == 0 || !strings.Contains(errOut, "re-run with --force") || !strings.Contains(out, "- namespace payments/orders") {
		t.Fatalf("apply --prune of a namespace with a topic: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = apply("--prune", "--force")
	if code != 0 || !strings.Contains(out, "deleted namespace payments/orders") || !strings.HasSuffix(out, "1 change applied\n") {
		t.Fatalf("apply --prune --force: exit %d\n%s%s", code, out, errOut)
	}
}
