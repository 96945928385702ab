package admin

import (
	"context"
	"net/http"
	"time"
)

// Health reports the node's readiness: the failing checks by name (empty
// or nil: ready).
type Health interface {
	Ready(ctx context.Context) map[string]string
}

// ReadyView is GET /readyz's answer.
type ReadyView struct {
	Status  string            `json:"status"` // "ready" | "not ready"
	Failing map[string]string `json:"failing,omitempty"`
}

// readyTimeout bounds the readiness checks of one /readyz.
const readyTimeout = 2 * time.Second

func (b Backends) healthRoutes() []Route {
	return []Route{
		{http.MethodGet, "/healthz", Public, func(w http.ResponseWriter, _ *http.Request) {
			WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		}},
		{http.MethodGet, "/readyz", Public, func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
			defer cancel()
			if failing := b.Health.Ready(ctx); len(failing) > 0 {
				WriteJSON(w, http.StatusServiceUnavailable, ReadyView{Status: "not ready", Failing: failing})
				return
			}
			WriteJSON(w, http.StatusOK, ReadyView{Status: "ready"})
		}},
	}
}

// Member is a Serf pool member as a node sees it.
type Member struct {
	Name  string            `json:"name"`
	Addr  string            `json:"addr"` // host:port of its Serf listener
	State string            `json:"state"`
	Tags  map[string]string `json:"tags,omitempty"`
}

// MembersView is GET /admin/v1/members: the node's view of its pools.
type MembersView struct {
	Node   string   `json:"node"` // "<region>.<id>"
	Region string   `json:"region"`
	Role   string   `json:"role"`
	LAN    []Member `json:"lan"`
	WAN    []Member `json:"wan,omitempty"` // brokers only
	// PID is the node's process id, so that `strata status` shows the
	// process that answers (also one restarted by hand).
	PID int `json:"pid,omitempty"`
}

// MembersBackend is the node's view of its Serf pools.
type MembersBackend interface {
	Members() MembersView
}

func (b Backends) memberRoutes() []Route {
	return []Route{
		{http.MethodGet, "/admin/v1/members", Superuser, func(w http.ResponseWriter, _ *http.Request) {
			WriteJSON(w, http.StatusOK, b.Members.Members())
		}},
	}
}
