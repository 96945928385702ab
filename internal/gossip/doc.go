// Package gossip runs one Serf membership pool for a node: the region's LAN
// pool, or the mesh-wide WAN pool that brokers of every region join.
//
// It owns: the Serf and memberlist configuration for each profile (loopback,
// LAN, WAN), binding (port 0 is resolved to the real port), joining seeds,
// tags, a snapshot view of members with their states, and a graceful leave.
//
// It must not: decide anything from membership (ownership, replication
// targets and failover belong to the broker and replicator, which read
// Members or wait on Changed).
//
// Concurrency: a Pool is safe for concurrent use. It owns one goroutine that
// drains Serf's event channel so Serf never stalls on a slow reader
// (hashicorp/serf#369); membership changes are coalesced into a single
// pending signal on Changed, so a consumer that reads slowly sees fewer
// wake-ups, never a blocked pool. Close is idempotent and waits for that
// goroutine.
package gossip
