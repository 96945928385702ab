// Package broker is Strata's serving tier: the NATS front door clients
// connect to, and the region's internal link between brokers.
//
// This file set covers core NATS (NATS protocol §1, shared/specs/nats-wire.md):
// INFO/CONNECT handshake, PUB/HPUB/SUB/UNSUB/MSG/HMSG, headers, wildcards,
// queue groups, request/reply with no-responders (503), verbose, echo,
// server and client pings with stale-connection detection, and bounded
// per-connection output (slow consumers are closed). Parsing and encoding
// live in broker/natsproto; subject matching in broker/sublist.
//
// Routing within a region: every broker keeps one route (a TCP connection
// speaking natsproto.KindRoute) to every other broker of its region,
// found through a PeerSource (the Serf LAN pool in region wiring). Brokers
// announce the (subject, queue) pairs their clients subscribe to; a
// publish goes to local subscribers and, once, to each peer with matching
// interest, carrying the queue groups that peer was chosen for — so each
// queue group in the region gets a message exactly once. Routed messages
// are never forwarded again. Core traffic never leaves the region: routes
// are refused between different meshes or regions.
//
// Tenant quotas (Config.Quotas, quota_gate.go): the broker charges core
// publishes and tenant connections to a gate it is given and refuses what
// the gate refuses; it holds no quota logic itself.
//
// It must not: hold data that cannot be rebuilt from bookies and metadata;
// know about Serf or etcd (region wiring adapts them).
//
// Concurrency: each connection has a reader goroutine (parses and executes
// its ops in order) and a writer goroutine (owns the socket's writes).
// Deliveries append to the target connection's outbound buffer under its
// lock from the publisher's reader goroutine; the writer is kicked once per
// read. A publisher feeding a connection that is over half of MaxPending
// waits up to 20 ms per read for it to drain; a connection over MaxPending
// is closed as a slow consumer. All queues draw 64 KiB blocks from one
// server-wide budget (MaxOutboundTotal, outbudget.go): over half of it,
// client readers that queued anywhere wait up to 20 ms per read; after
// 100 ms over half, or when it is spent, the client connection with the
// largest backlog is closed as a slow consumer. Route readers are never
// held back. Server.Close stops everything and waits.
package broker
