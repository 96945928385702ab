package region

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// TestHooksEnv names the environment variable of a node's test hooks:
// faults that e2e tests inject into real processes. Never set in
// production; a node with hooks logs them at start. Its value is a
// comma-separated list of entries:
//
//	1 (or audit)       the audit's admin hooks: remove a message from
//	                   this region's copy, freeze a replicator cursor
//	                   (jetstream.Config.TestHooks; POST
//	                   /admin/v1/testhooks/...)
//	decom-fail=N       the first N deletions of replicator cursor
//	                   positions fail (jetstream.CursorDropConfig.FailFirst)
//	decom-backoff=D    the first wait between deletion tries (a Go
//	                   duration; default 1 s), so a test's rounds are short
const TestHooksEnv = "STRATA_TEST_HOOKS"

// testHooks are the parsed test hooks (zero: none).
type testHooks struct {
	Admin        bool
	DecomFail    int64
	DecomBackoff time.Duration
}

// parseTestHooks parses a TestHooksEnv value ("" is no hooks). Errors
// name the entry that is wrong.
func parseTestHooks(s string) (testHooks, error) {
	var h testHooks
	if strings.TrimSpace(s) == "" {
		return h, nil
	}
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "1" || e == "audit" {
			h.Admin = true
			continue
		}
		name, val, ok := strings.Cut(e, "=")
		if !ok || val == "" {
			return testHooks{}, fmt.Errorf("%s: %q: want 1, audit or name=value", TestHooksEnv, e)
		}
		switch name {
		case "decom-fail":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 0 {
				return testHooks{}, fmt.Errorf("%s: decom-fail=%q: want a count, 0 or more", TestHooksEnv, val)
			}
			h.DecomFail = n
		case "decom-backoff":
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				return testHooks{}, fmt.Errorf("%s: decom-backoff=%q: want a positive duration such as 100ms", TestHooksEnv, val)
			}
			h.DecomBackoff = d
		default:
			return testHooks{}, fmt.Errorf("%s: unknown hook %q (known: 1, audit, decom-fail, decom-backoff)", TestHooksEnv, name)
		}
	}
	return h, nil
}

// envTestHooks is the node's test hooks from its environment.
func envTestHooks() (testHooks, error) { return parseTestHooks(os.Getenv(TestHooksEnv)) }
