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
	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/internal/adminhttp"
	"github.com/stratamesh/strata/tenancy"
)

// subscriptionRoutes mounts the subscription writes of the admin API
// (shared/specs/admin-api.md):
//
//	PUT    /admin/v1/topics/{t}/{ns}/{topic}/subscriptions/{sub}   create (or update) a durable
//	       subscription: {"replicated": true, "filter_subject": "…"}, both optional
//	DELETE /admin/v1/topics/{t}/{ns}/{topic}/subscriptions/{sub}   delete it (a replicated one
//	       in every region)
func (n *Node) subscriptionRoutes(s *adminhttp.Server) {
	s.Handle("PUT /admin/v1/topics/{t}/{ns}/{topic}/subscriptions/{sub}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		var req jetstream.SubscriptionRequest
		if err == nil {
			req, err = ParseSubscriptionRequest(body)
		}
		if err != nil {
			adminhttp.WriteError(w, http.StatusBadRequest, "invalid_body", err.Error(), "")
			return
		}
		n.subscriptionWrite(w, r, func(ctx context.Context, name tenancy.Name, sub string) error {
			return n.js.PutSubscription(ctx, name, sub, req)
		})
	}))
	s.Handle("DELETE /admin/v1/topics/{t}/{ns}/{topic}/subscriptions/{sub}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.subscriptionWrite(w, r, func(ctx context.Context, name tenancy.Name, sub string) error {
			return n.js.DeleteSubscription(ctx, name, sub)
		})
	}))
}

// subscriptionWrite runs a subscription write for the request's path and
// answers it: 200 with the region's subscriptions of the topic, or the
// error.
func (n *Node) subscriptionWrite(w http.ResponseWriter, r *http.Request, do func(context.Context, tenancy.Name, string) error) {
	name := tenancy.Name{Tenant: r.PathValue("t"), Namespace: r.PathValue("ns"), Topic: r.PathValue("topic")}
	sub := r.PathValue("sub")
	if !tenancy.ValidToken(sub) {
		adminhttp.WriteError(w, http.StatusBadRequest, "invalid_subscription", fmt.Sprintf("subscription name %q: use letters, digits, \"-\" and \"_\"", sub), "sub")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), topicStatsTimeout)
	defer cancel()
	err := do(ctx, name, sub)
	var apiErr *jsapi.APIError
	switch {
	case err == nil:
	case errors.Is(err, jetstream.ErrTopicNotFound):
		adminhttp.WriteError(w, http.StatusNotFound, "topic_not_found", "region "+n.cfg.Region+" has no topic "+name.String(), "topic")
		return
	case errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound:
		adminhttp.WriteError(w, http.StatusNotFound, "subscription_not_found", "topic "+name.String()+" has no subscription "+sub+": "+apiErr.Description, "sub")
		return
	case errors.As(err, &apiErr):
		adminhttp.WriteError(w, http.StatusBadRequest, "invalid_subscription", apiErr.Description, "")
		return
	default:
		adminhttp.WriteError(w, http.StatusServiceUnavailable, "no_owner", err.Error(), "")
		return
	}
	if st, ok := n.topicStats(w, r); ok {
		adminhttp.WriteJSON(w, http.StatusOK, map[string]any{"region": n.cfg.Region, "subscriptions": nonNil(st.Subscriptions)})
	}
}

// ParseSubscriptionRequest parses the body of a subscription PUT: empty,
// or a JSON object with "replicated" (bool) and "filter_subject"
// (string). Errors name the problem: not JSON, an unknown field, a
// wrong type, trailing data.
func ParseSubscriptionRequest(body []byte) (jetstream.SubscriptionRequest, error) {
	var req jetstream.SubscriptionRequest
	if len(bytes.TrimSpace(body)) == 0 {
		return req, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf(`subscription body: %v (want {"replicated": true|false, "filter_subject": "…"} or nothing)`, err)
	}
	if dec.More() {
		return req, errors.New("subscription body: data after the JSON object")
	}
	return req, nil
}
