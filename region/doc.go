// Package region assembles the nodes of one region: a node is one OS
// process with a role (meta, broker or bookie), its own admin HTTP port and
// its own Serf membership.
//
// It owns the wiring of a node: the region's metadata store (an embedded
// single-node etcd on a meta node; a client of it everywhere), the region's
// Serf LAN pool (every node) and the mesh-wide WAN pool (brokers), the
// node's registration in etcd under a lease, its admin HTTP server
// (/healthz, /readyz, /metrics, /admin/v1/members) and its start and stop.
// Later issues give brokers and bookies their work; they plug in here.
//
// It must not: contain protocol logic (NATS, the bookie protocol,
// replication), which lives in broker, bookie and replicator.
//
// Concurrency: StartNode returns a running node; Stop is idempotent, waits
// for every goroutine the node started and releases every port.
package region
