// Command bookiebench measures one bookie process end to end: pipelined
// adds of fixed-size entries over gRPC with fsync on (the default), as
// adds/s and p50/p99/p999 latency, and, in the same run and on the same
// disk, the raw write+fsync throughput with batches of the same size (the
// physical limit). Run it through bench/bookie.sh.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/bench/benchnode"
	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/storage"
)

const topology = `mesh: bench
regions:
  - name: solo
    brokers: 1
    bookies: 1
    ledger: {ensemble: 1, write_quorum: 1, ack_quorum: 1}
`

func main() { os.Exit(bench()) }

// bench runs the benchmark and returns the exit code: 2 for bad flags, 1
// for a failed run.
func bench() int {
	strata := flag.String("strata", "bin/strata", "the strata binary")
	n := flag.Int("n", 100000, "adds to send")
	size := flag.Int("size", 1024, "entry payload size in bytes")
	window := flag.Int("window", 256, "adds in flight")
	dir := flag.String("dir", "", "data directory; the last round's bookie data stays in it (default: a new temporary one in the current directory, removed after, also on SIGINT or SIGTERM)")
	profile := flag.String("cpuprofile", "", "write CPU profiles of the bookie process (`PREFIX`.bookie; the last round's) and of this client (PREFIX.client)")
	rounds := flag.Int("rounds", 1, "load-then-raw rounds, each with a fresh bookie data dir; the ratio's median and range are printed at the end")
	flag.Func("bookie-env", "`KEY=VALUE` added to the bookie process's environment (e.g. GOMAXPROCS=1); repeatable", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("want KEY=VALUE, got %q", v)
		}
		bookieEnv = append(bookieEnv, v)
		return nil
	})
	flag.Parse()
	for _, f := range []struct {
		name string
		v    int
	}{{"n", *n}, {"size", *size}, {"window", *window}, {"rounds", *rounds}} {
		if f.v < 1 {
			fmt.Fprintf(os.Stderr, "bookiebench: -%s %d: must be positive\n", f.name, f.v)
			return 2
		}
	}
	if *dir == "" {
		d, err := os.MkdirTemp(".", "bookiebench-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "bookiebench:", err)
			return 1
		}
		defer os.RemoveAll(d)
		removeOnSignal(d)
		*dir = d
	}
	if *profile != "" {
		stop, err := profileClient(*profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bookiebench:", err)
			return 1
		}
		defer stop()
	}
	if err := run(*strata, *dir, *n, *size, *window, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "bookiebench:", err)
		return 1
	}
	return 0
}

// removeOnSignal makes SIGINT and SIGTERM kill the nodes started so far
// and remove dir (the raw loops alone write gigabytes there) before the
// process exits with status 130.
func removeOnSignal(dir string) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "bookiebench: %v: removing %s\n", s, dir)
		benchnode.KillAll()
		// The killed nodes may still hold the tree for a moment.
		for i := 0; i < 20 && os.RemoveAll(dir) != nil; i++ {
			time.Sleep(50 * time.Millisecond)
		}
		os.Exit(130)
	}()
}

// bookieEnv is added to the bookie process's environment (-bookie-env).
var bookieEnv []string

// bookieProfile is the CPU profile path passed to the bookie process
// (STRATA_CPUPROFILE), or empty.
var bookieProfile string

// profileClient starts this process's CPU profile (prefix.client) and
// sets bookieProfile (prefix.bookie); the returned function stops it.
func profileClient(prefix string) (func(), error) {
	abs, err := filepath.Abs(prefix)
	if err != nil {
		return nil, err
	}
	bookieProfile = abs + ".bookie"
	f, err := os.Create(abs + ".client")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func run(strata, dir string, n, size, window, rounds int) error {
	topo := filepath.Join(dir, "bench.yaml")
	if err := os.WriteFile(topo, []byte(topology), 0o644); err != nil {
		return err
	}
	common := []string{"node", "--topology", topo, "--region", "solo", "--gossip", "loopback", "--log-level", "error"}
	metaNode, err := benchnode.Start(strata, slices.Concat(common, []string{"--data-dir", filepath.Join(dir, "meta"), "--id", "meta"}), "")
	if err != nil {
		return err
	}
	defer metaNode.Stop()
	// Each round measures the bookie and then, right after, the raw
	// loops, so each ratio compares figures taken minutes apart at most:
	// this host's speed drifts by tens of percent over a session.
	var ratios []float64
	for r := 1; r <= rounds; r++ {
		if rounds > 1 {
			fmt.Printf("round %d of %d\n", r, rounds)
		}
		bookieDir := filepath.Join(dir, fmt.Sprintf("bookie-%d", r))
		args := slices.Concat(common, []string{"--data-dir", bookieDir, "--id", "k1", "--etcd", metaNode.Report.Etcd, "--join", metaNode.Report.SerfLAN})
		ratio, err := round(strata, args, dir, n, size, window)
		if r < rounds {
			os.RemoveAll(bookieDir) // the last round's data stays for -dir users
		}
		if err != nil {
			return err
		}
		ratios = append(ratios, ratio)
	}
	if rounds > 1 {
		slices.Sort(ratios)
		median := (ratios[(rounds-1)/2] + ratios[rounds/2]) / 2
		fmt.Printf("ratio bookie/raw over %d rounds: median %.2f, range %.2f–%.2f\n", rounds, median, ratios[0], ratios[rounds-1])
	}
	return nil
}

// round starts a bookie process with args, loads it with n adds, stops
// it, runs the raw loops in dir at the journal's mean batch size, prints
// the figures and returns the ratio the goal is set against.
func round(strata string, args []string, dir string, n, size, window int) (float64, error) {
	k1, err := benchnode.Start(strata, args, bookieProfile, bookieEnv...)
	if err != nil {
		return 0, err
	}
	defer k1.Stop()

	rate, lat, err := addLoad(k1.Report.GRPC, n, size, window)
	if err != nil {
		return 0, err
	}
	var view admin.BookieView
	if err := (&admin.Client{}).Get(context.Background(), k1.Report.Admin, "/admin/v1/bookie", &view); err != nil {
		return 0, err
	}
	j := view.Journal
	batch := max(1, int(float64(j.Adds)/float64(max(1, j.Batches))+0.5))
	// The raw loops get the disk nearly to themselves: the bookie stopped
	// (its last entry-log flush done; the meta node's etcd stays up, idle)
	// and every dirty page written back, so that the limit is not
	// measured against the load's leftover writeback.
	k1.Stop()
	syscall.Sync()
	// The same number of write+fsync rounds the journal did, at its mean
	// batch size, but at most 20,000 (each loop's file then holds at most
	// 20,000 × batch × size bytes, removed when the loop ends), two ways:
	// appending with fsync, and overwriting a zero-filled file with
	// fdatasync, as the journal does. The faster is the limit.
	rawRounds := int(min(j.Batches, 20000))
	raw, err := benchnode.RawWriteFsync(filepath.Join(dir, "raw"), size, batch, rawRounds)
	if err != nil {
		return 0, err
	}
	zeroed, err := benchnode.RawZeroedFdatasync(filepath.Join(dir, "raw"), size, batch, rawRounds)
	if err != nil {
		return 0, err
	}
	// What a bookie with its journal and entry logs on this one disk must
	// write: the overwrite loop with every entry written again to an
	// entry log alongside. Reported, not the limit the goal is set
	// against (that is the journal's own write+fsync).
	withLog, err := benchnode.RawZeroedWithEntryLog(filepath.Join(dir, "raw"), size, batch, rawRounds)
	if err != nil {
		return 0, err
	}
	limit := max(raw, zeroed)
	fmt.Printf("bookie process, %d adds of %d B, %d in flight, fsync on\n", n, size, window)
	fmt.Printf("  adds/s %.0f   p50 %v   p99 %v   p999 %v\n", rate, benchnode.Pct(lat, 0.50), benchnode.Pct(lat, 0.99), benchnode.Pct(lat, 0.999))
	// Busy: the share of the load's run the journal spent writing and
	// syncing; the rest it waited for adds.
	fmt.Printf("  journal: %d group commits, mean %d adds each, %.0f µs write+fsync each, busy %.0f%% of the run\n",
		j.Batches, batch, j.SyncSeconds*1e6/float64(max(1, j.Batches)), 100*j.SyncSeconds*rate/float64(n))
	// A fresh bookie has no spare journal files: until purged files are
	// recycled, each new file is zero-filled (and synced) ahead of the
	// writer (a recycled one only past its old size), which the raw
	// overwrite loop does before its clock starts.
	fmt.Printf("  journal files: %d rotations, %d made from spares, %.0f MiB zero-filled ahead of the writer (journal wrote %.0f MiB)\n",
		j.Rotations, j.Recycled, float64(j.ZeroedBytes)/(1<<20), float64(j.Bytes)/(1<<20))
	fmt.Printf("raw on the same disk (bookie stopped, page cache synced), %d batches of %d x %d B\n", rawRounds, batch, size)
	fmt.Printf("  append + fsync:                 entries/s %.0f   (%.0f µs each)\n", raw, float64(batch)/raw*1e6)
	fmt.Printf("  overwrite zeroed + fdatasync:   entries/s %.0f   (%.0f µs each)\n", zeroed, float64(batch)/zeroed*1e6)
	fmt.Printf("  overwrite + entry log alongside: entries/s %.0f   (%.0f µs each; the single-disk bookie's bytes)\n", withLog, float64(batch)/withLog*1e6)
	fmt.Printf("ratio bookie/raw: %.2f against the faster raw loop (%.2f against append + fsync, %.2f against overwrite + entry log)\n",
		rate/limit, rate/raw, rate/withLog)
	return rate / limit, nil
}

// addLoad sends n adds with at most window in flight and returns adds/s
// and each add's latency (send to acknowledgement).
func addLoad(addr string, n, size, window int) (float64, []time.Duration, error) {
	ctx := context.Background()
	c, err := bookie.Dial(ctx, addr, bookie.DialOptions{})
	if err != nil {
		return 0, nil, err
	}
	defer c.Close()
	s, err := c.NewAddStream(ctx)
	if err != nil {
		return 0, nil, err
	}
	payload := make([]byte, size)
	lat := make([]time.Duration, n)
	slots := make(chan struct{}, window)
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for e := 0; e < n; e++ {
		slots <- struct{}{}
		sent := time.Now()
		req := storage.AddRequest{LedgerID: 1, EntryID: int64(e), LAC: int64(e) - 1, MasterKey: []byte("bench"), Payload: payload}
		if err := s.Send(req, func(err error) {
			lat[req.EntryID] = time.Since(sent)
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
			<-slots
		}); err != nil {
			return 0, nil, err
		}
	}
	if err := s.Close(ctx); err != nil {
		return 0, nil, err
	}
	elapsed := time.Since(start)
	if firstErr != nil {
		return 0, nil, firstErr
	}
	return float64(n) / elapsed.Seconds(), lat, nil
}
