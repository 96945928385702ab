package drill

import "time"

// Ack is one publish acknowledged by a region: the message's id (its
// Nats-Msg-Id, also its payload) and when the PubAck arrived.
type Ack struct {
	ID     string
	Region string
	At     time.Time
}

// Delivery is one message delivered to the drill's consumer in Region at
// At (a redelivery is a second Delivery of the same ID).
type Delivery struct {
	ID     string
	Region string
	At     time.Time
}

// Log is what a drill recorded. Region is the region cut, Survivor the
// region the clients moved to; Regions lists every region of the
// namespace's replication list (Region and Survivor included).
type Log struct {
	Region   string
	Survivor string
	Regions  []string
	Mode     string
	// Load is the producers' target rate in messages per second.
	Load float64
	// SyncInterval is the replicated subscriptions' sync interval (the
	// topology's regions[].replicator.sync_interval; 1 s by default).
	SyncInterval time.Duration

	Start    time.Time // producers and consumers started in Region
	CutBegan time.Time // the fault call was made (zero: taken as Cut)
	Cut      time.Time // the fault call returned: Region is cut
	Healed   time.Time // the heal call returned
	CaughtUp time.Time // every acknowledged message seen in every region; zero: never
	// CatchUpDeadline is when waiting for catch-up gave up (zero when
	// CaughtUp is set).
	CatchUpDeadline time.Time

	Acks       []Ack
	Deliveries []Delivery
	// SurvivorAtCut lists the ids the survivor held when read right
	// after the cut.
	SurvivorAtCut []string
	// Final lists, per region, the ids the region held after catch-up
	// (or at the deadline).
	Final map[string][]string
}
