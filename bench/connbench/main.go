// Command connbench measures a NATS server's connect rate (issue 24's
// benchmark; `nats bench` has no connect mode). Each connect is a whole
// client login: dial, INFO, the TLS handshake when the URL's server
// requires it, CONNECT (with the user JWT and the nonce's signature when
// -creds is given), and a PING/PONG (nats.go's Connect waits for it),
// then a Flush (another PING/PONG) and Close.
//
// It runs -n connects one after another, then -n connects from -parallel
// goroutines at once (each goroutine doing its share one after another),
// and prints, per mode, one line
//
//	connbench MODE n=N parallel=P secs=S connects_per_sec=R p50_ms=A p99_ms=B failed=F
//
// (MODE seq or par; p50/p99 of one connect+flush+close). It exits 1 when
// a connect failed, after printing the first error.
//
//	go run ./bench/connbench -s nats://127.0.0.1:4222 [-creds FILE] [-tlsca FILE] [-n 1000] [-parallel 8]
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

func main() {
	url := flag.String("s", nats.DefaultURL, "server URL")
	creds := flag.String("creds", "", "user credentials (.creds) to log in with")
	tlsca := flag.String("tlsca", "", "CA (PEM) to verify the server's certificate with")
	n := flag.Int("n", 1000, "connects per mode")
	parallel := flag.Int("parallel", 8, "goroutines connecting at once in the parallel mode (0: skip it)")
	warm := flag.Int("warmup", 20, "connects before measuring (not counted)")
	timeout := flag.Duration("timeout", 10*time.Second, "per connect")
	flag.Parse()

	opts := []nats.Option{nats.Name("connbench"), nats.NoReconnect(), nats.Timeout(*timeout)}
	if *creds != "" {
		opts = append(opts, nats.UserCredentials(*creds))
	}
	if *tlsca != "" {
		opts = append(opts, nats.RootCAs(*tlsca))
	}
	b := &bench{url: *url, opts: opts}

	if err := b.run(*warm, 1, nil); err != nil {
		fmt.Fprintln(os.Stderr, "connbench: warm-up:", err)
		os.Exit(1)
	}
	failed := false
	modes := []struct {
		name string
		par  int
	}{{"seq", 1}, {"par", *parallel}}
	for _, m := range modes {
		if m.par < 1 {
			continue
		}
		lat := make([]time.Duration, 0, *n)
		var mu sync.Mutex
		record := func(d time.Duration) { mu.Lock(); lat = append(lat, d); mu.Unlock() }
		start := time.Now()
		err := b.run(*n, m.par, record)
		secs := time.Since(start).Seconds()
		fmt.Printf("connbench %s n=%d parallel=%d secs=%.3f connects_per_sec=%.1f p50_ms=%.3f p99_ms=%.3f failed=%d\n",
			m.name, *n, m.par, secs, float64(len(lat))/secs, pct(lat, 50), pct(lat, 99), *n-len(lat))
		if err != nil {
			fmt.Fprintf(os.Stderr, "connbench: %s: %v\n", m.name, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

type bench struct {
	url  string
	opts []nats.Option
}

// run does n connects from par goroutines, calling record (when not nil)
// with the duration of each that succeeded; it returns the first error.
func (b *bench) run(n, par int, record func(time.Duration)) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				t := time.Now()
				if err := b.one(); err != nil {
					once.Do(func() { first = err })
					continue
				}
				if record != nil {
					record(time.Since(t))
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// one connects, flushes and closes.
func (b *bench) one() error {
	nc, err := nats.Connect(b.url, b.opts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	return nc.Flush()
}

// pct is the p-th percentile of d in milliseconds (0 when d is empty).
func pct(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	i := (len(d)*p + 99) / 100
	if i > 0 {
		i--
	}
	return float64(d[i]) / float64(time.Millisecond)
}
