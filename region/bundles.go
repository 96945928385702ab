package region

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/stratamesh/strata/broker/bundle"
	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/internal/adminhttp"
	"github.com/stratamesh/strata/internal/meta"
)

// unloadTimeout bounds an unload operation: the owner closes the bundle's
// topics (jetstream.Config.HandoverTimeout) and another broker takes it.
const unloadTimeout = time.Minute

// operationsPrefix keeps long admin operations (admin-api.md: 202 and an
// operation id) in the region's etcd, so that any broker reports them.
const operationsPrefix = "operations/"

// Operation is a long admin operation's progress
// (GET /admin/v1/operations/{id}).
type Operation struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"`   // "unload"
	Target   string    `json:"target"` // what it acts on, e.g. the bundle
	State    string    `json:"state"`  // running | done | failed
	Done     int       `json:"done"`
	Total    int       `json:"total"`
	Error    string    `json:"error,omitempty"`
	Result   any       `json:"result,omitempty"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
}

// unloadRequest is the optional body of an unload.
type unloadRequest struct {
	// To names the broker to move the bundle to; empty: placement picks
	// the least loaded other broker.
	To string `json:"to,omitempty"`
}

// UnloadResult is an unload operation's result.
type UnloadResult struct {
	Bundle string `json:"bundle"`
	From   string `json:"from"`
	To     string `json:"to"`
}

// bundleRoutes mounts the bundle routes of the admin API on a broker:
//
//	GET  /admin/v1/bundles[/{t}[/{ns}]]          bundles, ranges, owners, topic counts
//	POST /admin/v1/bundles/{t}/{ns}/{range}/unload  move a bundle (202 + operation)
//	GET  /admin/v1/operations/{id}                a long operation's progress
func (n *Node) bundleRoutes(s *adminhttp.Server) {
	list := func(w http.ResponseWriter, r *http.Request) {
		t, ns := r.PathValue("t"), r.PathValue("ns")
		out := []jetstream.BundleInfo{}
		for _, b := range n.js.Bundles() {
			id, err := bundle.ParseID(b.Bundle)
			if err != nil || (t != "" && id.Tenant != t) || (ns != "" && id.Namespace != ns) {
				continue
			}
			out = append(out, b)
		}
		adminhttp.WriteJSON(w, http.StatusOK, map[string]any{"region": n.cfg.Region, "bundles": out})
	}
	s.Handle("GET /admin/v1/bundles", http.HandlerFunc(list))
	s.Handle("GET /admin/v1/bundles/{t}", http.HandlerFunc(list))
	s.Handle("GET /admin/v1/bundles/{t}/{ns}", http.HandlerFunc(list))
	s.Handle("POST /admin/v1/bundles/{t}/{ns}/{range}/unload", http.HandlerFunc(n.unload))
	s.Handle("GET /admin/v1/operations/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op, _, err := meta.GetJSON[Operation](r.Context(), n.store, operationsPrefix+r.PathValue("id"))
		switch {
		case errors.Is(err, meta.ErrNotFound):
			adminhttp.WriteError(w, http.StatusNotFound, "operation_not_found", "region "+n.cfg.Region+" has no operation "+r.PathValue("id"), "id")
		case err != nil:
			adminhttp.WriteError(w, http.StatusServiceUnavailable, "metadata_unavailable", err.Error(), "")
		default:
			adminhttp.WriteJSON(w, http.StatusOK, map[string]any{"region": n.cfg.Region, "operation": op})
		}
	}))
}

// unload answers POST …/unload: 202 with the operation, which finishes
// once another broker owns the bundle.
func (n *Node) unload(w http.ResponseWriter, r *http.Request) {
	rng, err := bundle.ParseRange(r.PathValue("range"))
	if err != nil {
		adminhttp.WriteError(w, http.StatusBadRequest, "invalid_bundle", err.Error(), "range")
		return
	}
	id := bundle.ID{Tenant: r.PathValue("t"), Namespace: r.PathValue("ns"), Range: rng}
	var req unloadRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err == nil && len(body) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		err = dec.Decode(&req)
	}
	if err != nil {
		adminhttp.WriteError(w, http.StatusBadRequest, "invalid_body", "unload body: "+err.Error()+` (want {"to": "<broker>"} or nothing)`, "to")
		return
	}
	if req.To != "" && !strings.Contains(req.To, ".") {
		req.To = SerfName(n.cfg.Region, req.To) // a node id of this region ("b2")
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	from, err := n.js.Unload(ctx, id, req.To)
	switch {
	case errors.Is(err, jetstream.ErrUnknownBundle):
		adminhttp.WriteError(w, http.StatusNotFound, "bundle_not_found", "region "+n.cfg.Region+" has no bundle "+id.String(), "range")
		return
	case errors.Is(err, jetstream.ErrNotLive):
		adminhttp.WriteError(w, http.StatusBadRequest, "broker_not_live", "cannot move "+id.String()+" to "+req.To+": no live broker of region "+n.cfg.Region+" has that name (give a broker id such as b1, or its full name "+SerfName(n.cfg.Region, "b1")+")", "to")
		return
	case errors.Is(err, jetstream.ErrNoOwner):
		adminhttp.WriteError(w, http.StatusServiceUnavailable, "no_owner", id.String()+" has no owner yet: it is being placed", "")
		return
	case err != nil:
		adminhttp.WriteError(w, http.StatusServiceUnavailable, "metadata_unavailable", err.Error(), "")
		return
	}
	op := Operation{ID: newOperationID(), Kind: "unload", Target: id.String(), State: "running", Total: 1, Started: time.Now().UTC()}
	if from == req.To {
		op.State, op.Done, op.Finished = "done", 1, op.Started
		op.Result = UnloadResult{Bundle: id.String(), From: from, To: from}
	}
	if _, err := meta.PutJSON(ctx, n.store, operationsPrefix+op.ID, op); err != nil {
		adminhttp.WriteError(w, http.StatusServiceUnavailable, "metadata_unavailable", err.Error(), "")
		return
	}
	if op.State == "running" {
		go n.finishUnload(op, id, from)
	}
	adminhttp.WriteJSON(w, http.StatusAccepted, map[string]any{"region": n.cfg.Region, "operation": op})
}

// finishUnload records the unload's outcome once the bundle moved (or
// unloadTimeout passed).
func (n *Node) finishUnload(op Operation, id bundle.ID, from string) {
	ctx, cancel := context.WithTimeout(context.Background(), unloadTimeout)
	defer cancel()
	to, err := n.js.WaitMoved(ctx, id, from)
	op.Finished = time.Now().UTC()
	if err != nil {
		op.State, op.Error = "failed", "the bundle did not move within "+unloadTimeout.String()
	} else {
		op.State, op.Done = "done", 1
		op.Result = UnloadResult{Bundle: id.String(), From: from, To: to}
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if _, err := meta.PutJSON(wctx, n.store, operationsPrefix+op.ID, op); err != nil {
		n.logger.Warn("recording an unload's outcome failed", "bundle", id.String(), "err", err)
	}
}

func newOperationID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
