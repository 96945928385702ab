// Package store is tenancy's thin driver over one region's etcd and the
// WAN (ARCHITECTURE §5 "Config replication"): it keeps the region's copy
// of every configuration record (tenants, namespaces and their policies,
// admin tokens) under "config/<kind>/<key>" in the region's metadata
// store, and ships records to the other regions so that every region
// converges to the same State by tenancy's merge rule (last writer wins
// by HLC; deletes are tombstones).
//
// # What it owns
//
//   - Store: writes (stamped with the region's HLC after observing the
//     stored record, written by a compare-and-swap on the key's
//     revision), merges of records from other regions (kept only when
//     newer, also by compare-and-swap), and a cached State fed by an etcd
//     watch, with change callbacks. Every broker of a region runs one;
//     they share the region's etcd, so they agree.
//   - Syncer: pushes changed records to every other region at once, and
//     the whole State every Interval (anti-entropy), so a region that was
//     cut off or frozen converges within one Interval of returning; a
//     region that receives a full State answers with what the sender
//     lacks. A cut-off region keeps serving with what it has.
//
// # What it must not do
//
// Decide policy (package tenancy does) or serve HTTP (package admin
// does). It never blocks a caller on the WAN: pushes are fire-and-forget
// and a lost one is repaired by the next anti-entropy round.
//
// # Concurrency
//
// Store and Syncer are safe for concurrent use. Each owns one goroutine,
// stopped by Close. Change callbacks run on the watch goroutine, one at a
// time, and must not block (they are the caller's cue to re-read).
package store
