package storage

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratamesh/strata/bench/benchnode"
)

// Set by the last BenchmarkAdd run, read by BenchmarkRawWriteFsync, so
// that one `go test -bench .` measures the engine and the disk's limit at
// the same batch size, side by side.
var (
	benchAddBatch float64 // mean adds per journal batch
	benchAddRate  float64 // adds/s
)

const (
	benchPayload  = 1024
	benchWriters  = 4
	benchInflight = 64 // per writer: 256 adds in flight in all
)

// BenchmarkAdd measures the engine's add path with fsync on, on the real
// file system: 1 KiB entries, 4 writers (one ledger each) keeping 64 adds
// in flight each. One op is one add. Reported: adds/s, latency
// percentiles (µs, from Add to done), and the mean journal batch. The
// journal has no idle group window, as on bookie nodes (region/bookie.go):
// the fsync in progress is the batching window.
func BenchmarkAdd(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Dir = b.TempDir()
	cfg.JournalGroupWindow = 0
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	payload := make([]byte, benchPayload)
	for i := range payload {
		payload[i] = byte(rand.Uint32())
	}
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	b.SetBytes(benchPayload)
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for w := 0; w < benchWriters; w++ {
		wg.Add(1)
		go func(ledger int64) {
			defer wg.Done()
			sem := make(chan struct{}, benchInflight)
			var inflight sync.WaitGroup
			for entry := int64(0); ; entry++ {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					break
				}
				sem <- struct{}{}
				inflight.Add(1)
				t0 := time.Now()
				e.Add(AddRequest{LedgerID: ledger, EntryID: entry, LAC: entry - 1, MasterKey: []byte("k"), Payload: payload},
					func(err error) {
						lat[i] = time.Since(t0)
						if err != nil {
							failed.Add(1)
						}
						<-sem
						inflight.Done()
					})
			}
			inflight.Wait()
		}(int64(w + 1))
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d adds failed", n)
	}
	st := e.Stats()
	benchAddBatch = st.AvgBatchAdds()
	benchAddRate = float64(b.N) / elapsed.Seconds()
	slices.Sort(lat)
	b.ReportMetric(benchAddRate, "adds/s")
	b.ReportMetric(percentile(lat, 0.50), "p50-µs")
	b.ReportMetric(percentile(lat, 0.99), "p99-µs")
	b.ReportMetric(percentile(lat, 0.999), "p999-µs")
	b.ReportMetric(benchAddBatch, "adds/batch")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/add")
	b.ReportMetric(float64(st.JournalSyncTime.Microseconds())/math.Max(1, float64(st.JournalBatches)), "write+fsync-µs")
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// percentile of sorted latencies, in µs.
func percentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return float64(sorted[max(i, 0)]) / float64(time.Microsecond)
}

// BenchmarkRawWriteFsync is the disk's limit for the journal's work: the
// same bytes per entry (1 KiB payload + entry and record headers) written
// in batches of N entries with one write and one fsync per batch, with
// nothing else. One op is one entry. Two ways: append (appending to a file
// rotated at the journal's size, fsync), and overwrite (overwriting a
// zero-filled file of the journal's size again and again, fdatasync: what
// the journal does in its reserve and recycled files, with no file-system
// metadata commit per batch; the zero-filling is not timed).
// batch=journal uses the mean batch of the last BenchmarkAdd run (run them
// together) and reports add_vs_raw, the engine's adds/s over this limit.
// +log is the same plus what the engine also writes to the same disk:
// every entry again, to an entry log, from a second goroutine in 1 MiB
// writes with a data sync every 64 MiB (the write-cache flush), so
// add_vs_raw there compares like with like.
func BenchmarkRawWriteFsync(b *testing.B) {
	if benchAddBatch >= 1 {
		n := int(math.Round(benchAddBatch))
		for _, overwrite := range []bool{false, true} {
			for _, withLog := range []bool{false, true} {
				name := fmt.Sprintf("batch=journal(%d)/%s", n, rawMode(overwrite, withLog))
				b.Run(name, func(b *testing.B) {
					rate := rawWriteFsync(b, n, withLog, overwrite)
					if benchAddRate > 0 {
						b.ReportMetric(benchAddRate/rate, "add_vs_raw")
					}
				})
			}
		}
	}
	for _, n := range []int{1, 16, 64, 128, 256} {
		for _, overwrite := range []bool{false, true} {
			b.Run(fmt.Sprintf("batch=%d/%s", n, rawMode(overwrite, false)), func(b *testing.B) { rawWriteFsync(b, n, false, overwrite) })
		}
	}
}

func rawMode(overwrite, withLog bool) string {
	m := "append"
	if overwrite {
		m = "overwrite"
	}
	if withLog {
		m += "+log"
	}
	return m
}

func rawWriteFsync(b *testing.B, batch int, withLog, overwrite bool) float64 {
	dir := b.TempDir()
	const perEntry = benchPayload + entryHeaderSize + recHeaderSize
	buf := make([]byte, batchHeaderSize+batch*perEntry)
	for i := range buf {
		buf[i] = byte(rand.Uint32())
	}
	maxFile := DefaultConfig().JournalMaxFileSize
	fileID := 0
	create := func() *os.File {
		fileID++
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%d.raw", fileID)))
		if err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		d, err := os.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		d.Sync()
		d.Close()
		return f
	}
	f := create()
	defer func() { f.Close() }()
	if overwrite {
		zeros := make([]byte, 1<<20)
		for off := int64(0); off < maxFile; off += int64(len(zeros)) {
			if _, err := f.WriteAt(zeros, off); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	var entryLog *benchnode.EntryLogLoad
	if withLog {
		var err error
		if entryLog, err = benchnode.StartEntryLogLoad(filepath.Join(dir, "entries.log")); err != nil {
			b.Fatal(err)
		}
	}
	batches := (b.N + batch - 1) / batch
	lat := make([]time.Duration, 0, batches)
	var off int64
	b.SetBytes(benchPayload)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < batches; i++ {
		if off+int64(len(buf)) > maxFile {
			if overwrite {
				off = 0 // the same file again, as if recycled
			} else {
				f.Close()
				f, off = create(), 0
			}
		}
		t0 := time.Now()
		if _, err := f.WriteAt(buf, off); err != nil {
			b.Fatal(err)
		}
		sync := f.Sync
		if overwrite {
			sync = func() error { return syscall.Fdatasync(int(f.Fd())) }
		}
		if err := sync(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		off += int64(len(buf))
		if entryLog != nil {
			entryLog.Add(batch * (benchPayload + entryHeaderSize))
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if entryLog != nil {
		if err := entryLog.Stop(); err != nil {
			b.Fatal(err)
		}
	}
	rate := float64(batches*batch) / elapsed.Seconds()
	slices.Sort(lat)
	b.ReportMetric(rate, "entries/s")
	b.ReportMetric(percentile(lat, 0.50), "p50-µs")
	b.ReportMetric(percentile(lat, 0.99), "p99-µs")
	return rate
}
