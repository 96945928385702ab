package tenancy

import (
	"strings"
	"testing"
)

// TestPatchPolicies: merge-patch semantics with defaults for null, exact
// keys, and the normalizations PUT and PATCH share.
func TestPatchPolicies(t *testing.T) {
	def := DefaultPolicies([]string{"A", "B"})
	cur := def
	cur.Replication = []string{"A"}
	cur.DedupWindow = 0
	cur.Bundles = 8
	cur.Retention.Time = Day
	for _, c := range []struct {
		patch string
		check func(Policies) bool
		err   string
	}{
		{`{"bundles": 2}`, func(p Policies) bool { return p.Bundles == 2 && p.Retention.Time == Day }, ""},
		{`{"dedup_window": null}`, func(p Policies) bool { return p.DedupWindow == DefaultDedupWindow }, ""},
		{`{"replication": null, "bundles": null}`, func(p Policies) bool { return len(p.Replication) == 2 && p.Bundles == DefaultBundles }, ""},
		{`{"retention": {"time": null}}`, func(p Policies) bool { return p.Retention.Time == 0 && p.Retention.Mode == RetentionLimits }, ""},
		{`{"retention": null}`, func(p Policies) bool { return p.Retention == def.Retention }, ""},
		{`{"backlog_quota": {"size": 5}}`, func(p Policies) bool { return p.BacklogQuota != nil && p.BacklogQuota.Policy == BacklogHold }, ""},
		{`{"retention": {"messages": -1}}`, func(p Policies) bool { return p.Retention.Messages == 0 }, ""},
		{`{"offload": {"threshold": 10}, "backlog_quota": null}`, func(p Policies) bool { return p.Offload != nil && p.Offload.Threshold == 10 && p.BacklogQuota == nil }, ""},
		{`{"Retention": {"time": "1h"}}`, nil, `unknown field "Retention"`},
		{`{"retention": {"Time": "1h"}}`, nil, `unknown field "retention.Time"`},
		{`{"retention": {"time": "5x"}}`, nil, "unknown unit"},
		{`[]`, nil, "want a JSON object"},
	} {
		got, err := PatchPolicies(cur, []byte(c.patch), def)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: err %v, want %q", c.patch, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.patch, err)
		case c.err == "" && !c.check(got):
			t.Errorf("%s: got %+v", c.patch, got)
		}
	}
}
