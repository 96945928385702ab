// Package meshfile reads and writes the runtime file <data-dir>/mesh.json
// (docs/topology.md, "Runtime file"): the resolved endpoints of
// every node of a running mesh, written by `strata up` and read by every
// tool that needs to find a node. `strata status --json` prints the same
// shape with each node's state filled in.
//
// It owns the file's types and its atomic replacement (write to a temporary
// file, fsync, rename). It must not start or contact nodes.
package meshfile
