package jetstream_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/broker/jetstream"
)

// BenchmarkDecommissionFailingRounds: "memory stays flat" (issue 26 item
// 6). r2 leaves the topic's replication list while every deletion of its
// cursor position fails (the decom-fail hook), and the policy rounds are
// kicked one after another so that b.N deletion rounds give up in a row
// (2 tries each, 1 ms apart). It reports the live heap (after GC) and the
// goroutines after b.N/10 rounds and after b.N, and the heap bytes grown
// per round between the two: a leak shows as growth that scales with the
// rounds. Run it with a fixed count, e.g.
//
//	go test -run '^$' -bench DecommissionFailingRounds -benchtime 2000x ./broker/jetstream/
func BenchmarkDecommissionFailingRounds(b *testing.B) {
	var pols [2]swapPolicies
	for i := range pols {
		pols[i].set(geoPolicies([]string{"r1", "r2"}, nil, nil))
	}
	var regions [2]atomic.Pointer[strataRegion]
	urls := func(i int) []string {
		r := regions[i].Load()
		if r == nil {
			return nil
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		var out []string
		for _, br := range r.brokers {
			if br.srv != nil && !br.stopped {
				out = append(out, br.url())
			}
		}
		return out
	}
	for self := range 2 {
		regions[self].Store(newStrataRegion(b, 1, func(c *jetstream.Config) {
			c.Policies = &pols[self]
			c.Region = fmt.Sprintf("r%d", self+1)
			c.RemoteBrokers = func(string) []string { return urls(1 - self) }
			c.Replicator.BackoffInitial, c.Replicator.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
			c.CursorDrop = jetstream.CursorDropConfig{Tries: 2, Backoff: time.Millisecond, BackoffMax: time.Millisecond, FailFirst: 1 << 62}
		}))
	}
	a := regions[0].Load().brokers[0].js
	nc, err := nats.Connect(regions[0].Load().brokers[0].url())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := natsjs.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 5 {
		if _, err := js.Publish(ctx, "demo.geo.t", fmt.Appendf(nil, "m%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	name := bqName("geo").String()
	waitFor := func(what string, within time.Duration, cond func() bool) {
		deadline := time.Now().Add(within)
		for !cond() {
			if time.Now().After(deadline) {
				pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
				drops, parked := a.CursorDrops()
				b.Fatalf("timed out waiting for %s (drops %+v, parked %+v, hook left %d)", what, drops, parked, a.DropHookLeft())
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	waitFor("r2 to have the 5 messages", 30*time.Second, func() bool {
		for _, rs := range a.Replication() {
			if rs.Topic == name && rs.Remote == "r2" && rs.Position == 5 {
				return true
			}
		}
		return false
	})
	pols[0].set(geoPolicies([]string{"r1"}, nil, nil))
	rounds := func() int {
		drops, _ := a.CursorDrops()
		if len(drops) != 1 {
			return 0
		}
		return drops[0].Rounds
	}
	// roundsTo kicks policy rounds until n deletion rounds gave up.
	roundsTo := func(n int) {
		// Generous: a round takes a few ms, more on a loaded machine.
		waitFor(fmt.Sprintf("%d failed rounds", n), 30*time.Second+time.Duration(n-rounds())*20*time.Millisecond, func() bool {
			if rounds() >= n {
				return true
			}
			a.PoliciesChanged()
			return false
		})
	}
	heap := func() (uint64, int) {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc, runtime.NumGoroutine()
	}
	roundsTo(1) // the first round, and everything it sets up once
	b.ResetTimer()
	start := rounds()
	tenth := max(b.N/10, 1)
	roundsTo(start + tenth)
	b.StopTimer()
	heapTenth, goTenth := heap()
	b.StartTimer()
	roundsTo(start + b.N)
	b.StopTimer()
	heapAll, goAll := heap()
	if got := rounds() - start; got < b.N {
		b.Fatalf("%d rounds, want %d", got, b.N)
	}
	b.ReportMetric(float64(heapTenth), "heap-B@N/10")
	b.ReportMetric(float64(heapAll), "heap-B@N")
	b.ReportMetric(float64(int64(heapAll)-int64(heapTenth))/float64(max(b.N-tenth, 1)), "heap-B/round")
	b.ReportMetric(float64(goTenth), "goroutines@N/10")
	b.ReportMetric(float64(goAll), "goroutines@N")
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/round")
}
