// Command strata is Strata's one binary: `strata up` runs a whole mesh on
// this machine, `strata node` runs one node of it, and the other
// subcommands validate topologies and inspect a running mesh. This package
// holds flags and subcommands only; the logic lives in the packages it
// calls.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/stratamesh/strata/region"
	"github.com/stratamesh/strata/topology"
)

func main() {
	region.Version = version
	if err := newRoot().Execute(); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		var ce codedError
		if errors.As(err, &ce) {
			fmt.Fprintln(os.Stderr, "strata:", err)
			os.Exit(ce.code)
		}
		var problems topology.Problems
		if errors.As(err, &problems) { // one FILE:LINE:COL line each
			fmt.Fprintln(os.Stderr, "strata: the topology is invalid:")
			fmt.Fprintln(os.Stderr, problems.Error())
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "strata:", err)
		os.Exit(1)
	}
}

// exitError ends the process with code after the command already printed
// what went wrong.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// codedError is printed like any error but ends the process with code
// (e.g. 2 for a drill's bad arguments, 1 for a drill that failed).
type codedError struct {
	code int
	err  error
}

func (e codedError) Error() string { return e.err.Error() }
func (e codedError) Unwrap() error { return e.err }
