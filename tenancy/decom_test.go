package tenancy

import (
	"errors"
	"slices"
	"testing"
)

func nsOf(t, n string, repl ...string) Namespace {
	return Namespace{Tenant: t, Name: n, Policies: Policies{Replication: repl}}
}

// TestPlanDecommission: only namespaces naming the region change, in
// name order, each keeping the rest of its list in order and the
// region's epoch; a namespace only in the region, an unknown region and
// a region no list names are refused, naming what is wrong.
func TestPlanDecommission(t *testing.T) {
	e := HLC{Wall: 9, Region: "A"}
	b := nsOf("t", "b", "A", "C", "B")
	b.ReplicationEpochs = map[string]HLC{"C": e}
	nss := []Namespace{b, nsOf("t", "a", "C", "A"), nsOf("t", "x", "A", "B")}
	plan, err := PlanDecommission(nss, "C", []string{"A", "B", "C"})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 2 || plan[0].Namespace != "t/a" || plan[1].Namespace != "t/b" ||
		!slices.Equal(plan[1].After, []string{"A", "B"}) || !slices.Equal(plan[1].Before, []string{"A", "C", "B"}) || plan[1].Epoch != e || !plan[0].Epoch.IsZero() {
		t.Fatalf("plan %+v", plan)
	}
	if !slices.Equal(nss[0].Policies.Replication, []string{"A", "C", "B"}) {
		t.Fatal("the plan changed its input")
	}
	for _, c := range []struct {
		nss    []Namespace
		region string
		want   error
		names  string
	}{
		{append(nss, nsOf("u", "only", "C")), "C", ErrDecomLast, "u/only"},
		{nss, "D", ErrDecomRegion, "D"},
		{nss, "a.b", ErrDecomRegion, "a.b"},
		{[]Namespace{nsOf("t", "x", "A")}, "B", ErrDecomNoChanges, "B"},
	} {
		_, err := PlanDecommission(c.nss, c.region, []string{"A", "B", "C", "a.b"})
		if !errors.Is(err, c.want) || !contains(err.Error(), c.names) {
			t.Errorf("%s: %v, want %v naming %s", c.region, err, c.want, c.names)
		}
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub))
}

// TestStepDecommission: the state machine: start → pending → confirmed
// or cancelled; retries of the last step are no-ops; everything else is
// refused with the state named.
func TestStepDecommission(t *testing.T) {
	st := func(w int64) HLC { return HLC{Wall: w, Region: "A"} }
	plan := []DecomNamespace{{Namespace: "t/a", Before: []string{"A", "C"}, After: []string{"A"}}}
	if _, _, err := StepDecommission(nil, "C", DecomConfirm, nil, st(1)); !errors.Is(err, ErrDecomNotFound) {
		t.Fatalf("confirm of none: %v", err)
	}
	if _, _, err := StepDecommission(nil, "C", "stop", nil, st(1)); !errors.Is(err, ErrDecomAction) {
		t.Fatalf("bad action: %v", err)
	}
	p, changed, err := StepDecommission(nil, "C", DecomStart, plan, st(1))
	if err != nil || !changed || p.State != DecomPending || p.Started != st(1) || len(p.Namespaces) != 1 {
		t.Fatalf("start: %+v %v %v", p, changed, err)
	}
	if _, _, err := StepDecommission(&p, "C", DecomStart, plan, st(2)); !errors.Is(err, ErrDecomState) {
		t.Fatalf("start of a pending one: %v", err)
	}
	c, changed, err := StepDecommission(&p, "C", DecomConfirm, nil, st(3))
	if err != nil || !changed || c.State != DecomConfirmed || c.Changed != st(3) || c.Started != st(1) {
		t.Fatalf("confirm: %+v %v %v", c, changed, err)
	}
	if again, changed, err := StepDecommission(&c, "C", DecomConfirm, nil, st(4)); err != nil || changed || again.Changed != st(3) {
		t.Fatalf("confirm again: %+v %v %v", again, changed, err)
	}
	if _, _, err := StepDecommission(&c, "C", DecomCancel, nil, st(4)); !errors.Is(err, ErrDecomState) || !contains(err.Error(), "confirmed") {
		t.Fatalf("cancel of a confirmed one: %v", err)
	}
	if n, changed, err := StepDecommission(&c, "C", DecomStart, plan, st(5)); err != nil || !changed || n.State != DecomPending {
		t.Fatalf("start after confirm: %+v %v", n, err)
	}
	x, _, err := StepDecommission(&p, "C", DecomCancel, nil, st(6))
	if err != nil || x.State != DecomCancelled {
		t.Fatalf("cancel: %+v %v", x, err)
	}
	if _, _, err := StepDecommission(&x, "C", DecomConfirm, nil, st(7)); !errors.Is(err, ErrDecomState) {
		t.Fatalf("confirm of a cancelled one: %v", err)
	}
}

// TestReplicationEpochs: a region already listed keeps its epoch, one
// added gets the write's stamp, one removed loses it; so removing and
// adding back gives a new epoch, and a cancel restores the old one.
func TestReplicationEpochs(t *testing.T) {
	s1, s2, s3 := HLC{Wall: 1, Region: "A"}, HLC{Wall: 2, Region: "A"}, HLC{Wall: 3, Region: "A"}
	seeded := nsOf("t", "a", "A", "B")
	if e := ReplicationEpochs(&seeded, []string{"A", "B"}, s1); e != nil {
		t.Fatalf("unchanged seeded list: %v", e)
	}
	added := ReplicationEpochs(&seeded, []string{"A", "B", "C"}, s1)
	if len(added) != 1 || added["C"] != s1 {
		t.Fatalf("added C: %v", added)
	}
	ns := nsOf("t", "a", "A", "B", "C")
	ns.ReplicationEpochs = added
	removed := ReplicationEpochs(&ns, []string{"A", "B"}, s2)
	ns2 := nsOf("t", "a", "A", "B")
	ns2.ReplicationEpochs = removed
	back := ReplicationEpochs(&ns2, []string{"A", "B", "C"}, s3)
	if removed != nil || back["C"] != s3 {
		t.Fatalf("removed %v, back %v: want a new epoch", removed, back)
	}
	d := Decommission{Region: "C", Namespaces: []DecomNamespace{{Namespace: "t/a", Epoch: s1}}}
	r, ok := RestoreReplication(ns2, d)
	if !ok || !slices.Equal(r.Policies.Replication, []string{"A", "B", "C"}) || r.ReplicationEpochs["C"] != s1 {
		t.Fatalf("restored %+v %v", r, ok)
	}
	if _, ok := RestoreReplication(r, d); ok {
		t.Fatal("restored twice")
	}
	if _, ok := RestoreReplication(nsOf("t", "other", "A"), d); ok {
		t.Fatal("restored a namespace the decommission did not change")
	}
	ns2.Parked = map[string]HLC{"C": s1}
	if r, _ := RestoreReplication(ns2, d); r.Parked != nil {
		t.Fatalf("a cancel left C parked: %v", r.Parked)
	}
	if p := CarryParked(&ns2, []string{"A", "B"}); p["C"] != s1 {
		t.Fatalf("a write dropped the parked region: %v", p)
	}
}

// TestDecommissionRecord: the record round-trips through Record.Check;
// malformed ones are refused.
func TestDecommissionRecord(t *testing.T) {
	st := HLC{Wall: 1, Region: "A"}
	r, err := NewRecord(Decommission{Region: "C", State: DecomPending}, st)
	if err != nil || r.Check() != nil || r.Kind != KindDecommission || r.Key != "C" {
		t.Fatalf("%+v %v %v", r, err, r.Check())
	}
	for _, bad := range []Record{
		{Kind: KindDecommission, Key: "C", Stamp: st, Value: []byte(`{"region":"D","state":"pending"}`)},
		{Kind: KindDecommission, Key: "C", Stamp: st, Value: []byte(`{"region":"C","state":"gone"}`)},
		{Kind: KindDecommission, Key: "C", Stamp: st, Value: []byte(`{"region":`)},
		{Kind: KindDecommission, Key: "a.b", Stamp: st, Deleted: true},
	} {
		if bad.Check() == nil {
			t.Errorf("accepted %s", bad.Value)
		}
	}
	s := NewState()
	s.Merge(r)
	if d, ok := s.Decommission("C"); !ok || d.State != DecomPending || len(s.Decommissions()) != 1 {
		t.Fatalf("state: %+v %v", d, ok)
	}
}
