package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stratamesh/strata/tenancy"
)

// prevNamespace is the live namespace of record cur (nil when absent,
// a tombstone or unreadable): the previous value whose replication
// epochs a write keeps.
func prevNamespace(cur tenancy.Record) *tenancy.Namespace {
	if !live(cur) || cur.Kind != tenancy.KindNamespace {
		return nil
	}
	var ns tenancy.Namespace
	if json.Unmarshal(cur.Value, &ns) != nil {
		return nil
	}
	return &ns
}

// Decommission returns region's decommission record (false: none).
func (s *Store) Decommission(region string) (d tenancy.Decommission, ok bool) {
	s.View(func(st *tenancy.State) { d, ok = st.Decommission(region) })
	return
}

// Decommissions returns every decommission record, by region.
func (s *Store) Decommissions() (out []tenancy.Decommission) {
	s.View(func(st *tenancy.State) { out = st.Decommissions() })
	return
}

// PlanDecommission is what starting the decommission of region would
// change (tenancy.PlanDecommission over this region's namespaces).
func (s *Store) PlanDecommission(region string, regions []string) ([]tenancy.DecomNamespace, error) {
	return tenancy.PlanDecommission(s.Namespaces(""), region, regions)
}

// StepDecommission runs action (tenancy.DecomStart, DecomConfirm or
// DecomCancel) on region's decommission and writes what it changes:
// start removes the region from every replication list naming it,
// cancel puts it back with its old epoch, then the record is written
// (so a failure part-way leaves lists changed and the record not: the
// same request again completes it — each namespace write is
// idempotent). The records reach the other regions by the
// configuration exchange. It returns the record as written.
func (s *Store) StepDecommission(ctx context.Context, region, action string, regions []string) (tenancy.Decommission, error) {
	cur, had := s.Decommission(region)
	var curp *tenancy.Decommission
	if had {
		curp = &cur
	}
	var plan []tenancy.DecomNamespace
	if action == tenancy.DecomStart && (curp == nil || cur.State != tenancy.DecomPending) {
		p, err := s.PlanDecommission(region, regions)
		if err != nil {
			return tenancy.Decommission{}, err
		}
		plan = p
	}
	next, changed, err := tenancy.StepDecommission(curp, region, action, plan, s.stamp(cur.Changed))
	if err != nil || !changed {
		return next, err
	}
	for _, dn := range next.Namespaces {
		n, err := tenancy.ParseNSName(dn.Namespace)
		if err != nil {
			return tenancy.Decommission{}, err
		}
		if err := s.decomNamespace(ctx, n, region, action, next); err != nil {
			return tenancy.Decommission{}, fmt.Errorf("decommission %s: namespace %s: %w", region, n, err)
		}
	}
	// Each namespace write carries the parked state with its list; the
	// record after them is the history and what a cancel restores.
	_, err = s.write(ctx, tenancy.KindDecommission, region, func(_ tenancy.Record, st tenancy.HLC) (tenancy.Record, error) {
		next.Changed = st
		if action == tenancy.DecomStart {
			next.Started = st
		}
		return tenancy.NewRecord(next, st)
	})
	if err != nil {
		return tenancy.Decommission{}, err
	}
	return next, nil
}

// decomNamespace writes namespace n as action makes it: start removes
// region from its list and parks it, confirm unparks it (its cursor
// positions are then deleted), cancel restores it
// (tenancy.RestoreReplication). A namespace deleted meanwhile is skipped.
func (s *Store) decomNamespace(ctx context.Context, n tenancy.NSName, region, action string, d tenancy.Decommission) error {
	_, err := s.write(ctx, tenancy.KindNamespace, n.String(), func(cur tenancy.Record, st tenancy.HLC) (tenancy.Record, error) {
		ns := prevNamespace(cur)
		if ns == nil {
			return tenancy.Record{}, nil
		}
		out := *ns
		switch action {
		case tenancy.DecomStart:
			keep := make([]string, 0, len(out.Policies.Replication))
			for _, r := range out.Policies.Replication {
				if r != region {
					keep = append(keep, r)
				}
			}
			if len(keep) == len(out.Policies.Replication) || len(keep) == 0 {
				return tenancy.Record{}, nil // not listed (any more), or the last region
			}
			out.Policies.Replication = keep
			out.ReplicationEpochs = tenancy.ReplicationEpochs(ns, keep, st)
			out.Parked = tenancy.CarryParked(ns, keep)
			if out.Parked == nil {
				out.Parked = map[string]tenancy.HLC{}
			}
			out.Parked[region] = ns.ReplicationEpochs[region]
		case tenancy.DecomConfirm:
			if _, ok := out.Parked[region]; !ok {
				return tenancy.Record{}, nil
			}
			out.Parked = tenancy.CarryParked(&out, []string{region}) // all but region
		case tenancy.DecomCancel:
			restored, ok := tenancy.RestoreReplication(out, d)
			if !ok {
				return tenancy.Record{}, nil
			}
			out = restored
		}
		return tenancy.NewRecord(out, st)
	})
	return err
}
