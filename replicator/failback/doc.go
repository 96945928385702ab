// Package failback decides when the clients of a region that was lost may
// go home: the switch-back rule of client failover (docs/architecture.md
// "Client failover").
//
// A broker holds guests: connections of clients whose home is another
// region, which came to one of its failover listeners because their home
// was unreachable for them. For every remote region the broker feeds a
// Tracker what it sees of it (Observe: reachable over the Serf WAN pool
// and the replication link, and whether its replication toward that
// region has caught up); the Tracker moves through
//
//	away (unreachable) → returned (reachable, catching up)
//	  → settling (caught up since T) → home (at T + SwitchBackDelay)
//
// and any loss of reachability on the way starts over from away, so the
// delay is served in full on every round, never only on the first; losing
// the caught-up state while settling goes back to returned. Only the step
// into home is a switch-back: the driver then closes that region's
// guests (nats.go reconnects to the first URL of its list, the home
// region's brokers) and refuses new ones while the region stays home.
//
// The package is a deterministic core: no goroutines, no clock (time is
// passed in), no I/O; the region's driver (region/failover.go) polls the
// pools and cursors, calls Observe and acts on its answer. A Tracker is
// not safe for concurrent use; its driver serializes calls.
package failback
