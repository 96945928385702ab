// Package e2e runs Strata as real processes on loopback: it builds the
// strata binary once (TestMain, without -race), starts meshes with
// `strata up`, and kills, stops and inspects their nodes. Tests wait on
// conditions with generous deadlines and print the measured times; speed
// goals belong in benchmarks, not here.
//
// Run with an explicit timeout and one package at a time:
//
//	go test -p 1 -timeout 20m ./e2e/...
package e2e
