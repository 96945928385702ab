// Package bundle is the placement core of topic ownership
// (ARCHITECTURE §3 "Ownership"): a namespace's topics are split into hash
// bundles, and each bundle is owned by one broker of the region at a time.
//
// It owns, as plain deterministic Go with no I/O, clock or randomness:
//   - Bundle ranges: a namespace with N bundles splits the 32-bit hash
//     space into N equal ranges, named as Pulsar names them
//     ("0x00000000_0x40000000"); a topic belongs to the range holding
//     the hash of "tenant/namespace/topic" (TopicHash).
//   - Placement decisions over a View (the bundles, the live brokers and
//     the current owners, as every broker sees them in etcd): which broker
//     should acquire an unowned bundle (Acquirer: an admin unload's target,
//     else the least loaded live broker, ties broken by rendezvous hashing
//     so that every broker computes the same answer), and which bundle an
//     overloaded broker should hand over (Shed).
//
// Load is counted in owned bundles: a broker sheds while it owns at least
// Threshold+1 more bundles than the least loaded live broker, so ownership
// converges to counts that differ by at most Threshold (default 1: an even
// spread) without moving bundles back and forth.
//
// It must not: talk to etcd, open topics or decide correctness. Two
// brokers may disagree for a moment about the View; the etcd transaction
// that creates an ownership key (absent → created under the broker's
// lease) is what guarantees one owner per bundle. Placement only decides
// who tries first.
package bundle
