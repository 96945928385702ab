package jetstream

import (
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/tenancy"
)

var bt0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// TestOverQuota: each bound alone, size judged first, nothing counted
// never over, and the refusal's text names what a client must know.
func TestOverQuota(t *testing.T) {
	n := tenancy.Name{Tenant: "acme", Namespace: "orders", Topic: "eu"}
	q := &BacklogQuota{Size: 1000, Age: time.Minute, Policy: tenancy.BacklogReject}
	sb := func(bytes uint64, age time.Duration) subBacklog {
		return subBacklog{name: "billing", from: 5, last: 9, bytes: bytes, oldest: bt0.Add(-age)}
	}
	for _, tc := range []struct {
		name  string
		q     *BacklogQuota
		sb    subBacklog
		bound string // "" for within
	}{
		{"within", q, sb(1000, time.Minute), ""},
		{"size", q, sb(1001, 0), boundSize},
		{"age", q, sb(10, time.Minute+time.Millisecond), boundAge},
		{"both: size first", q, sb(5000, time.Hour), boundSize},
		{"nothing counted", q, subBacklog{name: "x", from: 10, last: 9}, ""},
		{"size off", &BacklogQuota{Age: time.Minute}, sb(1<<40, time.Second), ""},
		{"age off", &BacklogQuota{Size: 1000}, sb(10, 24*time.Hour), ""},
		{"no quota", nil, sb(1<<40, 24*time.Hour), ""},
	} {
		ex := overQuota(tc.q, n, tc.sb, bt0)
		switch {
		case tc.bound == "" && ex != nil:
			t.Errorf("%s: over (%v)", tc.name, ex)
		case tc.bound != "" && (ex == nil || ex.bound != tc.bound):
			t.Errorf("%s: got %v, want the %s bound", tc.name, ex, tc.bound)
		}
	}
	ex := overQuota(q, n, sb(2048, 0), bt0)
	want := `tenant "acme" namespace "orders" topic "eu": subscription "billing" is over its backlog_quota size limit: limit 1000 bytes, backlog 2048 bytes (policy producer_exception)`
	if got := ex.Error(); got != want {
		t.Errorf("size refusal:\n got %s\nwant %s", got, want)
	}
	ex = overQuota(q, n, sb(1, 90*time.Second), bt0)
	ex.held = 3 * time.Second
	want = `tenant "acme" namespace "orders" topic "eu": subscription "billing" is over its backlog_quota age limit: limit 1m0s, oldest unacknowledged message 1m30s old (policy producer_exception: held 3s, then refused)`
	if got := ex.Error(); got != want {
		t.Errorf("age refusal:\n got %s\nwant %s", got, want)
	}
}

// TestEvictThrough: the eviction acknowledges the fewest oldest counted
// messages that bring a subscription within both bounds, never past the
// last message, and nothing when within.
func TestEvictThrough(t *testing.T) {
	// Messages 1..10 of 100 bytes each.
	bytesFrom := func(seq uint64) uint64 {
		if seq > 10 {
			return 0
		}
		return (11 - max(seq, 1)) * 100
	}
	sb := func(from uint64) subBacklog {
		return subBacklog{from: from, last: 10, bytes: bytesFrom(from)}
	}
	for _, tc := range []struct {
		name  string
		q     BacklogQuota
		sb    subBacklog
		newer uint64 // first message within the age bound (0: age not over)
		want  uint64
	}{
		{"size: keep 300 bytes", BacklogQuota{Size: 300}, sb(1), 0, 7},
		{"size: keep 350 bytes", BacklogQuota{Size: 350}, sb(1), 0, 7},
		{"size: from a rewind point", BacklogQuota{Size: 300}, sb(4), 0, 7},
		{"size: within", BacklogQuota{Size: 1000}, sb(1), 0, 0},
		{"size: zero keeps nothing", BacklogQuota{Size: 1}, sb(1), 0, 10},
		{"age", BacklogQuota{Age: time.Second}, sb(1), 6, 5},
		{"age and size: the further", BacklogQuota{Size: 300, Age: time.Second}, sb(1), 3, 7},
		{"age past the last", BacklogQuota{Age: time.Second}, sb(1), 11, 10},
	} {
		if got := evictThrough(&tc.q, tc.sb, bytesFrom, tc.newer); got != tc.want {
			t.Errorf("%s: evictThrough = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestBacklogConfigDefaults(t *testing.T) {
	c := BacklogConfig{Check: -1}.withDefaults()
	if c.Check != DefaultBacklogCheck || c.Hold != DefaultBacklogHold || c.HoldMax != DefaultBacklogHoldMax {
		t.Fatalf("defaults %+v", c)
	}
	if DefaultBacklogHold >= 5*time.Second {
		t.Fatalf("the default hold %v must stay inside nats.go's 5 s publish timeout", DefaultBacklogHold)
	}
	if s := (&backlogExceeded{bound: boundSize, full: 7, policy: tenancy.BacklogHold}).Error(); !strings.Contains(s, "7 publishes held already") {
		t.Fatalf("full refusal %q", s)
	}
}
