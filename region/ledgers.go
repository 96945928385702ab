package region

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"

	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/internal/adminhttp"
)

// Limits of GET /admin/v1/ledgers/{id}/entries.
const (
	maxEntriesPerRead = 1000
	maxReadBytes      = 4 << 20
)

// LedgerView is a ledger as the admin API shows it: its metadata and, for
// an open ledger, the LAC its bookies report (the last entry a reader may
// see).
type LedgerView struct {
	core.Metadata
	// Region is the region the ledger belongs to (ledger ids are per
	// region); absent from list rows, which the list names once.
	Region string `json:"region,omitempty"`
	// LAC is the last entry readers may read: LastEntryID for a closed
	// ledger, the highest LAC the bookies report for an open one (-1:
	// none yet). Absent from lists.
	LAC *int64 `json:"lac,omitempty"`
	// MasterKey hides the metadata's master key (the fencing password):
	// the shallower field wins in JSON and is always nil.
	MasterKey *struct{} `json:"master_key,omitempty"`
}

// EntryView is one entry of GET /admin/v1/ledgers/{id}/entries; Payload is
// base64 in JSON.
type EntryView struct {
	ID      int64  `json:"id"`
	Payload []byte `json:"payload"`
}

// EntriesView is the answer of GET /admin/v1/ledgers/{id}/entries.
type EntriesView struct {
	Region  string      `json:"region"`
	Ledger  int64       `json:"ledger"`
	LAC     int64       `json:"lac"`
	From    int64       `json:"from"`
	To      int64       `json:"to"` // the last entry returned; below the asked `to` when the LAC or a size limit stopped the read
	Entries []EntryView `json:"entries"`
}

// ledgerClient opens the node's ledger client on first use (it dials
// bookies only when entries are read).
type ledgerClient struct {
	once sync.Once
	c    *ledger.Client
	err  error
}

func (n *Node) ledgers() (*ledger.Client, error) {
	n.ledgerCl.once.Do(func() {
		n.ledgerCl.c, n.ledgerCl.err = ledger.NewClient(ledger.Config{Store: n.store, Logger: n.logger})
	})
	return n.ledgerCl.c, n.ledgerCl.err
}

// ledgerRoutes mounts the read-only ledger routes (every node answers for
// its region): list, show, and entries up to the LAC. Reads never fence.
func (n *Node) ledgerRoutes(s *adminhttp.Server) {
	s.Handle("GET /admin/v1/ledgers", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, ok := n.ledgerClientOr503(w)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), metadataTimeout)
		defer cancel()
		mds, err := lc.List(ctx)
		if err != nil {
			n.metadataError(w, err)
			return
		}
		out := make([]LedgerView, 0, len(mds))
		for _, md := range mds {
			out = append(out, LedgerView{Metadata: md})
		}
		adminhttp.WriteJSON(w, http.StatusOK, map[string]any{"region": n.cfg.Region, "ledgers": out})
	}))
	s.Handle("GET /admin/v1/ledgers/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, ok := n.ledgerClientOr503(w)
		if !ok {
			return
		}
		id, ok := ledgerID(w, r)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*metadataTimeout)
		defer cancel()
		rd, err := lc.OpenReader(ctx, id)
		if err != nil {
			n.ledgerError(w, id, err)
			return
		}
		lac := rd.LAC()
		adminhttp.WriteJSON(w, http.StatusOK, LedgerView{Metadata: rd.Metadata(), Region: n.cfg.Region, LAC: &lac})
	}))
	s.Handle("GET /admin/v1/ledgers/{id}/entries", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, ok := n.ledgerClientOr503(w)
		if !ok {
			return
		}
		id, ok := ledgerID(w, r)
		if !ok {
			return
		}
		from, okFrom := queryInt(w, r, "from", 0)
		if !okFrom {
			return
		}
		defTo := int64(math.MaxInt64)
		if from <= math.MaxInt64-maxEntriesPerRead {
			defTo = from + maxEntriesPerRead - 1
		}
		to, okTo := queryInt(w, r, "to", defTo)
		if !okTo {
			return
		}
		if from < 0 || to < from {
			adminhttp.WriteError(w, http.StatusBadRequest, "bad_range", "need 0 <= from <= to, got from="+strconv.FormatInt(from, 10)+" to="+strconv.FormatInt(to, 10), "from")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 3*metadataTimeout)
		defer cancel()
		rd, err := lc.OpenReader(ctx, id)
		if err != nil {
			n.ledgerError(w, id, err)
			return
		}
		view := EntriesView{Region: n.cfg.Region, Ledger: id, LAC: rd.LAC(), From: from, To: from - 1, Entries: []EntryView{}}
		last := min(to, rd.LAC(), defTo)
		if last >= from {
			entries, err := rd.Read(ctx, from, last)
			if err != nil {
				n.ledgerError(w, id, err)
				return
			}
			size := 0
			for _, e := range entries {
				if size += len(e.Payload); size > maxReadBytes && len(view.Entries) > 0 {
					break
				}
				view.Entries = append(view.Entries, EntryView{ID: e.ID, Payload: e.Payload})
				view.To = e.ID
			}
		}
		adminhttp.WriteJSON(w, http.StatusOK, view)
	}))
}

func (n *Node) ledgerClientOr503(w http.ResponseWriter) (*ledger.Client, bool) {
	lc, err := n.ledgers()
	if err != nil {
		adminhttp.WriteError(w, http.StatusServiceUnavailable, "ledgers_unavailable", "region "+n.cfg.Region+": "+err.Error(), "")
		return nil, false
	}
	return lc, true
}

func (n *Node) metadataError(w http.ResponseWriter, err error) {
	adminhttp.WriteError(w, http.StatusServiceUnavailable, "metadata_unavailable",
		"region "+n.cfg.Region+": its metadata (etcd) did not answer: "+err.Error(), "")
}

func (n *Node) ledgerError(w http.ResponseWriter, id int64, err error) {
	switch {
	case errors.Is(err, ledger.ErrNoLedger):
		adminhttp.WriteError(w, http.StatusNotFound, "no_such_ledger", "region "+n.cfg.Region+" has no ledger "+strconv.FormatInt(id, 10), "id")
	case errors.Is(err, context.DeadlineExceeded):
		adminhttp.WriteError(w, http.StatusServiceUnavailable, "timeout", "ledger "+strconv.FormatInt(id, 10)+": "+err.Error(), "")
	default:
		adminhttp.WriteError(w, http.StatusServiceUnavailable, "bookies_unavailable", "ledger "+strconv.FormatInt(id, 10)+": "+err.Error(), "")
	}
}

func ledgerID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != raw { // digits only, no sign or leading zeros
		adminhttp.WriteError(w, http.StatusBadRequest, "bad_ledger_id", "ledger id "+strconv.Quote(r.PathValue("id"))+": want an integer from 0 to "+strconv.FormatInt(math.MaxInt64, 10)+", in decimal without sign or leading zeros", "id")
		return 0, false
	}
	return id, true
}

func queryInt(w http.ResponseWriter, r *http.Request, name string, def int64) (int64, bool) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, true
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		adminhttp.WriteError(w, http.StatusBadRequest, "bad_"+name, name+"="+strconv.Quote(s)+" is not an integer", name)
		return 0, false
	}
	return v, true
}

// closeLedgers closes the ledger client if it was opened, and keeps it
// from opening later.
func (n *Node) closeLedgers() error {
	n.ledgerCl.once.Do(func() { n.ledgerCl.err = errors.New("node stopping") })
	if n.ledgerCl.c != nil {
		return n.ledgerCl.c.Close()
	}
	return nil
}
