// Package status builds `strata status`: the live view of a running mesh.
// It starts from mesh.json (where every node is) and asks the nodes over
// their admin HTTP for their Serf views (GET /admin/v1/members), then
// merges those views into one state per node. recovery.go adds what the
// brokers say of client failover (GET /admin/v1/regions) and region
// decommission (GET /admin/v1/regions/{region}/decommission): the
// regions not home, pending decommissions, stale cursor positions.
//
// It owns the merge rule and the human table. It must not change the mesh.
package status
