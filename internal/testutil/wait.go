package testutil

import (
	"testing"
	"time"
)

// PollInterval is how often Eventually re-checks its condition.
const PollInterval = 20 * time.Millisecond

// Eventually checks cond every PollInterval until it returns true, and
// fails the test naming what was awaited if timeout passes first. It
// returns how long the wait took, so tests can print the measured time.
func Eventually(t testing.TB, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
	return time.Since(start)
}
