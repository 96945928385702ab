package broker

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/testutil"
)

// slowFloodBytes is how much TestSlowConsumersBoundHeap publishes: 600 MiB,
// or STRATA_SLOWMEM_MIB MiB.
func slowFloodBytes(t *testing.T) int {
	mib := 600
	if v := os.Getenv("STRATA_SLOWMEM_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("STRATA_SLOWMEM_MIB=%q: want a positive number of MiB", v)
		}
		mib = n
	}
	return mib << 20
}

// heapInuse returns runtime.MemStats.HeapInuse, after a collection when gc
// is set.
func heapInuse(gc bool) uint64 {
	if gc {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// Five subscribers that never read and one publisher flooding 600 MiB: the
// broker's heap stays within its outbound budget (MaxOutboundTotal) plus
// 64 MiB of headroom above what it used idle — sampled during the flood
// without forcing collections (so garbage the collector has not reached yet
// counts) and after it — the slow subscribers are cut, the publisher gets
// through, and once it is over the cut connections' buffers are released.
func TestSlowConsumersBoundHeap(t *testing.T) {
	const slow = 5
	s := startBroker(t, nil)
	total := slowFloodBytes(t)
	bound := uint64(s.cfg.MaxOutboundTotal) + 64<<20

	idle := heapInuse(true)
	for i := 0; i < slow; i++ {
		testutil.StalledSubscriber(t, s.Addr(), "flood")
	}

	// Sample the heap while the flood runs.
	stopSampling := testutil.SamplePeak(10*time.Millisecond, func() (uint64, bool) { return heapInuse(false), true })

	pub := testutil.DialSmallWindow(t, s.Addr())
	payload := make([]byte, 16<<10)
	frame := append([]byte("PUB flood "+strconv.Itoa(len(payload))+"\r\n"), payload...)
	frame = append(frame, "\r\n"...)
	batch := []byte("CONNECT {\"verbose\":false}\r\n")
	for len(batch) < 1<<20 {
		batch = append(batch, frame...)
	}
	perBatch := (1 << 20) / len(frame)
	start := time.Now()
	sent := 0
	for sent < total {
		if _, err := pub.Write(batch); err != nil {
			t.Fatalf("publisher cut off after %d MiB: %v", sent>>20, err)
		}
		batch = batch[len(batch)-perBatch*len(frame):] // CONNECT only once
		sent += perBatch * len(frame)
	}
	if _, err := pub.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = pub.SetReadDeadline(time.Now().Add(60 * time.Second))
	pr := bufio.NewReader(pub)
	for {
		l, err := pr.ReadString('\n')
		if err != nil {
			t.Fatalf("publisher's PONG: %v", err)
		}
		if l == "PONG\r\n" {
			break
		}
	}
	peak := stopSampling()
	took := time.Since(start)
	testutil.Eventually(t, "slow subscribers cut", 30*time.Second, func() bool { return s.Stats().SlowConsumers == slow })
	after := heapInuse(true)
	t.Logf("flood %d MiB in %v; heap in use: idle %.1f MiB, peak %.1f MiB (+%.1f), after %.1f MiB; bound +%d MiB",
		sent>>20, took, mib(idle), mib(peak), mib(peak)-mib(idle), mib(after), bound>>20)
	if p := peak; p > idle+bound {
		t.Errorf("heap peaked at %.1f MiB above idle, bound %d MiB", mib(p)-mib(idle), bound>>20)
	}
	// The cut connections' buffers do not stay referenced: the heap comes
	// back to within the idle pool's floor of where it started.
	floor := uint64(idleChunkFloor(s.cfg.MaxOutboundTotal)) + 16<<20
	testutil.Eventually(t, "heap back near idle", 30*time.Second, func() bool { return heapInuse(true) < idle+floor })
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
