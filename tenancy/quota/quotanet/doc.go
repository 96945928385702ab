// Package quotanet is the thin driver around tenancy/quota's cores
// (ARCHITECTURE §5, issue 25): it carries quota.Msg between a region's
// brokers and its coordinator over the brokers' internal subjects, and
// between regions' coordinators over the WAN, runs the coordinator
// election in the region's etcd, and keeps the time.
//
// # What it owns
//
//   - Agent, one per broker process: the broker's quota.Broker (the
//     gate broker.Quotas and jetstream.Quotas the broker consults),
//     a report to the newest coordinator every Config.Interval, and the
//     coordinator's messages applied as they arrive. A broker that has
//     heard of no coordinator yet admits at its static share.
//   - Coordinator, one candidacy per broker process: it campaigns in the
//     region's etcd (election "quota/coordinator", value the broker id);
//     the winner runs a quota.Coordinator whose Term is the leadership's
//     etcd revision (a later leader has a larger one) and Ticks it every
//     Interval. A lost election lease stops the core at once; the next
//     leader starts a fresh one, and the core is safe while two run.
//   - The wire: the subjects listed in wire.go, JSON quota.Msg checked by
//     decodeInbound, and usage requests answered with the core's
//     quota.Coordinator.Usage.
//
// # Addressing
//
// The core names each message's receiver (To, and ToTerm for a
// coordinator of a given term). A broker's report goes to its
// coordinator's term's own subject (coord.<term>); a hello, to the
// newest term it has heard of. A coordinator sends each message of its
// Tick to the broker it names (broker.<id>) or over the WAN to the
// region and term it names (wan.<term>); a coordinator that knows of no
// term of a region sends it a hello (wan.0, no tenants) each Interval,
// as it announces itself to its own brokers (leader). A dropped message
// only loses that round's leases: the core never relies on a message
// arriving.
//
// # Time
//
// Each process has one Clock (NewClock): the wall time when it was made
// plus the monotonic time since. It never jumps, so leases measured on
// it neither stretch nor shrink when NTP steps the wall clock, and
// echoed Unix-nanosecond times compare with it on the same scale. Peers
// never compare their clocks (quota's package doc).
//
// # What it must not do
//
// Decide anything the cores decide (allowances, leases, caps), or block
// a broker's reader goroutine: internal subscription handlers only copy
// the message into a bounded inbox (full: the message is dropped and
// counted), and the gate methods call the core, which takes a mutex
// and does no I/O.
//
// # Concurrency
//
// Agent's gate methods, SetTenants, Stats and TenantUsage are safe for
// concurrent use. Agent and Coordinator each own one goroutine, started
// by Start and stopped by Close (idempotent, waits). The coordinator's
// core is owned by its goroutine alone.
package quotanet
