package jetstream_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/internal/testutil"
)

// swapPolicies is a Policies whose namespaces a test replaces.
type swapPolicies struct {
	p atomic.Pointer[jetstream.StaticPolicies]
}

func (s *swapPolicies) set(p jetstream.StaticPolicies) { s.p.Store(&p) }
func (s *swapPolicies) Namespace(t, ns string) (jetstream.Namespace, bool) {
	return (*s.p.Load()).Namespace(t, ns)
}
func (s *swapPolicies) Tenant(t string) bool    { return (*s.p.Load()).Tenant(t) }
func (s *swapPolicies) Namespaces() [][2]string { return (*s.p.Load()).Namespaces() }

func geoPolicies(repl []string, epochs map[string]string, parked map[string]string) jetstream.StaticPolicies {
	return jetstream.StaticPolicies{"demo": {"geo": {AutoCreateTopics: true, Replication: repl, ReplicationEpochs: epochs, Parked: parked}}}
}

// TestCursorDropFailing: r2 leaves the list while every deletion of the
// cursor position fails (the decom-fail hook): a round makes exactly
// CursorDrop.Tries tries, backed off, then stops with the error visible
// (CursorDrops); the position is left but void, so r2 added back (a new
// epoch) starts over from the retained messages, not from the old
// position. A parked cursor (a pending decommission) keeps its position
// and is released when the decommission is confirmed.
func TestCursorDropFailing(t *testing.T) {
	var pols [2]swapPolicies
	for i := range pols {
		pols[i].set(geoPolicies([]string{"r1", "r2"}, nil, nil))
	}
	var regions [2]atomic.Pointer[strataRegion]
	urls := func(i int) []string {
		r := regions[i].Load()
		if r == nil {
			return nil
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		var out []string
		for _, b := range r.brokers {
			if b.srv != nil && !b.stopped {
				out = append(out, b.url())
			}
		}
		return out
	}
	start := func(self int) *strataRegion {
		return newStrataRegion(t, 1, func(c *jetstream.Config) {
			c.Policies = &pols[self]
			c.Region = fmt.Sprintf("r%d", self+1)
			c.RemoteBrokers = func(string) []string { return urls(1 - self) }
			c.Replicator.BackoffInitial, c.Replicator.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
			c.CursorDrop = jetstream.CursorDropConfig{Tries: 3, Backoff: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond, FailFirst: 1000}
		})
	}
	regions[0].Store(start(0))
	regions[1].Store(start(1))
	a := regions[0].Load().brokers[0].js
	nc, err := nats.Connect(regions[0].Load().brokers[0].url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := natsjs.New(nc)
	for i := 0; i < 5; i++ {
		if _, err := js.Publish(testCtx(t), "demo.geo.t", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	name := bqName("geo").String()
	cursor := func() (jetstream.ReplicationStats, bool) {
		for _, rs := range a.Replication() {
			if rs.Topic == name && rs.Remote == "r2" {
				return rs, true
			}
		}
		return jetstream.ReplicationStats{}, false
	}
	testutil.Eventually(t, "r2 has the 5 messages", 10*time.Second, func() bool {
		rs, ok := cursor()
		return ok && rs.Position == 5
	})

	// A pending decommission parks the cursor: position kept, no deletion.
	pols[0].set(geoPolicies([]string{"r1"}, nil, map[string]string{"r2": ""}))
	a.PoliciesChanged()
	testutil.Eventually(t, "the cursor is parked at 5", 10*time.Second, func() bool {
		_, parked := a.CursorDrops()
		_, running := cursor()
		return !running && len(parked) == 1 && parked[0].Remote == "r2" && parked[0].Position == 5
	})
	if left := a.DropHookLeft(); left != 1000 {
		t.Fatalf("a parked position was deleted (%d tries)", 1000-left)
	}

	// Cancelled: the same epoch again, so the cursor resumes from 5 and
	// sends nothing again; then parked once more.
	pols[0].set(geoPolicies([]string{"r1", "r2"}, nil, nil))
	a.PoliciesChanged()
	testutil.Eventually(t, "the cursor resumes at 5", 10*time.Second, func() bool {
		rs, ok := cursor()
		_, parked := a.CursorDrops()
		return ok && rs.Position == 5 && len(parked) == 0
	})
	if rs, _ := cursor(); rs.Sent != 0 {
		t.Fatalf("a cancelled decommission's cursor resent %d messages", rs.Sent)
	}
	pols[0].set(geoPolicies([]string{"r1"}, nil, map[string]string{"r2": ""}))
	a.PoliciesChanged()
	testutil.Eventually(t, "parked again", 10*time.Second, func() bool {
		_, parked := a.CursorDrops()
		return len(parked) == 1
	})

	// Confirmed: the parked position is released and its deletion keeps
	// failing — one round of 3 tries, then the error is visible.
	pols[0].set(geoPolicies([]string{"r1"}, nil, nil))
	a.PoliciesChanged()
	var drop jetstream.CursorDropStatus
	testutil.Eventually(t, "the failed round is visible", 10*time.Second, func() bool {
		drops, parked := a.CursorDrops()
		if len(drops) == 1 && len(parked) == 0 {
			drop = drops[0]
		}
		return drop.Rounds >= 1
	})
	if drop.Topic != name || strings.Join(drop.Remotes, ",") != "r2" || drop.Tries != 3 || !strings.Contains(drop.LastError, "decom-fail") {
		t.Fatalf("drop state %+v", drop)
	}
	// Bounded: one round is 3 tries; the next comes with the policy
	// rounds (backed off), so a few rounds at most, never a hot loop.
	if used := 1000 - a.DropHookLeft(); used < 3 || used%3 != 0 || used > 9 {
		t.Fatalf("%d deletion tries: want whole rounds of 3, few", used)
	}

	// Added back: a new epoch, so the old position (5) is void and the
	// cursor resends from the retained messages (r2 answers them as
	// duplicates by its high-water mark).
	pols[0].set(geoPolicies([]string{"r1", "r2"}, map[string]string{"r2": "2@r1"}, nil))
	a.PoliciesChanged()
	testutil.Eventually(t, "the cursor starts over and catches up", 10*time.Second, func() bool {
		rs, ok := cursor()
		return ok && rs.Position == 5 && rs.Sent >= 5
	})
}
