package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/testutil"
)

// TestDecommission runs decomScenario on the default mesh, its nodes
// with the decom-fail test hook (the first 3 deletions of replicator
// cursor positions fail, retried after 50 ms).
func TestDecommission(t *testing.T) {
	t.Setenv("STRATA_TEST_HOOKS", "decom-fail=3,decom-backoff=50ms")
	dataDir := filepath.Join(t.TempDir(), "data")
	up := startUp(t, dataDir)
	began := time.Now()
	decomScenario(t, up, dataDir)
	t.Logf("decommission scenario: %v", time.Since(began))
}

// decomView is the part of `decommission --json` the scenario reads.
type decomView struct {
	State      string `json:"state"`
	DryRun     bool   `json:"dry_run"`
	Namespaces []struct {
		Namespace string   `json:"namespace"`
		After     []string `json:"after"`
	} `json:"namespaces"`
	Parked []struct {
		Topic string `json:"topic"`
	} `json:"parked"`
	Stale []struct {
		Topic string `json:"topic"`
	} `json:"stale"`
	Cursors []struct {
		Topic string `json:"topic"`
	} `json:"cursors"`
}

// decomScenario, on the default mesh (us-east, eu-west, ap-south):
// ap-south's dry run changes nothing; start takes it out of every list
// and parks the cursors towards it; cancel puts it back; start and
// confirm release the parked cursors (and the stale positions are
// deleted despite the failing hook); ap-south added back to
// demo/streams catches up from the retained messages, including those
// published while it was out.
func decomScenario(t *testing.T, up *upProcess, dataDir string) {
	live, _ := waitAlive(t, up, "the mesh alive")
	const gone = "ap-south"
	decom := func(flags ...string) decomView {
		t.Helper()
		args := append([]string{"admin", "regions", "decommission", gone, "--json", "--data-dir", dataDir, "--timeout", "10s"}, flags...)
		out, errOut, code := strata(t, args...)
		var v decomView
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
			t.Fatalf("decommission %v: exit %d\n%s%s", flags, code, out, errOut)
		}
		return v
	}
	replication := func(region string) []string {
		t.Helper()
		out, errOut, code := strata(t, "admin", "namespaces", "get", "demo/streams", "--json", "--region", region, "--data-dir", dataDir, "--timeout", "10s")
		var ns struct {
			Policies struct {
				Replication []string `json:"replication"`
			} `json:"policies"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &ns) != nil {
			t.Fatalf("namespaces get: exit %d\n%s%s", code, out, errOut)
		}
		return ns.Policies.Replication
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	east, _ := live.NATSURLs("us-east")
	_, js := jsConnect(t, east...)
	publish := func(from, n int) {
		for i := from; i < from+n; i++ {
			if _, err := js.Publish(ctx, "demo.streams.decom", fmt.Appendf(nil, "m%d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	south, _ := live.NATSURLs(gone)
	_, jsSouth := jsConnect(t, south...)
	msgsIn := func(js jetstream.JetStream) uint64 {
		s, err := js.Stream(ctx, "streams:decom")
		if err != nil {
			return 0
		}
		info, err := s.Info(ctx)
		if err != nil {
			return 0
		}
		return info.State.Msgs
	}
	publish(0, 20)
	testutil.Eventually(t, gone+" has the 20 messages", 60*time.Second, func() bool { return msgsIn(jsSouth) == 20 })

	// Dry run: the plan, nothing changed.
	dry := decom("--dry-run")
	if !dry.DryRun || !slices.ContainsFunc(dry.Namespaces, func(n struct {
		Namespace string   `json:"namespace"`
		After     []string `json:"after"`
	}) bool {
		return n.Namespace == "demo/streams" && !slices.Contains(n.After, gone)
	}) || len(dry.Cursors) == 0 {
		t.Fatalf("dry run: %+v", dry)
	}
	if r := replication("us-east"); !slices.Contains(r, gone) {
		t.Fatalf("the dry run changed demo/streams: %v", r)
	}

	// Start: out of every list, in every other region; cursors parked.
	if v := decom(); v.State != "pending" {
		t.Fatalf("start: %+v", v)
	}
	for _, r := range []string{"us-east", "eu-west"} {
		testutil.Eventually(t, r+" sees "+gone+" out of demo/streams", 30*time.Second, func() bool { return !slices.Contains(replication(r), gone) })
	}
	testutil.Eventually(t, "cursors towards "+gone+" parked", 30*time.Second, func() bool { return len(decom("--status").Parked) > 0 })

	// Cancel: back in the list.
	if v := decom("--cancel"); v.State != "cancelled" {
		t.Fatalf("cancel: %+v", v)
	}
	testutil.Eventually(t, gone+" back in demo/streams", 30*time.Second, func() bool { return slices.Contains(replication("eu-west"), gone) })

	// Start and confirm: parked cursors released, stale positions
	// deleted (after the hook's failures).
	if v := decom(); v.State != "pending" {
		t.Fatalf("start again: %+v", v)
	}
	testutil.Eventually(t, "cursors parked again", 30*time.Second, func() bool { return len(decom("--status").Parked) > 0 })
	publish(20, 5) // while ap-south is out
	if v := decom("--confirm"); v.State != "confirmed" {
		t.Fatalf("confirm: %+v", v)
	}
	testutil.Eventually(t, "no parked or stale cursors towards "+gone, 60*time.Second, func() bool {
		v := decom("--status")
		return len(v.Parked) == 0 && len(v.Stale) == 0
	})
	if n := msgsIn(jsSouth); n != 20 {
		t.Fatalf("%s has %d messages while out of the list, want 20", gone, n)
	}

	// Added back: starts from the retained messages and catches up.
	out, errOut, code := strata(t, "admin", "namespaces", "set-policies", "demo/streams",
		`{"replication":["us-east","eu-west","ap-south"]}`, "--data-dir", dataDir, "--timeout", "10s")
	if code != 0 {
		t.Fatalf("re-adding %s: exit %d\n%s%s", gone, code, out, errOut)
	}
	testutil.Eventually(t, gone+" has all 25 messages", 60*time.Second, func() bool { return msgsIn(jsSouth) == 25 })
	if !strings.Contains(strings.Join(replication("us-east"), ","), gone) {
		t.Fatal("re-added region not listed")
	}
}
