package region

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/storage"
)

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
		TLS:             n.mutualTLS(),
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
func (n *Node) localBookie() admin.BookieView {
	i := n.bookie.Info()
	st := n.engine.Stats()
	return admin.BookieView{ID: i.BookieID, Instance: i.Instance, Address: i.Address, ReadOnly: i.ReadOnly, ReadOnlySet: n.engine.ReadOnlyBySet(),
		UsedBytes: i.UsedBytes, FreeBytes: i.FreeBytes, TotalBytes: i.TotalBytes, Ledgers: i.NumLedgers,
		JournalDir: i.JournalDir, JournalFreeBytes: i.JournalFreeBytes, JournalTotalBytes: i.JournalTotalBytes,
		Journal: &admin.JournalStats{Batches: st.JournalBatches, Adds: st.JournalAdds, Bytes: st.JournalBytes, SyncSeconds: st.JournalSyncTime.Seconds(),
			Rotations: st.JournalRotations, Recycled: st.JournalRecycled, ZeroedBytes: st.JournalZeroed}}
}

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
func liveBookieInfo(ctx context.Context, v *admin.BookieView, tc *tls.Config) {
	ctx, cancel := context.WithTimeout(ctx, bookieInfoTimeout)
	defer cancel()
	c, err := bookie.Dial(ctx, v.Address, bookie.DialOptions{Instance: v.Instance, TLS: tc})
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
