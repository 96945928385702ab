// Command ledgerbench measures the ledger client end to end: 1 KiB entries
// appended to one ledger (E=3, Qw=2, Qa=2 by default) over four bookie
// processes on loopback with fsync on, as adds/s and p50/p99/p999 latency
// at full load (a window of adds in flight) and at half load (an open-loop
// rate of half the full-load throughput), and, in the same run and on the
// same disk, the raw write+fsync limit at the bookies' mean journal batch.
// Each ledger add costs Qw journal writes on the shared disk, so the
// ledger's physical limit is raw / Qw. Run it through bench/ledger.sh.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/bench/benchnode"
	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/region"
	"github.com/stratamesh/strata/topology"
)

const topo = `mesh: bench
regions:
  - name: solo
    brokers: 1
    bookies: 4
    ledger: {ensemble: 3, write_quorum: 2, ack_quorum: 2}
`

func main() {
	strata := flag.String("strata", "bin/strata", "the strata binary")
	n := flag.Int("n", 50000, "adds per load level")
	size := flag.Int("size", 1024, "entry payload size in bytes")
	window := flag.Int("window", 512, "adds in flight at full load")
	e := flag.Int("e", 3, "ensemble size")
	qw := flag.Int("qw", 2, "write quorum")
	qa := flag.Int("qa", 2, "ack quorum")
	dir := flag.String("dir", "", "data directory (default: a new temporary one, removed after)")
	flag.Parse()
	if err := run(*strata, *dir, *n, *size, *window, *e, *qw, *qa); err != nil {
		fmt.Fprintln(os.Stderr, "ledgerbench:", err)
		os.Exit(1)
	}
}

func run(strata, dir string, n, size, window, e, qw, qa int) error {
	if dir == "" {
		d, err := os.MkdirTemp(".", "ledgerbench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	topoPath := filepath.Join(dir, "bench.yaml")
	if err := os.WriteFile(topoPath, []byte(topo), 0o644); err != nil {
		return err
	}
	common := []string{"node", "--topology", topoPath, "--region", "solo", "--data-dir", filepath.Join(dir, "data"), "--gossip", "loopback", "--log-level", "error"}
	metaNode, err := benchnode.Start(strata, append(common, "--id", "meta"), "")
	if err != nil {
		return err
	}
	defer metaNode.Stop()
	var bookies []*benchnode.Node
	for _, id := range []string{"k1", "k2", "k3", "k4"} {
		b, err := benchnode.Start(strata, append(common, "--id", id, "--etcd", metaNode.Report.Etcd, "--join", metaNode.Report.SerfLAN), "")
		if err != nil {
			return err
		}
		defer b.Stop()
		bookies = append(bookies, b)
	}
	m, _, err := topology.Parse("bench.yaml", []byte(topo))
	if err != nil {
		return err
	}
	r, _ := m.Region("solo")
	ctx := context.Background()
	st, err := meta.Open(ctx, meta.Config{Endpoints: []string{metaNode.Report.Etcd}, Prefix: region.KeyPrefix(m, r)})
	if err != nil {
		return err
	}
	defer st.Close()
	lc, err := ledger.NewClient(ledger.Config{Store: st})
	if err != nil {
		return err
	}
	defer lc.Close()
	opts := ledger.CreateOptions{Ensemble: e, WriteQuorum: qw, AckQuorum: qa, Password: []byte("bench")}

	full, fullLat, err := load(ctx, lc, opts, n, size, window, 0)
	if err != nil {
		return err
	}
	half, halfLat, err := load(ctx, lc, opts, n, size, window*4, full/2)
	if err != nil {
		return err
	}
	// The bookies' journal batches, for the raw run's batch size.
	var batches, adds int64
	for _, b := range bookies {
		var view admin.BookieView
		if err := (&admin.Client{}).Get(ctx, b.Report.Admin, "/admin/v1/bookie", &view); err != nil {
			return err
		}
		batches += view.Journal.Batches
		adds += view.Journal.Adds
	}
	batch := max(1, int(float64(adds)/float64(max(1, batches))+0.5))
	raw, err := benchnode.RawWriteFsync(filepath.Join(dir, "raw"), size, batch, max(200, int(min(batches/int64(len(bookies)), 10000))))
	if err != nil {
		return err
	}
	limit := raw / float64(qw)
	fmt.Printf("ledger E=%d Qw=%d Qa=%d over %d bookie processes, %d adds of %d B per level, fsync on\n", e, qw, qa, len(bookies), n, size)
	fmt.Printf("  full load (%d in flight): adds/s %.0f   p50 %v   p99 %v   p999 %v\n", window, full, benchnode.Pct(fullLat, 0.50), benchnode.Pct(fullLat, 0.99), benchnode.Pct(fullLat, 0.999))
	fmt.Printf("  half load (open loop at %.0f/s): adds/s %.0f   p50 %v   p99 %v   p999 %v\n", full/2, half, benchnode.Pct(halfLat, 0.50), benchnode.Pct(halfLat, 0.99), benchnode.Pct(halfLat, 0.999))
	fmt.Printf("  bookie journals: %d group commits, mean %d entries each\n", batches, batch)
	fmt.Printf("raw write+fsync on the same disk, batches of %d x %d B: %.0f entries/s; / Qw = %.0f ledger adds/s (the limit)\n", batch, size, raw, limit)
	fmt.Printf("ratio ledger/limit at full load: %.2f\n", full/limit)
	return nil
}

// load appends n entries to a new ledger with at most window in flight;
// with rate > 0 it paces the appends at rate per second (open loop). It
// returns adds/s and each add's latency (append to confirmation).
func load(ctx context.Context, lc *ledger.Client, opts ledger.CreateOptions, n, size, window int, rate float64) (float64, []time.Duration, error) {
	w, err := lc.Create(ctx, opts)
	if err != nil {
		return 0, nil, err
	}
	payload := make([]byte, size)
	lat := make([]time.Duration, n)
	sem := make(chan struct{}, window)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for i := 0; i < n; i++ {
		if rate > 0 {
			if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
				time.Sleep(d)
			}
		}
		sem <- struct{}{}
		wg.Add(1)
		sent := time.Now()
		i := i
		w.AppendAsync(payload, func(_ int64, err error) {
			lat[i] = time.Since(sent)
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
			<-sem
			wg.Done()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return 0, nil, firstErr
	}
	if _, err := w.Close(ctx); err != nil {
		return 0, nil, err
	}
	return float64(n) / elapsed.Seconds(), lat, nil
}
