package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// propResult is one origin's propagation phase: per remote broker and
// per remote region (the region's latency of a change is its slowest
// broker's: when the policy is in effect on every broker there).
type propResult struct {
	origin   string
	n        int
	patch    []time.Duration // the PATCH's own round trip in the origin
	brokers  map[string][]time.Duration
	regions  map[string][]time.Duration // slowest broker of the region
	firsts   map[string][]time.Duration // fastest broker of the region
	order    []string                   // remote regions
	border   []string                   // remote brokers
	timeouts int
}

// propagation PATCHes max_consumers of ns (tenant/ns) in origin's first
// broker -n times; after each, one goroutine per remote broker polls its
// GET policies every -poll until the new value is there. A change's
// latency at a broker is from just before the PATCH is sent to the
// first GET answer that holds it.
func (m *mesh) propagation(o options, origin, ns string, base int) (*propResult, error) {
	orig := m.byName[origin].brokers[0].report.Admin
	remotes := m.remoteBrokers(origin)
	res := &propResult{origin: origin, n: o.n, brokers: map[string][]time.Duration{},
		regions: map[string][]time.Duration{}, firsts: map[string][]time.Duration{}}
	for _, t := range remotes {
		res.border = append(res.border, t.name())
		if len(res.order) == 0 || res.order[len(res.order)-1] != t.region {
			res.order = append(res.order, t.region)
		}
	}
	poll := newClient(4)
	url := "/admin/v1/namespaces/" + ns + "/policies"
	for i := 1; i <= o.n; i++ {
		want := base + i
		start := time.Now()
		if _, err := m.must(http.MethodPatch, orig+url, fmt.Sprintf(`{"max_consumers": %d}`, want), http.StatusOK); err != nil {
			return nil, err
		}
		res.patch = append(res.patch, time.Since(start))
		seen := make([]time.Duration, len(remotes))
		var wg sync.WaitGroup
		for j, t := range remotes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				seen[j] = -1
				deadline := start.Add(o.propTimeout)
				for time.Now().Before(deadline) {
					code, b, err := call(poll, http.MethodGet, t.admin+url, "")
					if err == nil && code == http.StatusOK {
						var p struct {
							MaxConsumers int `json:"max_consumers"`
						}
						if json.Unmarshal(b, &p) == nil && p.MaxConsumers >= want {
							seen[j] = time.Since(start)
							return
						}
					}
					time.Sleep(o.poll)
				}
			}()
		}
		wg.Wait()
		slow, fast := map[string]time.Duration{}, map[string]time.Duration{}
		timedOut := false
		for j, t := range remotes {
			d := seen[j]
			if d < 0 {
				timedOut = true
				continue
			}
			res.brokers[t.name()] = append(res.brokers[t.name()], d)
			if d > slow[t.region] {
				slow[t.region] = d
			}
			if f, ok := fast[t.region]; !ok || d < f {
				fast[t.region] = d
			}
		}
		if timedOut {
			res.timeouts++
			continue
		}
		for r, d := range slow {
			res.regions[r] = append(res.regions[r], d)
			res.firsts[r] = append(res.firsts[r], fast[r])
		}
		// A short random pause, so that changes do not fall in step
		// with the 3 s anti-entropy round or any other period.
		time.Sleep(time.Duration(rand.Int64N(int64(10 * time.Millisecond))))
	}
	return res, nil
}

func (r *propResult) print() {
	fmt.Printf("# propagation from %s: %d PATCHes (max_consumers), timeouts %d; PATCH round trip %s\n", r.origin, r.n, r.timeouts, pcts(r.patch))
	for _, b := range r.border {
		fmt.Printf("#   broker %-6s %s\n", b, pcts(r.brokers[b]))
	}
	var all []time.Duration
	for _, rg := range r.order {
		fmt.Printf("#   region %-6s every broker %s; first broker %s\n", rg, pcts(r.regions[rg]), pcts(r.firsts[rg]))
		all = append(all, r.regions[rg]...)
	}
	fmt.Printf("#   overall (both regions, every broker) %s\n", pcts(all))
}
