package region

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/storage"
	"github.com/stratamesh/strata/internal/adminhttp"
)

// BookieView is a bookie's state as the admin API reports it
// (GET /admin/v1/bookie on a bookie node, and each row of
// GET /admin/v1/bookies).
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

// startBookie runs the bookie role: cookie, storage engine (under the
// node's data dir), gRPC service on the node's grpc_port, registration
// under bookies/<id>.
func (n *Node) startBookie(ctx context.Context) error {
	dir := n.dir()
	b, err := withPort(n.spec.GRPCPort, n.ports.GRPC, func(port int) (*bookie.Bookie, error) {
		return n.runBookie(ctx, dir, port)
	})
	if err != nil {
		return err
	}
	n.bookie = b
	n.goLoop(func() {
		select {
		case <-n.stop:
		case err := <-b.Fatal():
			n.fail(err)
		}
	})
	return nil
}

func (n *Node) runBookie(ctx context.Context, dir string, port int) (*bookie.Bookie, error) {
	return bookie.StartBookie(ctx, bookie.BookieConfig{
		ID:              n.cfg.ID,
		DataDir:         dir,
		ListenAddr:      net.JoinHostPort(n.host(), strconv.Itoa(port)),
		Meta:            n.store,
		Logger:          n.logger,
		RegistrationTTL: n.cfg.RegistrationTTL,
		HasStorageData:  func() (bool, error) { return storage.HasData(nil, dir) },
		OpenStorage: func(context.Context) (storage.Storage, error) {
			sc := storage.DefaultConfig()
			sc.Dir = dir
			sc.JournalDir = n.spec.JournalDir
			sc.Logger = n.logger.With("component", "storage")
			// No idle wait: under load the fsync in progress is the
			// batching window; a lone add is fsynced at once. Measured
			// in docs/perf.md (82k vs 60k adds/s at 256 in flight).
			sc.JournalGroupWindow = 0
			e, err := storage.Open(sc)
			if err != nil {
				return nil, err
			}
			ro, err := readOnlySet(dir)
			if err != nil {
				e.Close()
				return nil, err
			}
			if ro { // before it registers: the registration says so
				e.SetReadOnly(true)
			}
			n.engine = e
			return e, nil
		},
	})
}

// localBookie is this bookie node's own view.
func (n *Node) localBookie() BookieView {
	i := n.bookie.Info()
	st := n.engine.Stats()
	return BookieView{ID: i.BookieID, Instance: i.Instance, Address: i.Address, ReadOnly: i.ReadOnly, ReadOnlySet: n.engine.ReadOnlyBySet(),
		UsedBytes: i.UsedBytes, FreeBytes: i.FreeBytes, TotalBytes: i.TotalBytes, Ledgers: i.NumLedgers,
		JournalDir: i.JournalDir, JournalFreeBytes: i.JournalFreeBytes, JournalTotalBytes: i.JournalTotalBytes,
		Journal: &JournalStats{Batches: st.JournalBatches, Adds: st.JournalAdds, Bytes: st.JournalBytes, SyncSeconds: st.JournalSyncTime.Seconds(),
			Rotations: st.JournalRotations, Recycled: st.JournalRecycled, ZeroedBytes: st.JournalZeroed}}
}

// metadataTimeout bounds an admin request's wait for the region's etcd.
const metadataTimeout = 3 * time.Second

// registerBookieMetrics exports the journal's group-commit counters:
// strata.bookie.journal.batches, .adds, .bytes and .sync (seconds in
// write+fsync), from which batch size and fsync latency follow.
func registerBookieMetrics(n *Node) error {
	m := n.tel.Meter("github.com/stratamesh/strata/bookie")
	batches, err1 := m.Int64ObservableCounter("strata.bookie.journal.batches", metric.WithDescription("journal group commits (one write+fsync each)"))
	adds, err2 := m.Int64ObservableCounter("strata.bookie.journal.adds", metric.WithDescription("entries journaled"))
	bytes, err3 := m.Int64ObservableCounter("strata.bookie.journal.bytes", metric.WithUnit("By"), metric.WithDescription("bytes written to the journal"))
	sync, err4 := m.Float64ObservableCounter("strata.bookie.journal.sync", metric.WithUnit("s"), metric.WithDescription("time spent in journal write+fsync"))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return err
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := n.engine.Stats()
		o.ObserveInt64(batches, st.JournalBatches)
		o.ObserveInt64(adds, st.JournalAdds)
		o.ObserveInt64(bytes, st.JournalBytes)
		o.ObserveFloat64(sync, st.JournalSyncTime.Seconds())
		return nil
	}, batches, adds, bytes, sync)
	return err
}

// bookieRoutes mounts GET /admin/v1/bookie (bookie nodes: their own
// state) and GET /admin/v1/bookies (every node: the region's registered
// bookies, from etcd).
func (n *Node) bookieRoutes(s *adminhttp.Server) {
	if n.spec.Role == "bookie" {
		s.Handle("GET /admin/v1/bookie", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			adminhttp.WriteJSON(w, http.StatusOK, n.localBookie())
		}))
	}
	if n.spec.Role == "bookie" {
		s.Handle("PUT /admin/v1/bookie/read-only", http.HandlerFunc(n.putReadOnly))
	}
	s.Handle("GET /admin/v1/bookies", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), metadataTimeout)
		defer cancel()
		regs, err := bookie.ListRegistrations(ctx, n.store)
		if err != nil {
			adminhttp.WriteError(w, http.StatusServiceUnavailable, "metadata_unavailable",
				"region "+n.cfg.Region+": its metadata (etcd) did not answer: "+err.Error(), "")
			return
		}
		out := make([]BookieView, len(regs))
		var wg sync.WaitGroup
		for i, g := range regs {
			out[i] = BookieView{ID: g.ID, Instance: g.Instance, Address: g.Address, ReadOnly: g.ReadOnly,
				FreeBytes: g.FreeBytes, TotalBytes: g.TotalBytes, Registered: true}
			wg.Go(func() { liveBookieInfo(ctx, &out[i]) })
		}
		wg.Wait()
		adminhttp.WriteJSON(w, http.StatusOK, map[string]any{"region": n.cfg.Region, "bookies": out})
	}))
}

// bookieInfoTimeout bounds the Info call the region-wide list makes to
// each registered bookie.
const bookieInfoTimeout = 2 * time.Second

// liveBookieInfo fills v (a registration's view) with what the bookie
// answers to Info now: ledgers, used, free and total bytes, read-only.
// The registration's free bytes are republished only on a change of ~1%
// of the disk, and it carries no ledger count, so the live answer is what
// `strata admin bookies list` shows; when the bookie does not answer
// within bookieInfoTimeout, v keeps the registration's figures and
// InfoError says why.
func liveBookieInfo(ctx context.Context, v *BookieView) {
	ctx, cancel := context.WithTimeout(ctx, bookieInfoTimeout)
	defer cancel()
	c, err := bookie.Dial(ctx, v.Address, bookie.DialOptions{Instance: v.Instance})
	if err == nil {
		defer c.Close()
		var info bookie.Info
		if info, err = c.Info(ctx, false); err == nil {
			v.Ledgers, v.UsedBytes, v.FreeBytes, v.TotalBytes, v.ReadOnly = info.NumLedgers, info.UsedBytes, info.FreeBytes, info.TotalBytes, info.ReadOnly
			return
		}
	}
	v.InfoError = err.Error()
}
