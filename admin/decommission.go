package admin

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/stratamesh/strata/tenancy"
)

// Region decommission (issue 26 item 6; tenancy/decom.go has the steps
// and their rules). Superuser only: it changes every tenant's
// namespaces.
//
//	GET  /admin/v1/regions/{region}/decommission  the record and this broker's cursors
//	POST /admin/v1/regions/{region}/decommission  {"action": "start"|"confirm"|"cancel", "dry_run": bool}

// DecommissionRequest is the body of POST …/decommission. DryRun (with
// start only) answers what start would change and writes nothing.
type DecommissionRequest struct {
	Action string `json:"action"`
	DryRun bool   `json:"dry_run"`
}

func (r *DecommissionRequest) validate() *Error {
	switch r.Action {
	case tenancy.DecomStart, tenancy.DecomConfirm, tenancy.DecomCancel:
	case "":
		return Errorf(CodeInvalidBody, "action", "action is required: start, confirm or cancel")
	default:
		return Errorf(CodeInvalidBody, "action", "action %q: want start, confirm or cancel", r.Action)
	}
	if r.DryRun && r.Action != tenancy.DecomStart {
		return Errorf(CodeInvalidBody, "dry_run", "dry_run goes with action start only (confirm and cancel change no list)")
	}
	return nil
}

// ParkedCursor is a replicator cursor towards the region that a pending
// decommission stopped: its position is kept and holds LagMsgs local
// messages back.
type ParkedCursor struct {
	Topic    string `json:"topic"`
	Remote   string `json:"remote"`
	Position uint64 `json:"position"`
	LagMsgs  uint64 `json:"lag_msgs"`
}

// StaleCursor is a topic whose replicator cursor positions towards
// regions no longer listed could not be deleted yet: the error state of
// the bounded, backed-off deletion rounds. The positions are void (of
// an earlier replication epoch) and never reused.
type StaleCursor struct {
	Topic     string    `json:"topic"`
	Remotes   []string  `json:"remotes"`
	Rounds    int       `json:"rounds"`
	Tries     int       `json:"tries"`
	LastError string    `json:"last_error"`
	RetryAt   time.Time `json:"retry_at,omitzero"`
}

// DecommissionView answers both routes: the decommission record (State
// "" and no namespaces when there is none; for a dry run, what start
// would write), and the broker's parked and stale cursors towards the
// region (one broker's view: ask each broker for the region's whole).
type DecommissionView struct {
	Region     string                   `json:"region"`
	Broker     string                   `json:"broker,omitempty"`
	DryRun     bool                     `json:"dry_run,omitempty"`
	State      string                   `json:"state"`
	Namespaces []tenancy.DecomNamespace `json:"namespaces"`
	Started    *tenancy.HLC             `json:"started,omitempty"`
	Changed    *tenancy.HLC             `json:"changed,omitempty"`
	Parked     []ParkedCursor           `json:"parked"`
	Stale      []StaleCursor            `json:"stale"`
}

// DecommissionBackend runs decommissions (the region's copy of the
// mesh-wide configuration: the record and the namespaces' lists reach
// the other regions by themselves) and reports the broker's cursors.
// Errors wrap the tenancy.ErrDecom… sentinels or are *Error.
type DecommissionBackend interface {
	Decommission(region string) (tenancy.Decommission, bool)
	PlanDecommission(region string) ([]tenancy.DecomNamespace, error)
	StepDecommission(ctx context.Context, region, action string) (tenancy.Decommission, error)
	// DecomCursors are this broker's cursors towards region parked by a
	// pending decommission, and its topics with stale positions towards
	// region not deleted yet.
	DecomCursors(region string) ([]ParkedCursor, []StaleCursor)
	BrokerName() string
}

// decomError maps the decommission core's errors to catalog codes.
func decomError(err error) error {
	switch {
	case errors.Is(err, tenancy.ErrDecomRegion):
		return Errorf(CodeNotFound, "region", "%v", err)
	case errors.Is(err, tenancy.ErrDecomNotFound):
		return Errorf(CodeNotFound, "region", "%v", err)
	case errors.Is(err, tenancy.ErrDecomLast), errors.Is(err, tenancy.ErrDecomState), errors.Is(err, tenancy.ErrDecomNoChanges):
		return Errorf(CodeConflict, "", "%v", err)
	case errors.Is(err, tenancy.ErrDecomAction):
		return Errorf(CodeInvalidBody, "action", "%v", err)
	}
	return err
}

func (b Backends) decommissionView(region string, d tenancy.Decommission) DecommissionView {
	v := DecommissionView{Region: region, Broker: b.Decommission.BrokerName(), State: d.State, Namespaces: nonNil(d.Namespaces)}
	if !d.Started.IsZero() {
		v.Started, v.Changed = &d.Started, &d.Changed
	}
	parked, stale := b.Decommission.DecomCursors(region)
	v.Parked, v.Stale = nonNil(parked), nonNil(stale)
	return v
}

func regionParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	region := r.PathValue("region")
	if !tenancy.ValidToken(region) || len(region) > tenancy.MaxNameLen {
		WriteError(w, Errorf(CodeInvalidField, "region", "%q is not a valid region name: want [A-Za-z0-9_-]+", region))
		return "", false
	}
	return region, true
}

func (b Backends) decommissionRoutes() []Route {
	db := b.Decommission
	const path = "/admin/v1/regions/{region}/decommission"
	return []Route{
		{http.MethodGet, path, Superuser, func(w http.ResponseWriter, r *http.Request) {
			region, ok := regionParam(w, r)
			if !ok {
				return
			}
			d, _ := db.Decommission(region)
			WriteJSON(w, http.StatusOK, b.decommissionView(region, d))
		}},
		{http.MethodPost, path, Superuser, func(w http.ResponseWriter, r *http.Request) {
			region, ok := regionParam(w, r)
			if !ok {
				return
			}
			var req DecommissionRequest
			if e := DecodeBody(w, r, &req, false); e != nil {
				WriteError(w, e)
				return
			}
			if req.DryRun {
				plan, err := db.PlanDecommission(region)
				if err != nil {
					WriteError(w, decomError(err))
					return
				}
				v := b.decommissionView(region, tenancy.Decommission{State: tenancy.DecomPending, Namespaces: plan})
				v.DryRun = true
				WriteJSON(w, http.StatusOK, v)
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), MetadataTimeout)
			defer cancel()
			d, err := db.StepDecommission(ctx, region, req.Action)
			if err != nil {
				WriteError(w, decomError(err))
				return
			}
			WriteJSON(w, http.StatusOK, b.decommissionView(region, d))
		}},
	}
}

// DecommissionPath is the path of region's decommission routes.
func DecommissionPath(region string) string {
	return "/admin/v1/regions/" + region + "/decommission"
}

// StepDecommission POSTs req for region to the first of urls that
// answers.
func (c *Client) StepDecommission(ctx context.Context, urls []string, region string, req DecommissionRequest) (DecommissionView, error) {
	var v DecommissionView
	err := c.SendFirst(ctx, http.MethodPost, urls, DecommissionPath(region), req, &v)
	return v, err
}

// DecommissionStatus GETs region's decommission from the broker at base.
func (c *Client) DecommissionStatus(ctx context.Context, base, region string) (DecommissionView, error) {
	var v DecommissionView
	err := c.Get(ctx, base, DecommissionPath(region), &v)
	return v, err
}
