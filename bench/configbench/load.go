package main

import (
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"
)

// loadResult is one admin-API load: -clients goroutines, each one
// request at a time on a keep-alive connection, for -duration.
type loadResult struct {
	name     string
	ok, errs int
	elapsed  time.Duration
	lat      []time.Duration
	cores    float64 // machine busy cores during it
	groups   string  // cores per process group
	firstErr string
}

func (r *loadResult) rate() float64 { return float64(r.ok) / r.elapsed.Seconds() }

// load runs req(client, worker, i) from clients goroutines for d; req
// returns the request's method, URL and body.
func (m *mesh) load(name string, clients int, d time.Duration, req func(w, i int) (string, string, string)) *loadResult {
	c := newClient(clients)
	res := &loadResult{name: name}
	var mu sync.Mutex
	var wg sync.WaitGroup
	cpu := startBusy()
	g0 := m.sampleGroups()
	start := time.Now()
	end := start.Add(d)
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			ok, errs, first := 0, 0, ""
			for i := 0; time.Now().Before(end); i++ {
				method, url, body := req(w, i)
				t0 := time.Now()
				code, b, err := call(c, method, url, body)
				if err == nil && code == http.StatusOK {
					ok++
					lat = append(lat, time.Since(t0))
					continue
				}
				errs++
				if first == "" {
					if err != nil {
						first = err.Error()
					} else {
						first = fmt.Sprintf("%d %s", code, strings.Join(strings.Fields(string(b)), " "))
					}
				}
			}
			mu.Lock()
			res.ok += ok
			res.errs += errs
			res.lat = append(res.lat, lat...)
			if res.firstErr == "" {
				res.firstErr = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.cores = cpu.cores(runtime.NumCPU())
	res.groups = groupCores(g0, m.sampleGroups(), res.elapsed)
	c.CloseIdleConnections()
	return res
}

func (r *loadResult) print() {
	fmt.Printf("# %s: %.0f req/s (%d ok, %d errors in %v), latency %s; machine busy %.2f cores (%s)\n",
		r.name, r.rate(), r.ok, r.errs, r.elapsed.Round(time.Millisecond), pcts(r.lat), r.cores, r.groups)
	if r.firstErr != "" {
		fmt.Printf("#   first error: %s\n", r.firstErr)
	}
}

var wrkRate = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

// wrk runs `wrk -t2 -c<clients> -d<d> --latency url` when wrk is
// installed; it returns its output's req/s line ("" when not run).
func wrk(url string, clients int, d time.Duration) string {
	path, err := exec.LookPath("wrk")
	if err != nil {
		return ""
	}
	out, err := exec.Command(path, "-t2", fmt.Sprintf("-c%d", clients), fmt.Sprintf("-d%ds", int(d.Seconds())), "--latency", url).CombinedOutput()
	if err != nil {
		return "wrk failed: " + err.Error()
	}
	if m := wrkRate.FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return "wrk: no Requests/sec in its output"
}
