package admin

import (
	"context"
	"net/http"
)

// LinkStatus is a broker's link to one remote region.
type LinkStatus struct {
	Remote    string `json:"remote"`
	Connected bool   `json:"connected"`
	// URL is the remote broker connected to ("" while down).
	URL string `json:"url,omitempty"`
	// Dials counts connections made; Dropped counts answers dropped
	// because a sender did not keep up.
	Dials   uint64 `json:"dials"`
	Dropped uint64 `json:"dropped_answers,omitempty"`
	// LastError is the last failed dial's error, while down.
	LastError string `json:"last_error,omitempty"`
}

// OriginLoss is an origin stream of a topic the broker owns with the
// messages gap records skipped (trimmed at their origin before they were
// replicated here).
type OriginLoss struct {
	Topic       string `json:"topic"`
	Region      string `json:"region"`
	Incarnation string `json:"incarnation"`
	Lost        uint64 `json:"lost"`
}

// ReplicationView is GET /admin/v1/replication: a broker's links to other
// regions, the replicator cursors of the topics it owns, and the losses
// gap records recorded in them.
type ReplicationView struct {
	Region  string             `json:"region"`
	Broker  string             `json:"broker"`
	Links   []LinkStatus       `json:"links"`
	Cursors []ReplicationStats `json:"cursors"`
	Lost    []OriginLoss       `json:"lost"`
}

// ReplicationBackend is a broker's replication state.
type ReplicationBackend interface {
	Replication() ReplicationView
}

// TierUsage is GET /admin/v1/tier: what the region's tier holds for the
// region (data and index objects of offloaded ledgers).
type TierUsage struct {
	Kind string `json:"kind"`
	// Ledgers is how many ledger copies (data objects) it holds; Objects
	// counts their data and index objects, Bytes the objects' sizes.
	Ledgers int    `json:"ledgers"`
	Objects int    `json:"objects"`
	Bytes   int64  `json:"bytes"`
	Error   string `json:"error,omitempty"` // why the tier could not be listed
}

// TierBackend lists the region's tier.
type TierBackend interface {
	TierUsage(ctx context.Context) TierUsage
}

func (b Backends) replicationRoutes() []Route {
	return []Route{
		{http.MethodGet, "/admin/v1/replication", Superuser, func(w http.ResponseWriter, _ *http.Request) {
			v := b.Replication.Replication()
			v.Region = b.Region
			v.Links, v.Cursors, v.Lost = nonNil(v.Links), nonNil(v.Cursors), nonNil(v.Lost)
			WriteJSON(w, http.StatusOK, v)
		}},
	}
}

func (b Backends) tierRoutes() []Route {
	return []Route{
		{http.MethodGet, "/admin/v1/tier", Superuser, func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), MetadataTimeout)
			defer cancel()
			WriteJSON(w, http.StatusOK, b.Tier.TierUsage(ctx))
		}},
	}
}
