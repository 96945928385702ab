package admin

import (
	"context"
	"math"
	"net/http"
	"time"
)

// Timeouts of the routes' waits on the region (each request's context
// is bounded by one of them).
const (
	// MetadataTimeout bounds a wait for the region's etcd.
	MetadataTimeout = 3 * time.Second
	// TopicTimeout bounds asking a topic's owner for its state.
	TopicTimeout = 5 * time.Second
	// UnloadRequestTimeout bounds starting an unload (the move itself is
	// an operation that goes on).
	UnloadRequestTimeout = 5 * time.Second
)

// Limits of GET /admin/v1/ledgers/{id}/entries: at most MaxEntriesPerRead
// entries per call, and no more than MaxReadBytes of payload (at least
// one entry is always returned).
const (
	MaxEntriesPerRead = 1000
	MaxReadBytes      = 4 << 20
)

// The ledger states in LedgerView.State.
const (
	LedgerOpen       = "OPEN"
	LedgerInRecovery = "IN_RECOVERY"
	LedgerClosed     = "CLOSED"
)

// LedgerView is a ledger as the admin API shows it: its metadata (never
// its master key) and, for one ledger, the LAC its bookies report.
type LedgerView struct {
	LedgerID int64 `json:"ledger_id"`
	// EnsembleSize E, WriteQuorum Qw, AckQuorum Qa: E ≥ Qw ≥ Qa ≥ 1.
	EnsembleSize int    `json:"ensemble_size"`
	WriteQuorum  int    `json:"write_quorum"`
	AckQuorum    int    `json:"ack_quorum"`
	State        string `json:"state"` // LedgerOpen, LedgerInRecovery or LedgerClosed
	// LastEntryID is the last entry of a closed ledger (-1 if empty); -1
	// while open or in recovery. Length is the payload bytes once closed.
	LastEntryID int64  `json:"last_entry_id"`
	Length      int64  `json:"length"`
	DigestType  string `json:"digest_type,omitempty"`
	// Segments, by increasing FirstEntry; the first starts at entry 0.
	Segments []LedgerSegment `json:"segments"`
	// FencedSegment is the writer's last segment when recovery changed
	// the ensemble (nil otherwise).
	FencedSegment *LedgerSegment `json:"fenced_segment,omitempty"`
	// Region is the region the ledger belongs to (ledger ids are per
	// region); absent from list rows, which the list names once.
	Region string `json:"region,omitempty"`
	// LAC is the last entry readers may read: LastEntryID for a closed
	// ledger, the highest LAC the bookies report for an open one (-1:
	// none yet). Absent from lists.
	LAC *int64 `json:"lac,omitempty"`
}

// LedgerSegment is one ensemble of a ledger, from entry FirstEntry on.
type LedgerSegment struct {
	FirstEntry int64    `json:"first_entry"`
	Ensemble   []string `json:"ensemble"`            // bookie ids
	Instances  []string `json:"instances,omitempty"` // their instance UUIDs
}

// LedgerList is GET /admin/v1/ledgers.
type LedgerList struct {
	Region  string       `json:"region"`
	Ledgers []LedgerView `json:"ledgers"`
}

// EntryView is one entry; Payload is base64 in JSON.
type EntryView struct {
	ID      int64  `json:"id"`
	Payload []byte `json:"payload"`
}

// EntriesView is GET /admin/v1/ledgers/{id}/entries.
type EntriesView struct {
	Region  string      `json:"region"`
	Ledger  int64       `json:"ledger"`
	LAC     int64       `json:"lac"`
	From    int64       `json:"from"`
	To      int64       `json:"to"` // the last entry returned; below the asked `to` when the LAC or a limit stopped the read
	Entries []EntryView `json:"entries"`
}

// LedgersBackend reads the region's ledgers; reads never fence. Errors
// are *Error: ledgers_unavailable, metadata_unavailable, no_such_ledger
// (field id), timeout, bookies_unavailable.
type LedgersBackend interface {
	// Ledgers lists the region's ledgers' metadata (no LAC).
	Ledgers(ctx context.Context) ([]LedgerView, error)
	// Ledger is one ledger's metadata and LAC.
	Ledger(ctx context.Context, id int64) (LedgerView, error)
	// Entries reads entries from..min(to, LAC) of ledger id (0 ≤ from ≤
	// to, to - from < MaxEntriesPerRead), stopping after MaxReadBytes of
	// payload (at least one entry).
	Entries(ctx context.Context, id, from, to int64) (EntriesView, error)
}

func (b Backends) ledgerRoutes() []Route {
	return []Route{
		{http.MethodGet, "/admin/v1/ledgers", Superuser, func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), MetadataTimeout)
			defer cancel()
			ls, err := b.Ledgers.Ledgers(ctx)
			if err != nil {
				WriteError(w, err)
				return
			}
			WriteJSON(w, http.StatusOK, LedgerList{Region: b.Region, Ledgers: nonNil(ls)})
		}},
		{http.MethodGet, "/admin/v1/ledgers/{id}", Superuser, func(w http.ResponseWriter, r *http.Request) {
			id, e := LedgerID(r)
			if e != nil {
				WriteError(w, e)
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), 2*MetadataTimeout)
			defer cancel()
			l, err := b.Ledgers.Ledger(ctx, id)
			if err != nil {
				WriteError(w, err)
				return
			}
			l.Region = b.Region
			WriteJSON(w, http.StatusOK, l)
		}},
		{http.MethodGet, "/admin/v1/ledgers/{id}/entries", Superuser, b.entries},
	}
}

// entries answers GET /admin/v1/ledgers/{id}/entries?from=&to=: from
// defaults to 0, to to from+MaxEntriesPerRead-1 (and is capped there).
func (b Backends) entries(w http.ResponseWriter, r *http.Request) {
	id, e := LedgerID(r)
	if e != nil {
		WriteError(w, e)
		return
	}
	from, e := QueryInt(r, "from", 0, CodeBadFrom)
	if e != nil {
		WriteError(w, e)
		return
	}
	defTo := int64(math.MaxInt64)
	if from <= math.MaxInt64-MaxEntriesPerRead {
		defTo = from + MaxEntriesPerRead - 1
	}
	to, e := QueryInt(r, "to", defTo, CodeBadTo)
	if e != nil {
		WriteError(w, e)
		return
	}
	if from < 0 || to < from {
		WriteError(w, Errorf(CodeBadRange, "from", "need 0 <= from <= to, got from=%d to=%d", from, to))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 3*MetadataTimeout)
	defer cancel()
	v, err := b.Ledgers.Entries(ctx, id, from, min(to, defTo))
	if err != nil {
		WriteError(w, err)
		return
	}
	v.Region, v.Entries = b.Region, nonNil(v.Entries)
	WriteJSON(w, http.StatusOK, v)
}
