package tenancy

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Region decommission (issue 26 item 6): a region leaves every
// namespace's replication list in two steps, reversible until the
// second.
//
//  1. Start: the region leaves every replication list that names it
//     and is put in the namespace's Parked (one write per namespace, so
//     a broker never sees the region out of the list and not parked).
//     A Decommission record (kind "decommission", key the region)
//     remembers, per namespace, the list before and the region's
//     replication epoch. The replicator cursors towards the region
//     stop, but their positions are kept ("parked") and so is the
//     storage they hold back: Cancel loses nothing.
//  2. Confirm: the parked positions are deleted and the storage they
//     held is released; the record stays, State "confirmed", as the
//     history. Cancel of a pending decommission instead puts the
//     region back in each list with its old epoch, so the parked
//     cursors resume from their positions.
//
// Replication epochs make a position from before a removal unusable
// whatever becomes of its deletion: every namespace record carries, per
// region of its list, the stamp of the write that added the region
// (ReplicationEpochs; zero for the regions of a seeded namespace). A
// replicator cursor persists the epoch with its position and ignores
// (and overwrites) a position of another epoch, so a region removed and
// added back later starts over from the retained messages, as the docs
// promise, even when deleting its old position failed.

// KindDecommission is a region decommission: key the region, value
// Decommission.
const KindDecommission Kind = "decommission"

// States of a Decommission.
const (
	DecomPending   = "pending"   // out of every list, cursor positions parked
	DecomConfirmed = "confirmed" // positions deleted, storage released
	DecomCancelled = "cancelled" // lists restored
)

// Decommission actions.
const (
	DecomStart   = "start"
	DecomConfirm = "confirm"
	DecomCancel  = "cancel"
)

// Decommission is a region's decommission record.
type Decommission struct {
	Region string `json:"region"`
	// State is pending, confirmed or cancelled.
	State string `json:"state"`
	// Namespaces are the namespaces whose replication list named the
	// region when it started, in name order.
	Namespaces []DecomNamespace `json:"namespaces"`
	// Started and Changed are the stamps of the start and of the last
	// transition.
	Started HLC `json:"started"`
	Changed HLC `json:"changed"`
}

// DecomNamespace is one namespace a decommission changed: its list
// before and after, and the region's replication epoch in it (restored
// by a cancel).
type DecomNamespace struct {
	Namespace string   `json:"namespace"` // tenant/namespace
	Before    []string `json:"before"`
	After     []string `json:"after"`
	Epoch     HLC      `json:"epoch"`
}

// Errors of the decommission core.
var (
	ErrDecomRegion    = errors.New("tenancy: no such region")
	ErrDecomLast      = errors.New("tenancy: the region is the only one of a namespace's replication list")
	ErrDecomState     = errors.New("tenancy: the decommission is not in a state that allows this")
	ErrDecomAction    = errors.New("tenancy: unknown decommission action")
	ErrDecomNotFound  = errors.New("tenancy: no decommission of this region")
	ErrDecomNoChanges = errors.New("tenancy: no namespace replicates to the region")
)

// ReplicationEpochs is the epochs of a namespace record written at st
// with replication list repl, whose previous value was old (nil: none):
// a region already listed keeps its epoch, a region added gets st.
func ReplicationEpochs(old *Namespace, repl []string, st HLC) map[string]HLC {
	out := make(map[string]HLC, len(repl))
	for _, r := range repl {
		if old != nil && slices.Contains(old.Policies.Replication, r) {
			out[r] = old.ReplicationEpochs[r]
			if out[r].IsZero() {
				delete(out, r) // zero is the absent epoch
			}
			continue
		}
		out[r] = st
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// PlanDecommission is what a start of the decommission of region does
// to nss (the mesh's namespaces): every namespace whose list names the
// region, with its list without it. regions are the mesh's regions (nil:
// any). Errors: ErrDecomRegion (unknown region), ErrDecomLast naming
// every namespace only replicated in the region (remove it from those
// or delete them first), ErrDecomNoChanges when none names it.
func PlanDecommission(nss []Namespace, region string, regions []string) ([]DecomNamespace, error) {
	if !ValidToken(region) || regions != nil && !slices.Contains(regions, region) {
		return nil, fmt.Errorf("%w %q (regions: %s)", ErrDecomRegion, region, strings.Join(regions, ", "))
	}
	var out []DecomNamespace
	var last []string
	for _, ns := range nss {
		repl := ns.Policies.Replication
		if !slices.Contains(repl, region) {
			continue
		}
		after := slices.DeleteFunc(slices.Clone(repl), func(r string) bool { return r == region })
		if len(after) == 0 {
			last = append(last, ns.NS().String())
			continue
		}
		out = append(out, DecomNamespace{Namespace: ns.NS().String(), Before: slices.Clone(repl), After: after, Epoch: ns.ReplicationEpochs[region]})
	}
	if len(last) > 0 {
		slices.Sort(last)
		return nil, fmt.Errorf("%w: %s", ErrDecomLast, strings.Join(last, ", "))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w %s", ErrDecomNoChanges, region)
	}
	slices.SortFunc(out, func(a, b DecomNamespace) int { return strings.Compare(a.Namespace, b.Namespace) })
	return out, nil
}

// StepDecommission is the transition of cur (nil: none yet) by action
// at st: start (none, cancelled or confirmed → pending, with plan, the
// namespaces PlanDecommission returned), confirm (pending → confirmed)
// or cancel (pending → cancelled). Confirming a confirmed or
// cancelling a cancelled decommission is a no-op (same record, changed
// false), so a retried request succeeds. Errors: ErrDecomAction,
// ErrDecomNotFound, ErrDecomState naming the state.
func StepDecommission(cur *Decommission, region, action string, plan []DecomNamespace, st HLC) (next Decommission, changed bool, err error) {
	state := ""
	if cur != nil {
		state = cur.State
	}
	switch action {
	case DecomStart:
		if state == DecomPending {
			return *cur, false, fmt.Errorf("%w: the decommission of %s is pending already (confirm or cancel it)", ErrDecomState, region)
		}
		return Decommission{Region: region, State: DecomPending, Namespaces: plan, Started: st, Changed: st}, true, nil
	case DecomConfirm, DecomCancel:
		want := map[string]string{DecomConfirm: DecomConfirmed, DecomCancel: DecomCancelled}[action]
		switch state {
		case "":
			return Decommission{}, false, fmt.Errorf("%w %s", ErrDecomNotFound, region)
		case want:
			return *cur, false, nil
		case DecomPending:
			next = *cur
			next.Namespaces = slices.Clone(cur.Namespaces)
			next.State, next.Changed = want, st
			return next, true, nil
		default:
			return *cur, false, fmt.Errorf("%w: the decommission of %s is %s; cannot %s it", ErrDecomState, region, state, action)
		}
	default:
		return Decommission{}, false, fmt.Errorf("%w %q: want start, confirm or cancel", ErrDecomAction, action)
	}
}

// RestoreReplication is namespace ns as a cancel of d puts it back: the
// region appended to its list (unless listed again meanwhile) with the
// epoch d kept, so its parked cursors resume. ok is false when d did
// not change ns, or the region is listed already.
func RestoreReplication(ns Namespace, d Decommission) (Namespace, bool) {
	i := slices.IndexFunc(d.Namespaces, func(x DecomNamespace) bool { return x.Namespace == ns.NS().String() })
	if i < 0 || slices.Contains(ns.Policies.Replication, d.Region) {
		return ns, false
	}
	ns.Policies.Replication = append(slices.Clone(ns.Policies.Replication), d.Region)
	epochs := map[string]HLC{}
	for r, e := range ns.ReplicationEpochs {
		epochs[r] = e
	}
	if e := d.Namespaces[i].Epoch; e.IsZero() {
		delete(epochs, d.Region)
	} else {
		epochs[d.Region] = e
	}
	if len(epochs) == 0 {
		epochs = nil
	}
	ns.ReplicationEpochs = epochs
	ns.Parked = CarryParked(&ns, ns.Policies.Replication)
	return ns, true
}

// CarryParked is the parked regions a write of a namespace whose
// previous value was old (nil: none) keeps: old's, less those listed
// again in repl.
func CarryParked(old *Namespace, repl []string) map[string]HLC {
	if old == nil {
		return nil
	}
	var out map[string]HLC
	for r, e := range old.Parked {
		if !slices.Contains(repl, r) {
			if out == nil {
				out = map[string]HLC{}
			}
			out[r] = e
		}
	}
	return out
}

// Decommission returns region's decommission record.
func (s *State) Decommission(region string) (Decommission, bool) {
	r, ok := s.Get(KindDecommission, region)
	if !ok || r.Deleted {
		return Decommission{}, false
	}
	var d Decommission
	if json.Unmarshal(r.Value, &d) != nil {
		return Decommission{}, false
	}
	return d, true
}

// Decommissions returns every decommission record, by region.
func (s *State) Decommissions() []Decommission {
	var out []Decommission
	for _, r := range s.Records() {
		if r.Kind == KindDecommission {
			if d, ok := s.Decommission(r.Key); ok {
				out = append(out, d)
			}
		}
	}
	return out
}

// checkDecommission validates a decommission record (Record.Check).
func checkDecommission(r Record) error {
	if !ValidToken(r.Key) {
		return fmt.Errorf("tenancy: record %s: bad region name", r.ID())
	}
	if r.Deleted {
		return nil
	}
	var d Decommission
	if err := json.Unmarshal(r.Value, &d); err != nil || d.Region != r.Key {
		return fmt.Errorf("tenancy: record %s: bad decommission value", r.ID())
	}
	switch d.State {
	case DecomPending, DecomConfirmed, DecomCancelled:
	default:
		return fmt.Errorf("tenancy: record %s: bad decommission state %q", r.ID(), d.State)
	}
	return nil
}
