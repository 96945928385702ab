package admin

import (
	"net/http"
)

// Backends are what the routes ask. Each is a small interface that
// region implements for one node; a nil backend leaves its routes out
// (a bookie node has no topics, a broker no local bookie). This package
// keeps no state of its own: everything a route answers comes from a
// backend, converted by the backend to this package's wire types.
type Backends struct {
	// Region names the node's region in the answers that carry it.
	Region string
	// Regions are the mesh's regions, which a tenant's per-region quota
	// caps must name (nil: any valid region name is accepted).
	Regions []string

	Health        Health               // /healthz, /readyz
	Metrics       http.Handler         // /metrics
	Members       MembersBackend       // /admin/v1/members
	Bookie        BookieBackend        // /admin/v1/bookie… (bookie nodes)
	Bookies       BookiesBackend       // /admin/v1/bookies
	Ledgers       LedgersBackend       // /admin/v1/ledgers…
	Topics        TopicsBackend        // /admin/v1/topics… (brokers)
	Subscriptions SubscriptionsBackend // PUT/DELETE …/subscriptions/{sub} (brokers; needs Topics)
	Offload       OffloadBackend       // …/offload (brokers)
	Bundles       BundlesBackend       // /admin/v1/bundles…, /admin/v1/operations/{id} (brokers)
	Replication   ReplicationBackend   // /admin/v1/replication (brokers)
	Tier          TierBackend          // /admin/v1/tier (brokers)
	Tenancy       TenancyBackend       // /admin/v1/tenants…, /admin/v1/namespaces…, /admin/v1/tokens… (brokers)
	Users         UsersBackend         // /admin/v1/tenants/{t}/users… (brokers)
	Usage         UsageBackend         // /admin/v1/tenants/{t}/usage (brokers; needs Tenancy)
	Audit         AuditBackend         // …/origins, /admin/v1/testhooks/… (brokers)
	Decommission  DecommissionBackend  // /admin/v1/regions/{region}/decommission (brokers)
	RegionStates  RegionsBackend       // /admin/v1/regions (brokers)
}

// Routes is the route table for b: every admin route whose backend is
// set, with its policy. Adding a route is adding a row to one of the
// area functions below (or a new area with its backend in Backends).
func Routes(b Backends) []Route {
	var out []Route
	add := func(on bool, rs func() []Route) {
		if on {
			out = append(out, rs()...)
		}
	}
	add(b.Health != nil, b.healthRoutes)
	add(b.Metrics != nil, func() []Route {
		return []Route{{http.MethodGet, "/metrics", Superuser, b.Metrics.ServeHTTP}}
	})
	add(b.Members != nil, b.memberRoutes)
	add(b.Bookie != nil, b.bookieRoutes)
	add(b.Bookies != nil, b.bookiesRoutes)
	add(b.Ledgers != nil, b.ledgerRoutes)
	add(b.Topics != nil, b.topicRoutes)
	add(b.Topics != nil && b.Subscriptions != nil, b.subscriptionRoutes)
	add(b.Offload != nil, b.offloadRoutes)
	add(b.Bundles != nil, b.bundleRoutes)
	add(b.Replication != nil, b.replicationRoutes)
	add(b.Tier != nil, b.tierRoutes)
	add(b.Tenancy != nil, b.tenancyRoutes)
	add(b.Decommission != nil, b.decommissionRoutes)
	add(b.Users != nil, b.userRoutes)
	add(b.Tenancy != nil && b.Usage != nil, b.usageRoutes)
	add(b.Audit != nil, b.auditRoutes)
	add(b.RegionStates != nil, b.regionRoutes)
	return out
}
