// Package status builds `strata status`: the live view of a running mesh.
// It starts from mesh.json (where every node is) and asks the nodes over
// their admin HTTP for their Serf views (GET /admin/v1/members), then
// merges those views into one state per node.
//
// It owns the merge rule and the human table. It must not change the mesh.
package status
