package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/stratamesh/strata/tenancy"
)

// OffloadStatus is a topic's offload state: where its ledgers are and the
// progress of its offloads.
type OffloadStatus struct {
	// Tier: the region has a tier.
	Tier bool `json:"tier"`
	// Threshold is the namespace's offload threshold (nil: offload only
	// on request); DeletionLag how long bookie copies are kept after.
	Threshold   *int64        `json:"threshold_bytes,omitempty"`
	DeletionLag time.Duration `json:"deletion_lag_ns"`
	// Ledgers lists every ledger and where its data is.
	Ledgers []LedgerOffload `json:"ledgers"`
	// OffloadedLedgers, OffloadedBytes: ledgers with a tier copy and the
	// size of their data objects. BookieBytes: data still on bookies.
	OffloadedLedgers int   `json:"offloaded_ledgers"`
	OffloadedBytes   int64 `json:"offloaded_bytes"`
	BookieBytes      int64 `json:"bookie_bytes"`
	// Running is the copy in progress (nil: none).
	Running *OffloadRunning `json:"running,omitempty"`
	// Requested: a requested offload is not complete yet.
	Requested bool `json:"requested"`
	// LastError of the last failed copy ("" once one succeeds), its time
	// and when the next attempt may start.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	NextRetry   time.Time `json:"next_retry,omitzero"`
	// Completed counts copies recorded by the current owner.
	Completed uint64 `json:"completed"`
}

// Where a ledger's data is (LedgerOffload.Where).
const (
	WhereOpen        = "open" // being written
	WhereBookies     = "bookies"
	WhereBookiesTier = "bookies+tier" // offloaded; bookie copy kept until the deletion lag
	WhereTier        = "tier"
)

// LedgerOffload is one ledger's place.
type LedgerOffload struct {
	ID       int64     `json:"id"`
	FirstSeq uint64    `json:"first_seq"`
	Msgs     int64     `json:"msgs"`
	Bytes    int64     `json:"bytes"`
	Where    string    `json:"where"`
	Object   string    `json:"object,omitempty"`
	TierSize int64     `json:"tier_bytes,omitempty"`
	At       time.Time `json:"offloaded_at,omitzero"`
}

// OffloadRunning is a copy in progress: entries and bytes copied of the
// ledger's Total bytes.
type OffloadRunning struct {
	Ledger  int64 `json:"ledger"`
	Entries int64 `json:"entries"`
	Bytes   int64 `json:"bytes"`
	Total   int64 `json:"total_bytes"`
}

// TierInfo names a region's tier: its kind and where its objects go (a
// directory, or bucket/prefix).
type TierInfo struct {
	Kind  string `json:"kind"`
	Where string `json:"where"`
}

// OffloadAnswer is GET and POST /admin/v1/topics/{t}/{ns}/{topic}/offload.
type OffloadAnswer struct {
	Region  string         `json:"region"`
	Topic   string         `json:"topic"`
	Tier    TierInfo       `json:"tier"`
	Offload *OffloadStatus `json:"offload"`
}

// OffloadRequest is the body of an offload POST (optional):
// {"keep_bytes": N}, the bytes of the topic's newest data to leave on
// bookies (≥ 0; absent or 0: offload every closed ledger).
type OffloadRequest struct {
	KeepBytes *int64 `json:"keep_bytes"`
}

func (q *OffloadRequest) validate() *Error {
	if q.KeepBytes != nil && *q.KeepBytes < 0 {
		return Errorf(CodeInvalidBody, "keep_bytes", "request body: keep_bytes %d is negative", *q.KeepBytes)
	}
	return nil
}

// OffloadBackend offloads a topic's closed ledgers to the region's tier.
type OffloadBackend interface {
	// Offload reports the topic's offload status at its owner, after
	// starting an offload until at most keepBytes are not offloaded when
	// start. Errors: topic_not_found, no_tier, no_owner.
	Offload(ctx context.Context, name tenancy.Name, start bool, keepBytes int64) (*OffloadStatus, error)
	// TierInfo names the region's tier.
	TierInfo() TierInfo
}

func (b Backends) offloadRoutes() []Route {
	const path = "/admin/v1/topics/{t}/{ns}/{topic}/offload"
	return []Route{
		{http.MethodGet, path, TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			name, e := TopicName(r)
			if e != nil {
				WriteError(w, e)
				return
			}
			b.offload(w, r, name, false, 0, http.StatusOK)
		}},
		{http.MethodPost, path, TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			name, e := TopicName(r)
			if e != nil {
				WriteError(w, e)
				return
			}
			var req OffloadRequest
			if e := DecodeBody(w, r, &req, true); e != nil {
				WriteError(w, e)
				return
			}
			var keep int64
			if req.KeepBytes != nil {
				keep = *req.KeepBytes
			}
			b.offload(w, r, name, true, keep, http.StatusAccepted)
		}},
	}
}

func (b Backends) offload(w http.ResponseWriter, r *http.Request, name tenancy.Name, start bool, keep int64, status int) {
	ctx, cancel := context.WithTimeout(r.Context(), TopicTimeout)
	defer cancel()
	st, err := b.Offload.Offload(ctx, name, start, keep)
	if err != nil {
		WriteError(w, err)
		return
	}
	WriteJSON(w, status, OffloadAnswer{Region: b.Region, Topic: name.String(), Tier: b.Offload.TierInfo(), Offload: st})
}
