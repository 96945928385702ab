// Package topology owns Strata's topology file: the YAML schema that
// describes a mesh (its regions, their nodes, metadata stores and tiers, and
// the tenants and namespaces that live on it), its defaults, its validation,
// the embedded default mesh, and the resolution of a region's nodes. The
// file format is fixed by docs/topology.md; the yaml tags in
// model.go are its keys.
//
// # Parsing
//
// Parse (and LoadFile, which reads a file first) runs three steps:
//
//  1. decode: goccy/go-yaml parses the text into an AST, which a small
//     walker (decode.go) turns into the model structs by their yaml tags,
//     recording the position of every field path. A value of the wrong type
//     or a malformed unit is reported and left at its zero value; the walk
//     goes on, so one run reports every problem in the file. Anchors,
//     aliases and merge keys ("<<") work; tags are ignored.
//  2. check: validate*.go report unknown and missing fields, duplicate
//     names, bad references, quorum rules, port clashes and the rest, first
//     on the file as written and then, after defaults, on what it means (a
//     region's bookies against its ensemble).
//  3. default: defaults.go fills in every field the file leaves out, so
//     code using a Mesh never re-applies defaults.
//
// Each problem is a Problem printed as "FILE:LINE:COL: PATH: MESSAGE", e.g.
//
//	mesh.yaml:14:9: regions[1].ledger.write_quorum: 4 is larger than ensemble 3
//
// where PATH is the field path and the position is that of the offending
// value, of the key of an unknown or duplicate field, or of the enclosing
// mapping when a field is missing. Problems with the file as a whole
// (syntax errors, an empty file, a second document) have PATH "$". Warnings
// flag risky but legal choices (a region with no spare bookie, an
// ack_quorum of 1); they print with "warning: " before the message and do
// not make a file invalid. An invalid file yields a nil Mesh and a
// Problems error holding every error in file order.
//
// # Units
//
// Sizes, durations and rates have their own types (Size, Duration,
// MsgRate, ByteRate) with parsers, String methods that print them back in
// canonical form, and text, JSON and YAML marshalling (units.go).
//
// # Nodes
//
// A region gives each role (broker, bookie, meta) either a count or
// explicit nodes. Region.NodesOf resolves either form to a list of Nodes:
// counts become b1..bN and k1..kN on 127.0.0.1 with ports 0, and embedded
// metadata becomes one "meta" node.
//
// # What this package must not do
//
// It starts nothing, opens no sockets and does no network I/O (hosts and
// URLs are checked for form only, never resolved); the only file it reads
// is the one LoadFile is given. It keeps no global mutable state: each
// Parse builds a fresh Mesh, Default parses the embedded file afresh on each
// call, and all functions are safe for concurrent use. A Mesh is plain data
// that the caller owns; it is not safe to change it while other goroutines
// read it.
package topology
