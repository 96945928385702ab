package admin

import (
	"context"
	"net/http"
)

// BookieView is a bookie's state: GET /admin/v1/bookie on a bookie node
// (its own view), and each row of GET /admin/v1/bookies.
type BookieView struct {
	ID       string `json:"id"`
	Instance string `json:"instance"`
	Address  string `json:"address"` // gRPC, host:port
	ReadOnly bool   `json:"read_only"`
	// ReadOnlySet is true while an operator holds the bookie read-only
	// (PUT /admin/v1/bookie/read-only), whatever its disk usage; own view
	// only. ReadOnly without it: the disk passed its threshold.
	ReadOnlySet bool  `json:"read_only_set,omitempty"`
	UsedBytes   int64 `json:"used_bytes,omitempty"`
	FreeBytes   int64 `json:"free_bytes"`
	TotalBytes  int64 `json:"total_bytes"`
	Ledgers     int   `json:"ledgers"`
	// JournalDir is the journal's directory when the topology names one
	// (journal_dir), with the free and total bytes of its file system
	// (both absent when that check failed; own view only).
	JournalDir        string `json:"journal_dir,omitempty"`
	JournalFreeBytes  int64  `json:"journal_free_bytes,omitempty"`
	JournalTotalBytes int64  `json:"journal_total_bytes,omitempty"`
	// Registered is true in the region-wide list, which comes from the
	// registrations in etcd; absent from a bookie's own view.
	Registered bool `json:"registered,omitempty"`
	// InfoError is set in the region-wide list when the registered bookie
	// did not answer Info (ledgers and used bytes are then unknown, and
	// free bytes and read-only are the registration's).
	InfoError string `json:"info_error,omitempty"`
	// Journal is the journal's group-commit counters since start (own
	// view only).
	Journal *JournalStats `json:"journal,omitempty"`
}

// JournalStats counts the journal's group commits since the bookie
// started: Batches write+fsync rounds carrying Adds entries and Bytes
// bytes, which spent SyncSeconds in write+fsync.
type JournalStats struct {
	Batches     int64   `json:"batches"`
	Adds        int64   `json:"adds"`
	Bytes       int64   `json:"bytes"`
	SyncSeconds float64 `json:"sync_seconds"`
	// Rotations counts the journal files filled and closed; Recycled, the
	// new journal files made from a spare; ZeroedBytes, the bytes written
	// as zeros ahead of the writer: new files, and recycled ones past
	// their old size.
	Rotations   int64 `json:"rotations"`
	Recycled    int64 `json:"recycled"`
	ZeroedBytes int64 `json:"zeroed_bytes"`
}

// BookieList is GET /admin/v1/bookies: the region's registered bookies.
type BookieList struct {
	Region  string       `json:"region"`
	Bookies []BookieView `json:"bookies"`
}

// ReadOnlyRequest is PUT /admin/v1/bookie/read-only's body:
// {"read_only": true|false[, "bookie": ID][, "region": R]}. Bookie and
// Region, when set, are the bookie the caller means: another bookie (or
// the same id in another region) answers 409 wrong_bookie, so that a
// wrong URL does not drain the wrong bookie.
type ReadOnlyRequest struct {
	ReadOnly *bool  `json:"read_only"` // required
	Bookie   string `json:"bookie,omitempty"`
	Region   string `json:"region,omitempty"`
}

func (q *ReadOnlyRequest) validate() *Error {
	if q.ReadOnly == nil {
		return Errorf(CodeInvalidBody, "read_only", `request body: "read_only" is required (want {"read_only": true} or {"read_only": false})`)
	}
	return nil
}

// BookieBackend is a bookie node's own bookie.
type BookieBackend interface {
	// LocalBookie is the bookie's own view.
	LocalBookie() BookieView
	// SetReadOnly applies an operator's read-only setting (BookKeeper's
	// manual read-only mode) and returns the new view. Errors: *Error
	// wrong_bookie when req names another bookie; internal when the
	// setting could not be recorded.
	SetReadOnly(ctx context.Context, req ReadOnlyRequest) (BookieView, error)
}

// BookiesBackend lists the region's registered bookies.
type BookiesBackend interface {
	// Bookies are the registrations in etcd, each with what the bookie
	// answers to Info now. Errors: metadata_unavailable.
	Bookies(ctx context.Context) ([]BookieView, error)
}

func (b Backends) bookieRoutes() []Route {
	return []Route{
		{http.MethodGet, "/admin/v1/bookie", Superuser, func(w http.ResponseWriter, _ *http.Request) {
			WriteJSON(w, http.StatusOK, b.Bookie.LocalBookie())
		}},
		{http.MethodPut, "/admin/v1/bookie/read-only", Superuser, func(w http.ResponseWriter, r *http.Request) {
			var req ReadOnlyRequest
			if e := DecodeBody(w, r, &req, false); e != nil {
				WriteError(w, e)
				return
			}
			v, err := b.Bookie.SetReadOnly(r.Context(), req)
			if err != nil {
				WriteError(w, err)
				return
			}
			WriteJSON(w, http.StatusOK, v)
		}},
	}
}

func (b Backends) bookiesRoutes() []Route {
	return []Route{
		{http.MethodGet, "/admin/v1/bookies", Superuser, func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), MetadataTimeout)
			defer cancel()
			bs, err := b.Bookies.Bookies(ctx)
			if err != nil {
				WriteError(w, err)
				return
			}
			WriteJSON(w, http.StatusOK, BookieList{Region: b.Region, Bookies: nonNil(bs)})
		}},
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
