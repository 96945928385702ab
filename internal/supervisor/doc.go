// Package supervisor is `strata up`: it runs every node of a topology as
// its own OS process on this machine, writes the resolved endpoints to
// <data-dir>/mesh.json, prints them, reports nodes that die, and on
// shutdown stops every node cleanly, leaving their data for the next run.
//
// It owns: the start order (each region's meta node first, so etcd and a
// Serf LAN seed exist; then one broker per region, each joining the WAN
// pool through the first; then everything else in parallel), the nodes'
// command lines and logs under <data-dir>/logs, the data directory lock,
// mesh.json's lifecycle, and serving the fault socket <data-dir>/fault.sock
// while it runs. Node processes themselves (parent-death signal, ready
// reports, stop, faults) are package harness's.
//
// It must not: contain node logic; a node is `strata node` (package region)
// and talks to the supervisor only through its command line, its one-line
// JSON report on stdout, its exit status and signals.
//
// Concurrency: Run blocks until its context ends or a start fails; it owns
// every goroutine and child process it starts and waits for them.
package supervisor
