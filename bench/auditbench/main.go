// Command auditbench measures `strata audit` on one replicated topic of
// n small messages (bench/audit.sh; docs/perf.md "Audit"): it runs
// `strata up` with a two-region topology, publishes n messages in the
// first region, waits until the second holds them all, and runs the
// audit -runs times, printing each run's wall time and the bytes it
// received (its --json "seconds" and "bytes_moved").
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/meshfile"
)

func main() {
	bin := flag.String("strata", "bin/strata", "the strata binary")
	topo := flag.String("topology", "bench/audit-topology.yaml", "two regions replicating demo/geo")
	n := flag.Int("n", 1000000, "messages in the topic")
	size := flag.Int("size", 16, "payload bytes")
	runs := flag.Int("runs", 3, "audits to time")
	flag.Parse()
	dir, err := os.MkdirTemp("", "auditbench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	up := exec.Command(*bin, "up", "-f", *topo, "--data-dir", dir)
	up.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	up.Stdout, up.Stderr = os.Stderr, os.Stderr
	if err := up.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() {
		_ = up.Process.Signal(syscall.SIGTERM)
		_ = up.Wait()
	}()
	var first string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if f, err := meshfile.Read(dir); err == nil && len(f.Regions) > 0 {
			if urls, err := f.NATSURLs(f.Regions[0].Name); err == nil && len(urls) > 0 {
				first = strings.Join(urls, ",")
				break
			}
		}
		if time.Now().After(deadline) {
			log.Fatal("the mesh did not come up")
		}
		time.Sleep(500 * time.Millisecond)
	}
	nc, err := nats.Connect(first, nats.MaxReconnects(-1))
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	for { // the mesh takes publishes once its bookies registered
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := js.Publish(ctx, "demo.geo.audit", make([]byte, *size))
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			log.Fatalf("publish: %v", err)
		}
		time.Sleep(time.Second)
	}
	start := time.Now()
	payload := make([]byte, *size)
	for i := 1; i < *n; i++ {
		if _, err := js.PublishAsync("demo.geo.audit", payload); err != nil {
			log.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
	fmt.Printf("published %d messages of %d bytes in %.1fs\n", *n, *size, time.Since(start).Seconds())
	type report struct {
		Exit     int `json:"exit"`
		Compared []struct {
			Window struct{ To uint64 } `json:"window"`
		} `json:"compared"`
		Scanned  uint64  `json:"scanned"`
		Requests int     `json:"requests"`
		Bytes    int64   `json:"bytes_moved"`
		Seconds  float64 `json:"seconds"`
	}
	audit := func() report {
		out, err := exec.Command(*bin, "audit", "--data-dir", dir, "--topic", "demo/geo/audit", "--watch", "0", "--json", "--timeout", "5m").Output()
		var r report
		if jerr := json.Unmarshal(out, &r); jerr != nil {
			log.Fatalf("audit: %v %v\n%s", err, jerr, out)
		}
		return r
	}
	start = time.Now()
	for {
		r := audit()
		if len(r.Compared) == 1 && r.Compared[0].Window.To == uint64(*n) {
			break
		}
		if time.Since(start) > 20*time.Minute {
			log.Fatal("west did not catch up")
		}
		time.Sleep(2 * time.Second)
	}
	fmt.Printf("replicated to the second region in %.1fs\n", time.Since(start).Seconds())
	for i := 0; i < *runs; i++ {
		r := audit()
		fmt.Printf("audit run %d: exit %d, %.2fs, %d messages read at the owners, %d requests, %d bytes received\n", i+1, r.Exit, r.Seconds, r.Scanned, r.Requests, r.Bytes)
	}
}
