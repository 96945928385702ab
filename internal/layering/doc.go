// Package layering holds the repository's one layering test: which
// module packages may import which, and which standard-library and
// third-party packages the pure cores keep out of (CONVENTIONS.md
// "Dependency rules as tests"; ARCHITECTURE.md §1 is the package table
// the rules come from). It has no code of its own: the rules are the
// table in layering_test.go, checked against one `go list -deps` of the
// whole module. A package's own checks that are not about imports (that
// a core starts no goroutine and reads no clock) stay in that package.
package layering
