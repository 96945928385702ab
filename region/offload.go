package region

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/internal/adminhttp"
	"github.com/stratamesh/strata/tenancy"
)

// offloadRoutes mounts the offload routes of the admin API
// (ARCHITECTURE §6; shared/specs/admin-api.md):
//
//	GET  /admin/v1/topics/{t}/{ns}/{topic}/offload   where each ledger is, the copy in progress
//	POST /admin/v1/topics/{t}/{ns}/{topic}/offload   start an offload: {"keep_bytes": N} (optional;
//	     0 = every closed ledger) — answers 202 with the status
func (n *Node) offloadRoutes(s *adminhttp.Server) {
	s.Handle("GET /admin/v1/topics/{t}/{ns}/{topic}/offload", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.offloadAnswer(w, r, jetstream.OffloadRequest{}, http.StatusOK)
	}))
	s.Handle("POST /admin/v1/topics/{t}/{ns}/{topic}/offload", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		var req jetstream.OffloadRequest
		if err == nil {
			req, err = ParseOffloadRequest(body)
		}
		if err != nil {
			adminhttp.WriteError(w, http.StatusBadRequest, "invalid_body", err.Error(), "")
			return
		}
		n.offloadAnswer(w, r, req, http.StatusAccepted)
	}))
}

func (n *Node) offloadAnswer(w http.ResponseWriter, r *http.Request, req jetstream.OffloadRequest, code int) {
	name := tenancy.Name{Tenant: r.PathValue("t"), Namespace: r.PathValue("ns"), Topic: r.PathValue("topic")}
	ctx, cancel := context.WithTimeout(r.Context(), topicStatsTimeout)
	defer cancel()
	st, err := n.js.TopicOffload(ctx, name, req)
	switch {
	case err == nil:
		adminhttp.WriteJSON(w, code, map[string]any{"region": n.cfg.Region, "topic": name.String(), "tier": n.tierInfo(), "offload": st})
	case errors.Is(err, jetstream.ErrTopicNotFound):
		adminhttp.WriteError(w, http.StatusNotFound, "topic_not_found", "region "+n.cfg.Region+" has no topic "+name.String(), "topic")
	case errors.Is(err, jetstream.ErrNoTier):
		adminhttp.WriteError(w, http.StatusConflict, "no_tier", "region "+n.cfg.Region+" has no tier to offload to", "")
	default:
		adminhttp.WriteError(w, http.StatusServiceUnavailable, "no_owner", err.Error(), "")
	}
}

// ParseOffloadRequest parses the body of an offload POST: empty, or a
// JSON object with "keep_bytes" (bytes to leave on bookies, ≥ 0).
// Errors name the problem: not JSON, an unknown field, a wrong type, a
// negative size, trailing data.
func ParseOffloadRequest(body []byte) (jetstream.OffloadRequest, error) {
	req := jetstream.OffloadRequest{Offload: true}
	if len(bytes.TrimSpace(body)) == 0 {
		return req, nil
	}
	var v struct {
		KeepBytes *int64 `json:"keep_bytes"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return req, fmt.Errorf(`offload body: %v (want {"keep_bytes": N} or nothing)`, err)
	}
	if dec.More() {
		return req, errors.New("offload body: data after the JSON object")
	}
	if v.KeepBytes != nil {
		if *v.KeepBytes < 0 {
			return req, fmt.Errorf("offload body: keep_bytes %d is negative", *v.KeepBytes)
		}
		req.KeepBytes = *v.KeepBytes
	}
	return req, nil
}
