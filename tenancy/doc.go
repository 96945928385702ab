// Package tenancy is the control plane's model (ARCHITECTURE §5): the one
// name type for tenants, namespaces and topics, tenants with their admins
// and quotas, namespaces and their policies, the records of their NATS
// credentials (accounts, users, revocations; signed by tenancy/creds),
// and the mesh-wide merge rule
// that makes every region's copy of them converge.
//
// It is pure Go: no net, os or clock. Time is passed in (an HLC
// timestamp, a wall time); etcd, HTTP and the WAN sit in thin drivers
// outside it (package region wires them; package admin serves them).
//
// What it must not do: I/O on the data path. The broker consults what it
// decides through small interfaces the broker defines.
package tenancy
