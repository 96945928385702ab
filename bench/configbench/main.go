// Command configbench measures the control plane (issue 23's benchmark;
// results go to docs/perf.md, "Control plane (issue 23)"). It starts
// three regions r1, r2, r3 of real `strata node` processes on loopback
// (each: a meta node, three bookies writing ledgers E2/Qw2/Qa2, -brokers
// brokers; every broker in one Serf WAN pool; admin authorization off),
// waits until every broker sees every other in the WAN pool, makes
// tenant bench and namespace bench/ns through the admin API in r1, and
// then measures:
//
//  1. propagation: -n PATCHes of bench/ns's max_consumers (1, 2, …) at
//     r1's first broker, each followed by one goroutine per broker of r2
//     and r3 polling its GET /admin/v1/namespaces/bench/ns/policies every
//     -poll until the new value is there. A broker's latency is from
//     just before the PATCH is sent to the first answer holding it; a
//     region's is its slowest broker's (the policy in effect on every
//     broker there). GET policies reads the broker's cached State, which
//     the broker's policy view (what the JetStream layer enforces) is
//     rebuilt from in the same change callback, so visibility there is
//     when the policy takes effect on that broker. -origins r1,r2 also
//     runs it with the PATCH in r2, observed in r1 and r3.
//
//  2. admin API requests/s on r1's first broker: -clients goroutines, one
//     request at a time each on keep-alive connections, for -duration
//     each: GET policies of bench/ns; PATCH policies, each client its own
//     namespace; PATCH policies, every client the same namespace (CAS
//     conflicts retried in the broker). Also `wrk` for the GET if it is
//     installed.
//
//  3. many namespaces: `strata apply -f FILE` of the mesh's topology plus
//     a tenant of -namespaces namespaces (creates), again (no change),
//     and with one namespace edited, each followed by the time until
//     every broker of r2 and r3 has the result — skipped, with a message,
//     when the binary has no apply command. And the same workload
//     directly: -namespaces PUT /admin/v1/namespaces/{t}/{ns} at r1, one
//     client and -clients clients, then until r2 and r3 list them all.
//
// Usage:
//
//	go run ./bench/configbench -strata bin/strata [-n 200] [-duration 10s] [-clients 16] [-out FILE] [-keep]
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

type options struct {
	strata      string
	n           int
	duration    time.Duration
	clients     int
	namespaces  int
	brokers     int
	origins     []string
	poll        time.Duration
	propTimeout time.Duration
	bulkTimeout time.Duration
	skip        map[string]bool
	applyArgs   string
	keep        bool
	out         string
	logLevel    string
}

func main() {
	var o options
	origins := flag.String("origins", "r1", "regions to PATCH in for the propagation phase, comma-separated (r1, r2, r3)")
	skip := flag.String("skip", "", "phases to leave out, comma-separated: propagation, load, apply, direct")
	flag.StringVar(&o.strata, "strata", "bin/strata", "strata binary")
	flag.IntVar(&o.n, "n", 200, "PATCHes per origin in the propagation phase")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each admin API load")
	flag.IntVar(&o.clients, "clients", 16, "concurrent clients of the admin API loads and the concurrent PUTs")
	flag.IntVar(&o.namespaces, "namespaces", 1000, "namespaces in the apply file and the direct PUTs")
	flag.IntVar(&o.brokers, "brokers", 2, "brokers per region")
	flag.DurationVar(&o.poll, "poll", 2*time.Millisecond, "pause between a remote broker's GETs while waiting for a change")
	flag.DurationVar(&o.propTimeout, "prop-timeout", 30*time.Second, "how long one change may take to reach every remote broker")
	flag.DurationVar(&o.bulkTimeout, "bulk-timeout", 5*time.Minute, "how long an apply or the PUTs and their propagation may take")
	flag.StringVar(&o.applyArgs, "apply-args", "", "strata's arguments for an apply instead of `apply -f {file} [--url {url}]` ({file}, {url}: r1's first broker's admin URL, {dir}: the data directory)")
	flag.BoolVar(&o.keep, "keep", false, "keep the data directory and node logs")
	flag.StringVar(&o.out, "out", "", "also write the markdown tables (with the machine line) to this file")
	flag.StringVar(&o.logLevel, "log-level", "warn", "the nodes' log level")
	flag.Parse()
	o.skip = map[string]bool{}
	for _, s := range strings.Split(*skip, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.skip[s] = true
		}
	}
	for _, r := range strings.Split(*origins, ",") {
		if r = strings.TrimSpace(r); r != "" {
			o.origins = append(o.origins, r)
		}
	}
	err := check(o)
	if err == nil {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "configbench:", err)
		os.Exit(1)
	}
}

func check(o options) error {
	for _, r := range o.origins {
		if !slices.Contains(regionNames, r) {
			return fmt.Errorf("-origins: no region %q (the mesh has %s)", r, strings.Join(regionNames, ", "))
		}
	}
	if o.n < 1 || o.clients < 1 || o.namespaces < 1 || o.brokers < 1 {
		return fmt.Errorf("-n, -clients, -namespaces and -brokers must be at least 1")
	}
	return nil
}

func run(o options) error {
	began := time.Now()
	m, err := startMesh(o)
	if m != nil {
		defer m.stop()
	}
	if err != nil {
		return err
	}
	if err := m.waitWAN(90 * time.Second); err != nil {
		return err
	}
	header := fmt.Sprintf("# %s commit %s, %d cores (%s), load average %s; 3 regions × (meta + 3 bookies E2/Qw2/Qa2 + %d brokers) = %d processes, admin auth off",
		time.Now().UTC().Format(time.RFC3339), commit(), runtime.NumCPU(), cpuModel(), loadAvg(), o.brokers, 3*(4+o.brokers))
	fmt.Println(header)
	fmt.Printf("# mesh up and WAN pool complete after %v\n", time.Since(began).Round(time.Millisecond))

	// The tenant and namespaces, made through the admin API in r1.
	r1 := m.regions[0].brokers[0].report.Admin
	made := time.Now()
	if _, err := m.must(http.MethodPut, r1+"/admin/v1/tenants/bench", `{}`, http.StatusCreated); err != nil {
		return err
	}
	if _, err := m.must(http.MethodPut, r1+"/admin/v1/namespaces/bench/ns", `{}`, http.StatusCreated); err != nil {
		return err
	}
	vis, order := m.waitVisible("r1", made, time.Minute, 2*time.Millisecond, countIs("bench", 1))
	var notes []string
	notes = append(notes, fmt.Sprintf("first change after start (tenant + namespace PUT in r1) on every broker of %s", visText(vis, order)))
	fmt.Println("# " + notes[0])
	for w := 0; w < o.clients; w++ {
		if _, err := m.must(http.MethodPut, fmt.Sprintf("%s/admin/v1/namespaces/bench/c%02d", r1, w), `{}`, http.StatusCreated); err != nil {
			return err
		}
	}
	m.waitVisible("r1", time.Now(), time.Minute, 10*time.Millisecond, countIs("bench", 1+o.clients))

	var props []*propResult
	if !o.skip["propagation"] {
		for k, origin := range o.origins {
			res, err := m.propagation(o, origin, "bench/ns", k*1_000_000)
			if err != nil {
				return fmt.Errorf("propagation from %s: %w", origin, err)
			}
			res.print()
			props = append(props, res)
		}
	}

	var loads []*loadResult
	wrkNote := ""
	if !o.skip["load"] {
		get := r1 + "/admin/v1/namespaces/bench/ns/policies"
		var seq atomic.Int64
		for _, l := range []struct {
			name string
			req  func(w, i int) (string, string, string)
		}{
			{"GET policies", func(int, int) (string, string, string) { return http.MethodGet, get, "" }},
			{"PATCH policies, a namespace per client", func(w, i int) (string, string, string) {
				return http.MethodPatch, fmt.Sprintf("%s/admin/v1/namespaces/bench/c%02d/policies", r1, w), fmt.Sprintf(`{"max_consumers": %d}`, i+1)
			}},
			{"PATCH policies, one namespace for all", func(int, int) (string, string, string) {
				return http.MethodPatch, get, fmt.Sprintf(`{"max_consumers": %d}`, seq.Add(1))
			}},
		} {
			res := m.load(l.name, o.clients, o.duration, l.req)
			res.print()
			loads = append(loads, res)
		}
		if w := wrk(get, o.clients, o.duration); w != "" {
			wrkNote = fmt.Sprintf("wrk -t2 -c%d -d%v GET policies: %s req/s", o.clients, o.duration, w)
			fmt.Println("# " + wrkNote)
		} else {
			fmt.Println("# wrk is not installed: no wrk figure")
		}
	}

	var bulks []*bulkResult
	applyNote := ""
	if !o.skip["apply"] {
		res, cmd, err := m.apply(o)
		if err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		if res == nil {
			applyNote = "apply SKIPPED: " + cmd
			fmt.Println("# " + applyNote)
		} else {
			applyNote = "apply command: " + cmd
			for _, r := range res {
				r.print()
			}
			bulks = append(bulks, res...)
		}
	}
	if !o.skip["direct"] {
		for k, clients := range []int{1, o.clients} {
			res, err := m.direct(o, fmt.Sprintf("direct%d", k+1), clients)
			if err != nil {
				return fmt.Errorf("direct PUTs: %w", err)
			}
			res.print()
			bulks = append(bulks, res)
		}
	}
	if applyNote != "" {
		notes = append(notes, applyNote)
	}
	if wrkNote != "" {
		notes = append(notes, wrkNote)
	}
	table := markdown(o, props, loads, bulks)
	fmt.Print("\n" + table)
	for _, n := range notes {
		fmt.Println("# " + n)
	}
	if o.out != "" {
		var b strings.Builder
		b.WriteString(header + "\n")
		for _, n := range notes {
			b.WriteString("# " + n + "\n")
		}
		b.WriteString("\n" + table)
		if err := os.WriteFile(o.out, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("# total %v\n", time.Since(began).Round(time.Second))
	return nil
}

func visText(vis map[string]time.Duration, order []string) string {
	var parts []string
	for _, r := range order {
		if d, ok := vis[r]; ok {
			parts = append(parts, fmt.Sprintf("%s after %s ms", r, msf(d)))
		} else {
			parts = append(parts, r+": not within the limit")
		}
	}
	return strings.Join(parts, ", ")
}

// markdown is the results as three tables.
func markdown(o options, props []*propResult, loads []*loadResult, bulks []*bulkResult) string {
	var b strings.Builder
	if len(props) > 0 {
		b.WriteString("| PATCH in | observed in | changes | every broker of the region: p50 / p90 / p99 / max ms | its first broker: p50 / p99 ms | PATCH round trip p50 / p99 ms |\n")
		b.WriteString("|---|---|---|---|---|---|\n")
		for _, p := range props {
			var all []time.Duration
			for _, rg := range p.order {
				ds := p.regions[rg]
				all = append(all, ds...)
				fmt.Fprintf(&b, "| %s | %s | %d | %s / %s / %s / %s | %s / %s | %s / %s |\n", p.origin, rg, len(ds),
					msf(pct(ds, .5)), msf(pct(ds, .9)), msf(pct(ds, .99)), msf(pct(ds, 1)),
					msf(pct(p.firsts[rg], .5)), msf(pct(p.firsts[rg], .99)), msf(pct(p.patch, .5)), msf(pct(p.patch, .99)))
			}
			fmt.Fprintf(&b, "| %s | **both** | %d | **%s / %s / %s / %s** | | |\n", p.origin, len(all),
				msf(pct(all, .5)), msf(pct(all, .9)), msf(pct(all, .99)), msf(pct(all, 1)))
			if p.timeouts > 0 {
				fmt.Fprintf(&b, "| %s | (timed out) | %d | | | |\n", p.origin, p.timeouts)
			}
		}
		b.WriteString("\n")
	}
	if len(loads) > 0 {
		b.WriteString("| request (r1's first broker) | clients | req/s | latency p50 / p99 ms | errors | CPU cores: machine busy (r1 origin broker, r1 other brokers, r1 meta, r1 bookies, r2+r3 brokers, r2+r3 meta, r2+r3 bookies, this client) |\n")
		b.WriteString("|---|---|---|---|---|---|\n")
		for _, l := range loads {
			fmt.Fprintf(&b, "| %s | %d | **%.0f** | %s / %s | %d | %.2f (%s) |\n", l.name, o.clients, l.rate(), msf(pct(l.lat, .5)), msf(pct(l.lat, .99)), l.errs, l.cores, l.groups)
		}
		b.WriteString("\n")
	}
	if len(bulks) > 0 {
		b.WriteString("| operation | namespaces | time in r1 | namespaces/s | PUT p50 / p99 ms | on every broker of r2 / r3 (from the start) |\n")
		b.WriteString("|---|---|---|---|---|---|\n")
		for _, r := range bulks {
			lat := ""
			if len(r.lat) > 0 {
				lat = msf(pct(r.lat, .5)) + " / " + msf(pct(r.lat, .99))
			}
			var vis []string
			for _, rg := range r.order {
				if d, ok := r.visible[rg]; ok {
					vis = append(vis, fmt.Sprintf("%.2f s", d.Seconds()))
				} else {
					vis = append(vis, "–")
				}
			}
			if len(vis) == 0 {
				vis = []string{"(nothing to propagate)"}
			}
			fmt.Fprintf(&b, "| %s | %d | %.2f s | %.0f | %s | %s |\n", r.name, r.n, r.writes.Seconds(), float64(r.n)/r.writes.Seconds(), lat, strings.Join(vis, " / "))
		}
	}
	return b.String()
}
