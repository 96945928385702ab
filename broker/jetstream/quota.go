package jetstream

import "github.com/stratamesh/strata/tenancy/quota"

// Quotas is the tenant quota gate the JetStream layer consults
// (ARCHITECTURE §5; tenancy/quota behind region's adapter). Nil: no
// quotas. Calls must not block.
type Quotas interface {
	// AdmitPublish charges one stored publish of size bytes by tenant at
	// its origin (never a replicated copy); nil admits, an error refuses
	// (JetStream error 10429 with its text).
	AdmitPublish(tenant string, size int) error
	// Check says whether tenant's count k may grow by n now: a topic or a
	// consumer to create (n = 1), bytes to store (quota.Storage, n =
	// size). nil: yes; an error names the quota.
	Check(tenant string, k quota.Kind, n float64) error
	// SetUse reports this broker's current use of count k for tenant:
	// topics and consumers it owns, bytes they store (bookies and tier).
	SetUse(tenant string, k quota.Kind, v float64)
}
