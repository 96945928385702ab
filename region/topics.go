package region

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/internal/adminhttp"
	"github.com/stratamesh/strata/tenancy"
)

// topicStatsTimeout bounds asking a topic's owner for its state.
const topicStatsTimeout = 5 * time.Second

// topicRoutes mounts the topic routes of the admin API on a broker (any
// broker answers for its region, asking the topic's owner):
//
//	GET /admin/v1/topics[/{t}[/{ns}]]                      topics and their owners
//	GET /admin/v1/topics/{t}/{ns}/{topic}[/stats]           live state, ledgers, subscriptions
//	GET /admin/v1/topics/{t}/{ns}/{topic}/subscriptions[/{sub}]
func (n *Node) topicRoutes(s *adminhttp.Server) {
	list := func(w http.ResponseWriter, r *http.Request) {
		adminhttp.WriteJSON(w, http.StatusOK, map[string]any{
			"region": n.cfg.Region,
			"topics": nonNil(n.js.Topics(r.PathValue("t"), r.PathValue("ns"))),
		})
	}
	s.Handle("GET /admin/v1/topics", http.HandlerFunc(list))
	s.Handle("GET /admin/v1/topics/{t}", http.HandlerFunc(list))
	s.Handle("GET /admin/v1/topics/{t}/{ns}", http.HandlerFunc(list))
	stats := func(w http.ResponseWriter, r *http.Request) {
		if st, ok := n.topicStats(w, r); ok {
			adminhttp.WriteJSON(w, http.StatusOK, map[string]any{"region": n.cfg.Region, "topic": st})
		}
	}
	s.Handle("GET /admin/v1/topics/{t}/{ns}/{topic}", http.HandlerFunc(stats))
	s.Handle("GET /admin/v1/topics/{t}/{ns}/{topic}/stats", http.HandlerFunc(stats))
	s.Handle("GET /admin/v1/topics/{t}/{ns}/{topic}/subscriptions", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if st, ok := n.topicStats(w, r); ok {
			adminhttp.WriteJSON(w, http.StatusOK, map[string]any{"region": n.cfg.Region, "subscriptions": nonNil(st.Subscriptions)})
		}
	}))
	s.Handle("GET /admin/v1/topics/{t}/{ns}/{topic}/subscriptions/{sub}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st, ok := n.topicStats(w, r)
		if !ok {
			return
		}
		for _, sub := range st.Subscriptions {
			if sub.Name == r.PathValue("sub") {
				adminhttp.WriteJSON(w, http.StatusOK, map[string]any{"region": n.cfg.Region, "subscription": sub})
				return
			}
		}
		adminhttp.WriteError(w, http.StatusNotFound, "subscription_not_found",
			"topic "+st.Tenant+"/"+st.Namespace+"/"+st.Topic+" has no subscription "+r.PathValue("sub"), "sub")
	}))
}

// topicStats answers the topic of the request's path, or writes the error.
func (n *Node) topicStats(w http.ResponseWriter, r *http.Request) (*jetstream.TopicStats, bool) {
	name := tenancy.Name{Tenant: r.PathValue("t"), Namespace: r.PathValue("ns"), Topic: r.PathValue("topic")}
	ctx, cancel := context.WithTimeout(r.Context(), topicStatsTimeout)
	defer cancel()
	st, err := n.js.TopicStats(ctx, name)
	var apiErr *jsapi.APIError
	switch {
	case err == nil:
		return st, true
	case errors.Is(err, jetstream.ErrTopicNotFound), errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound:
		adminhttp.WriteError(w, http.StatusNotFound, "topic_not_found", "region "+n.cfg.Region+" has no topic "+name.String(), "topic")
	default:
		adminhttp.WriteError(w, http.StatusServiceUnavailable, "no_owner", err.Error(), "")
	}
	return nil, false
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
