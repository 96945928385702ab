// Command quotasim measures the mesh-wide quota core (tenancy/quota) in
// its simulation (tenancy/quota/quotasim): three regions (by default) of
// brokers with a tenant limited to -limit msgs/s, publishers offering
// twice the limit. It prints one table row per measure:
//
//   - accuracy: admitted ÷ limit over 30 s of simulated time, from a cold
//     start and after 5 s, at skews 33/33/33, 80/10/10 and 100/0/0, and
//     the worst region's admitted ÷ its demand-weighted share;
//   - convergence: after a demand shift, the time until every region's
//     admitted rate over the last second is within 10% of its new share;
//   - partition: one region cut off for 20 s and rejoined: the most the
//     mesh admits in any 1 s window ÷ the limit, before, during and after.
//
// Each figure is the mean over -seeds seeded runs (link jitter and phases
// differ), with the range; every run also checks the bound (admitted ≤
// limit × (1+ε) over every 1 s window, ε = quota.Epsilon) and the
// program exits 1 if one fails. Deterministic: the same flags print the
// same table.
//
//	go run ./bench/quotasim [-limit 1000] [-brokers 2] [-regions 3] [-wan 40ms] [-jitter 10ms] [-seeds 5]
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/stratamesh/strata/tenancy/quota"
	"github.com/stratamesh/strata/tenancy/quota/quotasim"
)

var (
	limit   = flag.Float64("limit", 1000, "the tenant's publish_rate, msgs/s")
	brokers = flag.Int("brokers", 2, "brokers per region")
	regions = flag.Int("regions", 3, "regions")
	wan     = flag.Duration("wan", 40*time.Millisecond, "one-way latency between regions")
	jitter  = flag.Duration("jitter", 10*time.Millisecond, "jitter added to each message, uniform in [0, jitter)")
	seeds   = flag.Int("seeds", 5, "seeded runs per figure")
)

var violations int

func main() {
	flag.Parse()
	if *regions < 2 || *brokers < 1 || *limit <= 0 || *seeds < 1 {
		fmt.Fprintln(os.Stderr, "quotasim: want -regions ≥ 2, -brokers ≥ 1, -limit > 0, -seeds ≥ 1")
		os.Exit(2)
	}
	fmt.Printf("quotasim: %d regions × %d brokers, limit %.0f msgs/s, offered 2× the limit, WAN %v + jitter < %v, %d seeds, ε %.3f\n\n",
		*regions, *brokers, *limit, *wan, *jitter, *seeds, quota.Epsilon(*limit, *regions**brokers, 1, 0))
	fmt.Println("| measure | skew | figure (mean) | range |")
	fmt.Println("|---|---|---|---|")
	skews := []struct {
		name string
		w    []float64
	}{{"33/33/33", even()}, {"80/10/10", heavy(0.8)}, {"100/0/0", heavy(1)}}
	for _, sk := range skews {
		var cold, warm, worst []float64
		for seed := range *seeds {
			s := mesh(int64(seed))
			offer(s, sk.w)
			s.Run(35 * time.Second)
			check(s, 0, s.Now())
			cold = append(cold, s.Rate("", 0, 30*time.Second) / *limit)
			warm = append(warm, s.Rate("", 5*time.Second, 35*time.Second) / *limit)
			worst = append(worst, worstShare(s, sk.w, 5*time.Second, 35*time.Second))
		}
		row("accuracy, 0–30 s (admitted ÷ limit)", sk.name, cold, "%.3f")
		row("accuracy, 5–35 s (admitted ÷ limit)", sk.name, warm, "%.3f")
		row("worst region, 5–35 s (admitted ÷ its share)", sk.name, worst, "%.3f")
	}
	for _, sh := range []struct {
		name     string
		from, to []float64
	}{{"80/10/10 → 10/10/80", heavy(0.8), reversed(heavy(0.8))}, {"33/33/33 → 100/0/0", even(), heavy(1)}, {"100/0/0 → 0/0/100", heavy(1), reversed(heavy(1))}} {
		var conv []float64
		for seed := range *seeds {
			s := mesh(int64(seed))
			offer(s, sh.from)
			s.Run(10 * time.Second)
			offer(s, sh.to)
			conv = append(conv, converge(s, sh.to, 0.10).Seconds())
			s.Run(5 * time.Second)
			check(s, 0, s.Now())
		}
		row("convergence to within 10% of the shares (s)", sh.name, conv, "%.2f")
	}
	for _, sk := range skews[:2] {
		cut := fmt.Sprintf("region %d", *regions)
		var before, during, after, cutOff []float64
		for seed := range *seeds {
			s := mesh(int64(seed))
			offer(s, reversed(sk.w)) // the cut-off region is the busy one
			s.Run(10 * time.Second)
			last := s.Regions()[*regions-1]
			s.Isolate(last)
			s.Run(20 * time.Second)
			s.Rejoin(last)
			s.Run(10 * time.Second)
			check(s, 0, s.Now())
			before = append(before, maxRatio(s, 5*time.Second, 10*time.Second))
			during = append(during, maxRatio(s, 10*time.Second, 30*time.Second))
			after = append(after, maxRatio(s, 30*time.Second, 40*time.Second))
			n, _ := s.MaxWindow(last, time.Second, 15*time.Second, 30*time.Second)
			cutOff = append(cutOff, float64(n)/(*limit/float64(*regions)))
		}
		name := reversedName(sk.name)
		row("partition: most in any 1 s window ÷ limit, before", name, before, "%.3f")
		row("partition: most in any 1 s window ÷ limit, "+cut+" cut off 20 s", name, during, "%.3f")
		row("partition: most in any 1 s window ÷ limit, after it rejoins", name, after, "%.3f")
		row("partition: the cut-off region, 5–20 s into the cut (÷ its static share)", name, cutOff, "%.3f")
	}
	if violations > 0 {
		fmt.Fprintf(os.Stderr, "quotasim: the bound failed %d times\n", violations)
		os.Exit(1)
	}
}

func mesh(seed int64) *quotasim.Sim {
	var l quota.Limits
	l.Mesh[quota.PublishRate] = *limit
	names := make([]string, *regions)
	for i := range names {
		names[i] = fmt.Sprintf("r%d", i+1)
	}
	s, err := quotasim.New(quotasim.Config{Regions: names, Brokers: *brokers, Limits: l, WAN: *wan, Jitter: *jitter, Seed: seed})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return s
}

// even, heavy(f) and reversed are demand weights over the regions: all
// alike; f on the first and the rest shared by the others; back to front.
func even() []float64 {
	w := make([]float64, *regions)
	for i := range w {
		w[i] = 1 / float64(*regions)
	}
	return w
}

func heavy(f float64) []float64 {
	w := make([]float64, *regions)
	w[0] = f
	for i := 1; i < len(w); i++ {
		w[i] = (1 - f) / float64(*regions-1)
	}
	return w
}

func reversed(w []float64) []float64 {
	out := make([]float64, len(w))
	for i, v := range w {
		out[len(w)-1-i] = v
	}
	return out
}

func reversedName(s string) string {
	p := strings.Split(s, "/")
	for i, j := 0, len(p)-1; i < j; i, j = i+1, j-1 {
		p[i], p[j] = p[j], p[i]
	}
	return strings.Join(p, "/")
}

func offer(s *quotasim.Sim, w []float64) {
	for i, r := range s.Regions() {
		if err := s.Offer(r, 2**limit*w[i]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
}

// shares are the demand-weighted shares of the limit for weights w
// (Split with no floor; nobody more than it offers).
func shares(w []float64) []float64 {
	n := len(w)
	static := make([]float64, n)
	demand := make([]float64, n)
	for i := range w {
		static[i] = *limit / float64(n)
		demand[i] = 2 * *limit * w[i]
	}
	out := quota.Split(*limit, static, demand, nil, 0)
	for i := range out {
		out[i] = math.Min(out[i], demand[i])
	}
	return out
}

// worstShare is the lowest admitted ÷ share over [from, to) among the
// regions with a share.
func worstShare(s *quotasim.Sim, w []float64, from, to time.Duration) float64 {
	worst := math.Inf(1)
	for i, sh := range shares(w) {
		if sh > 0 {
			worst = math.Min(worst, s.Rate(s.Regions()[i], from, to)/sh)
		}
	}
	return worst
}

// converge runs s in 50 ms steps until every region's rate over the last
// second is within tol of its share for weights w, and returns the time
// from now to the start of that second (60 s at most).
func converge(s *quotasim.Sim, w []float64, tol float64) time.Duration {
	start := s.Now()
	sh := shares(w)
	for s.Now()-start < 60*time.Second {
		s.Run(50 * time.Millisecond)
		if s.Now()-start < time.Second {
			continue
		}
		ok := true
		for i, r := range s.Regions() {
			if math.Abs(s.Rate(r, s.Now()-time.Second, s.Now())-sh[i]) > tol*math.Max(sh[i], *limit/100) {
				ok = false
			}
		}
		if ok {
			return s.Now() - start - time.Second
		}
	}
	return 60 * time.Second
}

func maxRatio(s *quotasim.Sim, from, to time.Duration) float64 {
	n, _ := s.MaxWindow("", time.Second, from, to)
	return float64(n) / *limit
}

// check counts a run whose mesh admitted more than the bound in a 1 s
// window of [from, to).
func check(s *quotasim.Sim, from, to time.Duration) {
	if n, at := s.MaxWindow("", time.Second, from, to); float64(n) > *limit*(1+s.Epsilon()) {
		violations++
		fmt.Fprintf(os.Stderr, "quotasim: %d admitted in the 1 s window from %v, over %.0f × (1+%.3f)\n", n, at, *limit, s.Epsilon())
	}
}

func row(measure, skew string, v []float64, f string) {
	lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
	for _, x := range v {
		lo, hi, sum = math.Min(lo, x), math.Max(hi, x), sum+x
	}
	fmt.Printf("| %s | %s | "+f+" | "+f+"–"+f+" |\n", measure, skew, sum/float64(len(v)), lo, hi)
}
