// Package harness is the one place that starts a mesh's node processes
// (`strata node`) and injects process faults into them: SIGKILL, SIGSTOP
// and SIGCONT, and restart, of one node or of a whole region; and, through
// a Links driver given in its Config, cutting the link between two
// regions. `strata up`, `strata drill`, the benchmarks under bench/ and
// the e2e tests all start nodes through it (issue 26, item 1).
//
// It owns: starting a node (its log file receiving stdout and stderr, the
// parent-death signal so that children die with this process, its own
// process group, an optional network namespace), reading the node's
// one-line JSON ready report from stdout, the start timeout, stopping
// (SIGTERM, SIGKILL after a grace period), the state of each node
// (running, frozen, exited, and whether the harness itself ended it), and
// the fault-control endpoint: HTTP over a unix socket (Serve) and its
// client (Dial, Remote).
//
// It must not: know what a node does beyond its role name and its ready
// report, choose start order or seeds (callers build each NodeSpec's
// arguments), or read topology files. Where a mesh's start order matters
// (meta, then bookies, then brokers) the caller starts them in that order;
// RestartRegion follows the same order (meta, bookies, brokers, each role
// in parallel) because seeds and ports are already in the specs.
//
// Concurrency: every method of Harness and Node is safe for concurrent use.
// Fault operations on one node are serialised; operations on different
// nodes run in parallel. The harness owns one goroutine per running
// process (it waits for the exit, then calls Config.OnExit) and one locked
// OS thread that forks every child (Linux sends the parent-death signal
// when the forking thread ends, so forking from arbitrary Go threads could
// kill children early). Close stops every node and waits for all of them;
// after Close, Start and Restart return ErrClosed.
//
// Caller duties: call Close (it is idempotent) before the process exits
// normally; keep OnExit short and non-blocking on the harness (it runs on
// the exit watcher; calling Node methods from it is fine, calling Restart
// or Close from it is not); give each node a distinct (region, id); use
// Freeze only for faults (a frozen node holds its ports and locks).
package harness
