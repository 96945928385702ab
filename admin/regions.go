package admin

import (
	"net/http"
	"time"
)

// Catch-up states of a remote region (RegionState.CatchUp).
const (
	CatchUpCaughtUp    = "caught-up"
	CatchUpCatchingUp  = "catching-up"
	CatchUpUnreachable = "unreachable"
	CatchUpStalled     = "stalled"
)

// RegionState is one other region as a broker sees it: reachability,
// the catch-up of the replication toward it, the guests (its clients
// connected to this broker's failover listener for it) and when they
// switch back.
type RegionState struct {
	Region string `json:"region"`
	// Reachable: the region has a live broker in the Serf WAN pool
	// (WANBrokers counts them) and this broker's replication link to it,
	// if it has one, is connected (Link: connected | down | none).
	Reachable  bool   `json:"reachable"`
	WANBrokers int    `json:"wan_brokers"`
	Link       string `json:"link"`
	// CatchUp is caught-up | catching-up | unreachable | stalled, for the
	// replication toward the region from this region: this broker's
	// cursors, and the region's other brokers' (BehindOn names those
	// still behind, from their Serf LAN tags).
	CatchUp  string   `json:"catch_up"`
	BehindOn []string `json:"behind_on,omitempty"`
	// LagMsgs sums this broker's cursors' lag toward the region, in
	// messages; LagSeconds is their largest lag (age of the oldest
	// message not acknowledged), in seconds.
	LagMsgs    uint64  `json:"lag_msgs"`
	LagSeconds float64 `json:"lag_seconds"`
	// SwitchBack is away | returned | settling | home: home means the
	// region's clients belong there (guests are closed, new ones refused);
	// Since is when it entered that phase; SwitchBackAt, while settling,
	// when the guests go home; Rounds counts switch-backs since start.
	SwitchBack   string    `json:"switch_back"`
	Since        time.Time `json:"since,omitzero"`
	SwitchBackAt time.Time `json:"switch_back_at,omitzero"`
	Rounds       int       `json:"rounds"`
	// Guests is how many of its clients this broker holds now;
	// FailoverURL the listener they connect to.
	Guests      int    `json:"guests"`
	FailoverURL string `json:"failover_url,omitempty"`
}

// RegionsView is GET /admin/v1/regions: the mesh's other regions as one
// broker sees them, with the switch-back settings it applies.
type RegionsView struct {
	Region string `json:"region"`
	Broker string `json:"broker"`
	// SwitchBackDelay and CaughtUpLag are the region's failover settings
	// (topology regions[].failover), in seconds.
	SwitchBackDelay float64       `json:"switch_back_delay_seconds"`
	CaughtUpLag     float64       `json:"caught_up_lag_seconds"`
	Regions         []RegionState `json:"regions"`
}

// RegionsBackend is a broker's view of the other regions.
type RegionsBackend interface {
	Regions() RegionsView
}

func (b Backends) regionRoutes() []Route {
	return []Route{
		{http.MethodGet, "/admin/v1/regions", Superuser, func(w http.ResponseWriter, _ *http.Request) {
			v := b.RegionStates.Regions()
			v.Region = b.Region
			v.Regions = nonNil(v.Regions)
			WriteJSON(w, http.StatusOK, v)
		}},
	}
}
