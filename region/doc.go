// Package region assembles the nodes of one region: a node is one OS
// process with a role (meta, broker or bookie), its own admin HTTP port and
// its own Serf membership.
//
// It owns the wiring of a node: the region's metadata store (an embedded
// single-node etcd on a meta node; a client of it everywhere), the region's
// Serf LAN pool (every node) and the mesh-wide WAN pool (brokers), the
// node's registration in etcd under a lease, its admin HTTP server and
// its start and stop. Later issues give brokers and bookies their work;
// they plug in here.
//
// The admin API's routes, types and error codes are package admin's; a
// node only mounts admin's route table (admin.go), with backends that
// adapt the node's parts to admin's interfaces and convert their values
// into admin's types (adminconv.go, checked field for field by
// TestAdminConversions).
//
// It must not: contain protocol logic (NATS, the bookie protocol,
// replication), which lives in broker, bookie and replicator, nor admin
// handlers, request parsing or wire types, which live in admin.
//
// Concurrency: StartNode returns a running node; Stop is idempotent, waits
// for every goroutine the node started and releases every port.
package region
