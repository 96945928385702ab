// Command replbench measures geo-replication lag and throughput (issue
// 8's benchmark; results go to docs/perf.md). It starts three regions of
// real `strata node` processes on loopback (each: a meta node, three
// bookies writing E2/Qw2/Qa2 with fsync, -brokers brokers; every broker
// in one Serf WAN pool), with namespace demo/geo replicated across all
// three, and waits until every broker sees every other in the WAN pool.
//
// Then, for each rate of -rates, on a topic of its own
// (demo.geo.lag<rate> → topic demo/geo/lag<rate>): a core NATS
// subscriber (plain nats.go Subscribe) in each of the two other regions,
// a warm-up that creates the topic in every region, and -duration of
// -size messages published with JetStream in the first region
// (PublishAsync), paced by a 1 ms ticker to the rate with up to
// -pending acks outstanding (so the publisher is not the brake), or, for
// "max", as fast as a window of -window outstanding acks allows. Each
// message carries its sequence and send time; a copy's lag is its
// receive time minus that send time (the publisher and the subscribers
// are this one process, one clock), so it includes the origin's
// durable store before the replicator reads it. The Strata-Origin-Time
// header (the origin broker's stamp) gives a second figure.
//
// After the publishing ends it reads the topic's replicator cursors
// (lag_msgs) from a first-region broker's admin API, waits until both
// regions received every acknowledged message (or -drain passes), and
// reads them again: they should be back to 0.
//
//	go run ./bench/replbench -strata bin/strata [-rates 1000,10000,max] [-duration 10s] [-size 1024] [-out FILE]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

type options struct {
	strata   string
	rates    []int // msgs/s; 0 is saturation ("max")
	duration time.Duration
	size     int
	brokers  int
	bookies  int
	ensemble int
	window   int
	pending  int
	drain    time.Duration
	keep     bool
	out      string
	logLevel string
}

func main() {
	var o options
	rates := flag.String("rates", "1000,10000,max", "publish rates in msgs/s, comma-separated; max = as fast as the ack window allows")
	flag.StringVar(&o.strata, "strata", "bin/strata", "strata binary")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "publishing time per rate")
	flag.IntVar(&o.size, "size", 1024, "message size in bytes (at least 16)")
	flag.IntVar(&o.brokers, "brokers", 2, "brokers per region")
	flag.IntVar(&o.bookies, "bookies", 3, "bookies per region")
	flag.IntVar(&o.ensemble, "ensemble", 2, "ledger ensemble = write quorum = ack quorum (at most -bookies)")
	flag.IntVar(&o.window, "window", 1000, "at max: most async publishes awaiting their PubAck")
	flag.IntVar(&o.pending, "pending", 20000, "at a paced rate: most async publishes awaiting their PubAck")
	flag.DurationVar(&o.drain, "drain", 2*time.Minute, "how long to wait after a phase for every acknowledged message to arrive")
	flag.BoolVar(&o.keep, "keep", false, "keep the data directory and node logs")
	flag.StringVar(&o.out, "out", "", "also write the markdown table (with the machine line) to this file")
	flag.StringVar(&o.logLevel, "log-level", "warn", "the nodes' log level")
	flag.Parse()
	var err error
	if o.rates, err = parseRates(*rates); err == nil {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "replbench:", err)
		os.Exit(1)
	}
}

func parseRates(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "max" {
			out = append(out, 0)
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSuffix(f, "k"), "K"))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-rates: %q is neither a positive number nor max", f)
		}
		if strings.HasSuffix(f, "k") || strings.HasSuffix(f, "K") {
			n *= 1000
		}
		out = append(out, n)
	}
	return out, nil
}

func rateName(r int) string {
	if r == 0 {
		return "max"
	}
	return strconv.Itoa(r)
}

func run(o options) error {
	if o.size < 16 {
		return fmt.Errorf("-size %d: at least 16 bytes (sequence and send time)", o.size)
	}
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
	header := fmt.Sprintf("# %s commit %s, %d cores (%s), load average %s; 3 regions × (meta + 3 bookies E2/Qw2/Qa2 + %d brokers) = %d processes; %d B messages, %v per rate, acks outstanding ≤ %d paced, ≤ %d at max",
		time.Now().UTC().Format(time.RFC3339), commit(), runtime.NumCPU(), cpuModel(), loadAvg(),
		o.brokers, 3*(4+o.brokers), o.size, o.duration, o.pending, o.window)
	fmt.Println(header)
	fmt.Printf("# mesh up and WAN pool complete after %v\n", time.Since(began).Round(time.Millisecond))
	idle0 := m.sampleCPU()
	time.Sleep(3 * time.Second)
	idle := m.cpuReport(idle0, m.sampleCPU())
	fmt.Printf("# before publishing: %s\n", idle.detail)
	var results []*phaseResult
	for _, rate := range o.rates {
		res, err := m.phase(o, rate)
		if err != nil {
			return fmt.Errorf("rate %s: %w", rateName(rate), err)
		}
		res.print(os.Stdout)
		results = append(results, res)
	}
	table := markdown(results)
	fmt.Print("\n" + table)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(header+"\n# before publishing: "+idle.detail+"\n\n"+table), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("# total %v\n", time.Since(began).Round(time.Second))
	return nil
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// markdown is the results as one table: a row per (rate, receiving
// region).
func markdown(rs []*phaseResult) string {
	var b strings.Builder
	b.WriteString("| rate | published msgs/s | PubAck p50 / p99 ms | region | delivered msgs/s | received / acked | lag p50 / p90 / p99 / max ms | Strata-Origin-Time lag p50 / p99 ms | after PubAck p50 / p99 ms | cursor lag_msgs end of publish → after drain | CPU cores: mesh / client / others / idle |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		for i, rg := range r.regions {
			lead := fmt.Sprintf("| %s | %.0f | %s / %s", r.name, r.pubRate, msf(r.ackP50), msf(r.ackP99))
			cpu := fmt.Sprintf("%.2f / %.2f / %.2f / %.2f", r.cpu.mesh, r.cpu.client, r.cpu.others, r.cpu.idle)
			if i > 0 {
				lead, cpu = "| | |", ""
			}
			fmt.Fprintf(&b, "%s | %s | %.0f | %d / %d | %s / %s / %s / %s | %s / %s | %s / %s | %d → %d | %s |\n",
				lead, rg.name, rg.rate, rg.received, r.acked,
				msf(rg.p50), msf(rg.p90), msf(rg.p99), msf(rg.max), msf(rg.originP50), msf(rg.originP99), msf(rg.commitP50), msf(rg.commitP99),
				r.cursorLagEnd[rg.name], r.cursorLagDrained[rg.name], cpu)
		}
	}
	return b.String()
}

// msf formats d in milliseconds with one decimal.
func msf(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
}
