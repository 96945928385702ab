package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/stratamesh/strata/broker/bundle"
)

// BundleInfo is one bundle: its name, owner and topics.
type BundleInfo struct {
	Bundle string    `json:"bundle"` // tenant/namespace/0xLLLLLLLL_0xHHHHHHHH
	Owner  string    `json:"owner,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	Topics int       `json:"topics"`
	// Unloading names the broker an admin unload moves it from.
	Unloading string `json:"unloading,omitempty"`
}

// BundleList is GET /admin/v1/bundles[/{t}[/{ns}]].
type BundleList struct {
	Region  string       `json:"region"`
	Bundles []BundleInfo `json:"bundles"`
}

// The states of an Operation.
const (
	OperationRunning = "running"
	OperationDone    = "done"
	OperationFailed  = "failed"
)

// Operation is a long admin operation's progress (202 answers, and GET
// /admin/v1/operations/{id}).
type Operation struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`   // "unload"
	Target string `json:"target"` // what it acts on, e.g. the bundle
	State  string `json:"state"`  // OperationRunning, OperationDone or OperationFailed
	Done   int    `json:"done"`
	Total  int    `json:"total"`
	Error  string `json:"error,omitempty"`
	// Result is the kind's result once done: an UnloadResult for an
	// unload (decoded by a client as a JSON object).
	Result   any       `json:"result,omitempty"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
}

// OperationAnswer is an operation and its region.
type OperationAnswer struct {
	Region    string    `json:"region"`
	Operation Operation `json:"operation"`
}

// UnloadResult is an unload operation's result.
type UnloadResult struct {
	Bundle string `json:"bundle"`
	From   string `json:"from"`
	To     string `json:"to"`
}

// UnloadRequest is the optional body of an unload: To names the broker
// to move the bundle to, by id (b2) or full name (us-east.b2); empty:
// placement picks the least loaded other broker.
type UnloadRequest struct {
	To string `json:"to,omitempty"`
}

// BundlesBackend answers for the region's bundles (brokers).
type BundlesBackend interface {
	// Bundles lists the region's bundles, sorted by name.
	Bundles() []BundleInfo
	// Unload starts moving bundle id to broker to ("" for placement's
	// choice) and returns the operation recorded for it. Errors:
	// bundle_not_found, broker_not_live (field to), no_owner,
	// metadata_unavailable.
	Unload(ctx context.Context, id bundle.ID, to string) (Operation, error)
	// Operation is a recorded operation. Errors: operation_not_found,
	// metadata_unavailable.
	Operation(ctx context.Context, id string) (Operation, error)
}

func (b Backends) bundleRoutes() []Route {
	list := func(hasT, hasNS bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var t, ns string
			var e *Error
			if hasT {
				if t, e = Token(r, "t"); e != nil {
					WriteError(w, e)
					return
				}
			} else {
				t = scopeOf(r)
			}
			if hasNS {
				if ns, e = Token(r, "ns"); e != nil {
					WriteError(w, e)
					return
				}
			}
			out := []BundleInfo{}
			for _, bi := range b.Bundles.Bundles() {
				id, err := bundle.ParseID(bi.Bundle)
				if err != nil || (t != "" && id.Tenant != t) || (ns != "" && id.Namespace != ns) {
					continue
				}
				out = append(out, bi)
			}
			WriteJSON(w, http.StatusOK, BundleList{Region: b.Region, Bundles: out})
		}
	}
	return []Route{
		{http.MethodGet, "/admin/v1/bundles", Authenticated, list(false, false)},
		{http.MethodGet, "/admin/v1/bundles/{t}", TenantAdmin, list(true, false)},
		{http.MethodGet, "/admin/v1/bundles/{t}/{ns}", TenantAdmin, list(true, true)},
		{http.MethodPost, "/admin/v1/bundles/{t}/{ns}/{range}/unload", Superuser, b.unload},
		{http.MethodGet, "/admin/v1/operations/{id}", Superuser, func(w http.ResponseWriter, r *http.Request) {
			id, e := OperationID(r)
			if e != nil {
				WriteError(w, e)
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), MetadataTimeout)
			defer cancel()
			op, err := b.Bundles.Operation(ctx, id)
			if err != nil {
				WriteError(w, err)
				return
			}
			WriteJSON(w, http.StatusOK, OperationAnswer{Region: b.Region, Operation: op})
		}},
	}
}

// unload answers POST …/unload: 202 with the operation, which finishes
// once another broker owns the bundle.
func (b Backends) unload(w http.ResponseWriter, r *http.Request) {
	id, e := BundleID(r)
	if e != nil {
		WriteError(w, e)
		return
	}
	var req UnloadRequest
	if e := DecodeBody(w, r, &req, true); e != nil {
		WriteError(w, e)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), UnloadRequestTimeout)
	defer cancel()
	op, err := b.Bundles.Unload(ctx, id, req.To)
	if err != nil {
		WriteError(w, err)
		return
	}
	WriteJSON(w, http.StatusAccepted, OperationAnswer{Region: b.Region, Operation: op})
}
