package region

import (
	"context"
	"errors"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/tenancy"
)

// decomAdmin serves the region decommission routes (admin/decommission.go)
// from the region's configuration store and this broker's cursors.
type decomAdmin struct{ n *Node }

func (a decomAdmin) Decommission(region string) (tenancy.Decommission, bool) {
	return a.n.cp.store.Decommission(region)
}

func (a decomAdmin) PlanDecommission(region string) ([]tenancy.DecomNamespace, error) {
	return a.n.cp.store.PlanDecommission(region, tenancyAdmin(a).regions())
}

func (a decomAdmin) StepDecommission(ctx context.Context, region, action string) (tenancy.Decommission, error) {
	d, err := a.n.cp.store.StepDecommission(ctx, region, action, tenancyAdmin(a).regions())
	var decomErr bool
	for _, e := range []error{tenancy.ErrDecomRegion, tenancy.ErrDecomLast, tenancy.ErrDecomState, tenancy.ErrDecomAction, tenancy.ErrDecomNotFound, tenancy.ErrDecomNoChanges} {
		decomErr = decomErr || errors.Is(err, e)
	}
	switch {
	case err == nil || decomErr:
		return d, err
	case errors.Is(err, meta.ErrConflict):
		return d, admin.Errorf(admin.CodeConflict, "", "the namespaces were changed by other writers all along: try again (%v)", err)
	}
	return d, a.n.metadataError(err)
}

func (a decomAdmin) DecomCursors(region string) ([]admin.ParkedCursor, []admin.StaleCursor) {
	drops, parked := a.n.js.CursorDrops()
	var ps []admin.ParkedCursor
	for _, p := range parked {
		if p.Remote == region {
			ps = append(ps, admin.ParkedCursor(p))
		}
	}
	var ss []admin.StaleCursor
	for _, d := range drops {
		for _, r := range d.Remotes {
			if r == region {
				ss = append(ss, admin.StaleCursor{Topic: d.Topic, Remotes: d.Remotes, Rounds: d.Rounds, Tries: d.Tries, LastError: d.LastError, RetryAt: d.RetryAt})
				break
			}
		}
	}
	return ps, ss
}

func (a decomAdmin) BrokerName() string { return a.n.name }
