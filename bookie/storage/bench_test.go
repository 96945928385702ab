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
	"testing"
	"time"
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
// percentiles (µs, from Add to done), and the mean journal batch.
func BenchmarkAdd(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Dir = b.TempDir()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("BENCH_NOFLUSH") != "" {
		cfg.WriteCacheBytes = 8 << 30
		cfg.FlushInterval = time.Hour
	}
	if os.Getenv("BENCH_NOPREALLOC") != "" {
		cfg.JournalPreallocate = 0
	}
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
	b.ReportMetric(float64(st.JournalSyncTime.Microseconds())/math.Max(1, float64(st.JournalBatches)), "write+fsync-µs")
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
// in batches of N entries with one write and one fsync per batch,
// appending to a file rotated at the journal's size, with nothing else.
// One op is one entry. batch=journal uses the mean batch of the last
// BenchmarkAdd run (run them together) and reports add_vs_raw, the
// engine's adds/s over this limit.
func BenchmarkRawWriteFsync(b *testing.B) {
	sizes := []int{1, 16, 64, 128, 256}
	if benchAddBatch >= 1 {
		n := int(math.Round(benchAddBatch))
		b.Run(fmt.Sprintf("batch=journal(%d)", n), func(b *testing.B) {
			rate := rawWriteFsync(b, n)
			if benchAddRate > 0 {
				b.ReportMetric(benchAddRate/rate, "add_vs_raw")
			}
		})
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) { rawWriteFsync(b, n) })
	}
}

func rawWriteFsync(b *testing.B, batch int) float64 {
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
	batches := (b.N + batch - 1) / batch
	lat := make([]time.Duration, 0, batches)
	var off int64
	b.SetBytes(benchPayload)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < batches; i++ {
		if off+int64(len(buf)) > maxFile {
			f.Close()
			f, off = create(), 0
		}
		t0 := time.Now()
		if _, err := f.WriteAt(buf, off); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		off += int64(len(buf))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	rate := float64(batches*batch) / elapsed.Seconds()
	slices.Sort(lat)
	b.ReportMetric(rate, "entries/s")
	b.ReportMetric(percentile(lat, 0.50), "p50-µs")
	b.ReportMetric(percentile(lat, 0.99), "p99-µs")
	return rate
}
