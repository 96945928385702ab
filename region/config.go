package region

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/stratamesh/strata/internal/gossip"
	"github.com/stratamesh/strata/topology"
)

// NodeConfig configures one node. Fields left zero are taken from the
// topology (the node's host and ports, metadata endpoints, WAN seeds).
type NodeConfig struct {
	// Mesh is the validated topology (required).
	Mesh *topology.Mesh
	// Region and ID name the node in the topology (required).
	Region, ID string
	// Role, when set, must match the node's role in the topology (a guard
	// against a mistyped --role); empty takes the topology's.
	Role string
	// DataDir is the mesh's data directory; the node keeps its data under
	// DataDir/<region>/<id> (the meta node: DataDir/<region>/meta).
	DataDir string
	// EtcdEndpoints overrides where the region's metadata is (client URLs).
	// Default: the topology's external etcd endpoints, or the region's meta
	// node at its fixed client port.
	EtcdEndpoints []string
	// LANJoin and WANJoin are Serf seeds (host:port). Default LAN seeds:
	// the region's other explicit nodes with fixed Serf LAN ports; default
	// WAN seeds: the region's wan_join list.
	LANJoin, WANJoin []string
	// Gossip selects Serf timing: ProfileLoopback for `strata up` on one
	// machine; otherwise the LAN pool uses ProfileLAN and the WAN pool
	// ProfileWAN. Default ProfileLAN.
	Gossip gossip.Profile
	// RegistrationTTL is the lease TTL of the node's registration key in
	// etcd: after a crash the key disappears this long later. Default 10 s;
	// must be at least etcd's minimum lease TTL.
	RegistrationTTL time.Duration
	// OwnershipLeaseTTL is a broker's topic-ownership lease: after a
	// broker dies its topics move within about this long. Zero takes the
	// JetStream layer's default (3 s).
	OwnershipLeaseTTL time.Duration
	// Logger receives the node's logs; nil discards them.
	Logger *slog.Logger
}

// DefaultRegistrationTTL is NodeConfig.RegistrationTTL's default.
const DefaultRegistrationTTL = 10 * time.Second

// Validate returns every problem with c.
func (c NodeConfig) Validate() error {
	var errs []error
	if c.Mesh == nil {
		return errors.New("region: NodeConfig.Mesh is required")
	}
	r, ok := c.Mesh.Region(c.Region)
	if !ok {
		errs = append(errs, fmt.Errorf("region: region %q is not in mesh %q", c.Region, c.Mesh.Name))
	} else if n, ok := r.Node(c.ID); !ok {
		errs = append(errs, fmt.Errorf("region: node %q is not in region %q", c.ID, c.Region))
	} else if c.Role != "" && c.Role != n.Role {
		errs = append(errs, fmt.Errorf("region: node %s/%s has role %s in the topology, not %s", c.Region, c.ID, n.Role, c.Role))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("region: NodeConfig.DataDir is required"))
	}
	if c.RegistrationTTL < 0 {
		errs = append(errs, fmt.Errorf("region: RegistrationTTL %v is negative", c.RegistrationTTL))
	}
	switch c.Gossip {
	case "", gossip.ProfileLAN, gossip.ProfileWAN, gossip.ProfileLoopback:
	default:
		errs = append(errs, fmt.Errorf("region: unknown gossip profile %q", c.Gossip))
	}
	return errors.Join(errs...)
}
