package broker

// Quotas is the tenant quota gate the broker consults (ARCHITECTURE §5;
// tenancy/quota implements it, region wires it). The broker holds no
// quota logic: it asks, and refuses what it is told to.
//
// A publish's tenant is its connection's account with NATS auth on,
// else the subject's first token (shared/specs/nats-wire.md §4); the
// system account's publishes (replication, the broker's own) are never
// charged. Calls are made on client reader goroutines and must not
// block.
type Quotas interface {
	// AdmitPublish charges one core NATS publish of size bytes (header
	// and payload) by tenant at its origin. nil admits; an error refuses,
	// and its text (naming the tenant, the quota, its limit and use) is
	// what the client is told.
	AdmitPublish(tenant string, size int) error
	// Connect takes one connection of tenant (at CONNECT, with auth on);
	// an error refuses the connection. Disconnect gives it back (called
	// once per accepted Connect, when the connection closes).
	Connect(tenant string) error
	Disconnect(tenant string)
}
