package supervisor

import (
	"testing"

	"github.com/stratamesh/strata/internal/harness"
)

// TestMeshNodeKeepsFailover: a broker's failover listeners in its ready
// report reach mesh.json (its region's clients' URL lists are built from
// them).
func TestMeshNodeKeepsFailover(t *testing.T) {
	rep, err := harness.ParseReport([]byte(`{"id":"b1","role":"broker","nats":"nats://127.0.0.1:4222","failover":{"us-east":"nats://127.0.0.1:5222"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := meshNode(rep); n.Failover["us-east"] != "nats://127.0.0.1:5222" || n.NATS != "nats://127.0.0.1:4222" {
		t.Fatalf("mesh.json node %+v", n)
	}
}
