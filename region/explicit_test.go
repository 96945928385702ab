package region

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/gossip"
	"github.com/stratamesh/strata/internal/testutil"
)

// freePorts returns n distinct ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// TestExplicitNodesFindEachOther runs nodes of a topology with explicit
// nodes and fixed ports, given no --etcd or --join: they find the metadata
// and their LAN seeds from the topology alone, as `strata node` does on
// real hosts.
func TestExplicitNodesFindEachOther(t *testing.T) {
	p := freePorts(t, 7)
	src := fmt.Sprintf(`mesh: fixed
regions:
  - name: r1
    ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}
    nodes:
      - {id: m1, role: meta, host: 127.0.0.1, client_port: %d, peer_port: %d, serf_lan_port: %d}
      - {id: b1, role: broker, host: 127.0.0.1, admin_port: %d, serf_lan_port: %d, serf_wan_port: %d}
      - {id: k1, role: bookie, host: 127.0.0.1, serf_lan_port: %d}
`, p[0], p[1], p[2], p[3], p[4], p[5], p[6])
	m := parse(t, src)
	base := NodeConfig{Mesh: m, Region: "r1", DataDir: t.TempDir(), Gossip: gossip.ProfileLoopback, RegistrationTTL: 2 * time.Second}
	for _, id := range []string{"m1", "b1", "k1"} {
		c := base
		c.ID = id
		n := startNode(t, c)
		if id == "b1" {
			if got, want := n.Endpoints().Admin, fmt.Sprintf("http://127.0.0.1:%d", p[3]); got != want {
				t.Fatalf("b1 admin = %s, want the fixed %s", got, want)
			}
		}
		if id == "k1" {
			testutil.Eventually(t, "k1 sees all three nodes alive", 10*time.Second, func() bool {
				return aliveIn(n.Members().LAN) == 3
			})
		}
	}
}
