package tenancy

import (
	"encoding/json"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestMergeOrderFree: regions that merge the same records in any order,
// any number of times, hold the same State (the merge is a CRDT), and
// it is the State a naive rule picks: per ID the record with the
// greatest stamp.
func TestMergeOrderFree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		keys := []string{"a", "b", "c"}
		regions := []string{"A", "B", "C"}
		recs := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Record {
			key := rapid.SampledFrom(keys).Draw(t, "key")
			st := HLC{Wall: rapid.Int64Range(1, 4).Draw(t, "wall"), Logical: rapid.Uint32Range(0, 2).Draw(t, "logical"),
				Region: rapid.SampledFrom(regions).Draw(t, "region")}
			if rapid.Bool().Draw(t, "deleted") {
				return Tombstone(KindTenant, key, st)
			}
			v, _ := json.Marshal(Tenant{Name: key, Quotas: Quotas{Topics: int64(st.Wall)}})
			return Record{Kind: KindTenant, Key: key, Stamp: st, Value: v}
		}), 1, 20).Draw(t, "records")
		// The same stamp is one write: drop records that reuse one
		// (a region never issues a stamp twice).
		seen := map[HLC]bool{}
		recs = slices.DeleteFunc(recs, func(r Record) bool {
			dup := seen[r.Stamp]
			seen[r.Stamp] = true
			return dup
		})
		a, b := NewState(), NewState()
		for _, r := range recs {
			a.Merge(r)
		}
		perm := rapid.Permutation(recs).Draw(t, "order")
		for _, r := range perm {
			b.Merge(r)
			b.Merge(r) // idempotent
		}
		if !slices.EqualFunc(a.Records(), b.Records(), recordsEqual) {
			t.Fatalf("orders disagree:\n%v\n%v", a.Records(), b.Records())
		}
		naive := map[string]Record{}
		for _, r := range recs {
			if old, ok := naive[r.ID()]; !ok || r.Stamp.Compare(old.Stamp) > 0 {
				naive[r.ID()] = r
			}
		}
		for id, want := range naive {
			got, _ := a.Get(want.Kind, want.Key)
			if !recordsEqual(got, want) {
				t.Fatalf("%s: got %v, want %v", id, got, want)
			}
		}
	})
}

func TestClockMonotonic(t *testing.T) {
	c := NewClock("A")
	a := c.Now(100)
	b := c.Now(50) // the wall clock stepped back
	if b.Compare(a) <= 0 {
		t.Fatalf("Now went back: %v then %v", a, b)
	}
	c.Observe(HLC{Wall: 900, Logical: 3, Region: "C"})
	d := c.Now(200)
	if d.Compare(HLC{Wall: 900, Logical: 3, Region: "C"}) <= 0 || d.Region != "A" {
		t.Fatalf("Now after Observe(900.3@C) = %v", d)
	}
}

func TestDurationText(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Duration
		err  bool
	}{{"90s", 90 * Second, false}, {"7d", 7 * Day, false}, {"1h30m", 90 * Minute, false}, {"500ms", 500 * Millisecond, false},
		{"0s", 0, false}, {"", 0, true}, {"5", 0, true}, {"5x", 0, true}, {"-1s", 0, true}, {"s", 0, true},
		{"99999999999999999999d", 0, true}, {"200000d", 0, true}} {
		got, err := ParseDuration(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v", c.in, got, err)
		}
		if err == nil {
			back, err := ParseDuration(got.String())
			if err != nil || back != got {
				t.Errorf("round trip of %q: %q → %v, %v", c.in, got.String(), back, err)
			}
		}
	}
}

func TestPlan(t *testing.T) {
	pol := DefaultPolicies([]string{"A"})
	cur := Config{
		Tenants:    []Tenant{{Name: "a"}, {Name: "old"}},
		Namespaces: []Namespace{{Tenant: "a", Name: "x", Policies: pol}, {Tenant: "old", Name: "y", Policies: pol}},
	}
	p2 := pol
	p2.Bundles = 8
	want := Config{
		Tenants:    []Tenant{{Name: "a"}, {Name: "b"}},
		Namespaces: []Namespace{{Tenant: "a", Name: "x", Policies: p2}, {Tenant: "b", Name: "z", Policies: pol}},
	}
	var got []string
	for _, c := range Plan(cur, want, true) {
		s := c.String()
		for _, f := range c.Fields {
			s += " " + f.Path + ":" + f.From + "→" + f.To
		}
		got = append(got, s)
	}
	exp := []string{"create tenant b", "update namespace a/x policies.bundles:4→8", "create namespace b/z",
		"delete namespace old/y", "delete tenant old"}
	if !slices.Equal(got, exp) {
		t.Fatalf("plan:\n%q\nwant\n%q", got, exp)
	}
	if p := Plan(want, want, true); len(p) != 0 {
		t.Fatalf("plan of a config against itself: %v", p)
	}
	if p := Plan(cur, want, false); len(p) != 3 {
		t.Fatalf("plan without prune deletes: %v", p)
	}
}
