package quota_test

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/stratamesh/strata/tenancy/quota"
	"github.com/stratamesh/strata/tenancy/quota/quotasim"
)

// TestScripts runs the scripts in testdata/ against a simulated mesh
// (quotasim): the allowance core's scenarios, as etcd-io/raft's
// interaction tests do. Rewrite the expected output with -rewrite; the
// checks (bound, within, conns, …) fail the test on their own whatever
// the expected output says. Commands:
//
//	mesh regions=(a,b,c) [brokers=N] [rate=N] [conns=N] [cap=(r:N,…)]
//	     [skew=(r:D,…)] [wan=D] [jitter=D] [seed=N]
//	                          start a mesh (D a Go duration; rate and conns
//	                          the tenant's publish_rate and connections)
//	offer r=N …               region r's publishers offer N msgs/s
//	connect r=N … hold=D      region r's clients try N connections/s, each
//	                          lasting D
//	run D                     the mesh's time passes
//	isolate r / rejoin r      cut region r off from the others / heal it
//	cut a b / heal a b        cut or heal the links between regions or
//	                          nodes ("r/r-0", "r/coord")
//	loss a b p                drop messages between a and b with probability p
//	failover r                a new coordinator (the next term) in r
//	stop r term=N             stop r's coordinator of term N
//	rates from=D [to=D]       each region's admitted msgs/s, and the mesh's
//	                          (times: since the start; -D: D before now)
//	bound [from=D] [to=D] [regions=(r,…)] [max=N]
//	                          check: the most admitted in any 1 s window is
//	                          ≤ max × (1+ε) (max: the limit; ε for the
//	                          brokers of those regions)
//	within pct=N from=D [to=D]
//	                          check: each region's admitted rate is within
//	                          N% of its demand-weighted share (or above it)
//	converge pct=N [max=D]    run until, over the last second, each
//	                          region's rate is within N% of its share;
//	                          check: before max
//	lends dest=r from=D [to=D] [quiet=D]
//	                          the leases the other regions' coordinators
//	                          sent to r's, in 250 ms slots; check: none in
//	                          the first quiet
//	allowance                 each broker's allowance now
//	conns [from=D] [to=D]     the most connections held, per region and
//	                          mesh-wide; check: mesh-wide ≤ the limit
func TestScripts(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts in testdata/: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			var h *harness
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				if d.Cmd != "mesh" && h == nil {
					d.Fatalf(t, "%s before mesh", d.Cmd)
				}
				if d.Cmd == "mesh" {
					h = newHarness(t, d)
					return ""
				}
				return h.run(t, d)
			})
		})
	}
}

type harness struct {
	s      *quotasim.Sim
	limits quota.Limits
	offers map[string]float64
	marks  map[string]time.Duration
}

func dur(t *testing.T, d *datadriven.TestData, s string) time.Duration {
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "%q: want a duration: %v", s, err)
	}
	return v
}

func num(t *testing.T, d *datadriven.TestData, s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		d.Fatalf(t, "%q: want a number: %v", s, err)
	}
	return v
}

// pairs parses (r:V,…).
func pairs(t *testing.T, d *datadriven.TestData, key string) map[string]string {
	out := map[string]string{}
	a, ok := d.Arg(key)
	if !ok {
		return out
	}
	for _, v := range a.Vals {
		r, x, ok := strings.Cut(v, ":")
		if !ok {
			d.Fatalf(t, "%s: %q: want region:value", key, v)
		}
		out[r] = x
	}
	return out
}

func newHarness(t *testing.T, d *datadriven.TestData) *harness {
	cfg := quotasim.Config{Brokers: 1}
	var h harness
	for _, a := range d.CmdArgs {
		switch a.Key {
		case "regions":
			cfg.Regions = a.Vals
		case "brokers":
			cfg.Brokers = int(num(t, d, a.SingleVal(t)))
		case "rate":
			h.limits.Mesh[quota.PublishRate] = num(t, d, a.SingleVal(t))
		case "conns":
			h.limits.Mesh[quota.Connections] = num(t, d, a.SingleVal(t))
		case "wan":
			cfg.WAN = dur(t, d, a.SingleVal(t))
		case "jitter":
			cfg.Jitter = dur(t, d, a.SingleVal(t))
		case "seed":
			cfg.Seed = int64(num(t, d, a.SingleVal(t)))
		case "cap", "skew":
		default:
			d.Fatalf(t, "mesh: unknown argument %q", a.Key)
		}
	}
	for r, v := range pairs(t, d, "cap") {
		if h.limits.Regions == nil {
			h.limits.Regions = map[string][quota.NumKinds]float64{}
		}
		c := h.limits.Regions[r]
		c[quota.PublishRate] = num(t, d, v)
		h.limits.Regions[r] = c
	}
	if sk := pairs(t, d, "skew"); len(sk) > 0 {
		cfg.Skew = map[string]time.Duration{}
		for r, v := range sk {
			cfg.Skew[r] = dur(t, d, v)
		}
	}
	cfg.Limits = h.limits
	s, err := quotasim.New(cfg)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	h.s, h.offers, h.marks = s, map[string]float64{}, map[string]time.Duration{}
	return &h
}

// span is the command's [from, to), to defaulting to now; -D is D
// before now.
func (h *harness) span(t *testing.T, d *datadriven.TestData) (time.Duration, time.Duration) {
	// A negative time is before now.
	at := func(s string) time.Duration {
		v := dur(t, d, s)
		if v < 0 {
			v += h.s.Now()
		}
		return v
	}
	from, to := time.Duration(0), h.s.Now()
	if a, ok := d.Arg("from"); ok {
		from = at(a.SingleVal(t))
	}
	if a, ok := d.Arg("to"); ok {
		to = at(a.SingleVal(t))
	}
	if to <= from || to > h.s.Now() {
		d.Fatalf(t, "bad span [%v, %v) at %v", from, to, h.s.Now())
	}
	return from, to
}

// shares are the regions' demand-weighted shares of the rate limit for
// the current offers: Split with no floor.
func (h *harness) shares() map[string]float64 {
	regs := h.s.Regions()
	n := len(regs)
	static := make([]float64, n)
	demand := make([]float64, n)
	caps := make([]float64, n)
	limit := h.limits.Mesh[quota.PublishRate]
	for i, r := range regs {
		static[i] = limit / float64(n)
		if c := h.limits.Regions[r][quota.PublishRate]; c > 0 {
			caps[i] = c
			static[i] = math.Min(static[i], c)
		}
		demand[i] = h.offers[r]
	}
	out := map[string]float64{}
	for i, v := range quota.Split(limit, static, demand, caps, 0) {
		// Nobody is admitted more than it offers.
		out[regs[i]] = math.Min(v, demand[i])
	}
	return out
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	s := h.s
	var out strings.Builder
	pos := func(i int) string {
		if i >= len(d.CmdArgs) {
			d.Fatalf(t, "%s: want %d arguments", d.Cmd, i+1)
		}
		return d.CmdArgs[i].Key
	}
	limit := h.limits.Mesh[quota.PublishRate]
	switch d.Cmd {
	case "offer":
		for _, a := range d.CmdArgs {
			v := num(t, d, a.SingleVal(t))
			if err := s.Offer(a.Key, v); err != nil {
				d.Fatalf(t, "%v", err)
			}
			h.offers[a.Key] = v
		}
	case "connect":
		a, ok := d.Arg("hold")
		if !ok {
			d.Fatalf(t, "connect: no hold")
		}
		hold := dur(t, d, a.SingleVal(t))
		for _, a := range d.CmdArgs {
			if a.Key == "hold" {
				continue
			}
			if err := s.Connect(a.Key, num(t, d, a.SingleVal(t)), hold); err != nil {
				d.Fatalf(t, "%v", err)
			}
		}
	case "run":
		s.Run(dur(t, d, pos(0)))
		fmt.Fprintf(&out, "t=%v\n", s.Now())
	case "isolate":
		s.Isolate(pos(0))
	case "rejoin":
		s.Rejoin(pos(0))
	case "cut":
		s.Cut(pos(0), pos(1))
	case "heal":
		s.Heal(pos(0), pos(1))
	case "loss":
		s.SetLoss(pos(0), pos(1), num(t, d, pos(2)))
	case "failover":
		c, err := s.Failover(pos(0))
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		fmt.Fprintf(&out, "%s: coordinator term %d\n", pos(0), c.Term)
	case "stop":
		var term uint64
		d.ScanArgs(t, "term", &term)
		if err := s.Stop(pos(0), term); err != nil {
			d.Fatalf(t, "%v", err)
		}
	case "rates":
		from, to := h.span(t, d)
		for _, r := range s.Regions() {
			fmt.Fprintf(&out, "%s %.0f/s  ", r, s.Rate(r, from, to))
		}
		all := s.Rate("", from, to)
		fmt.Fprintf(&out, "mesh %.0f/s (%.2f × limit)\n", all, all/limit)
	case "bound":
		from, to := h.span(t, d)
		regs := s.Regions()
		if a, ok := d.Arg("regions"); ok {
			regs = a.Vals
		}
		max := limit
		if a, ok := d.Arg("max"); ok {
			max = num(t, d, a.SingleVal(t))
		}
		brokers := len(regs) * s.Config().Brokers
		eps := quota.Epsilon(max, brokers, 1, s.Config().Depth)
		best, at := s.MaxWindowIn(regs, time.Second, from, to)
		verdict := "ok"
		if float64(best) > max*(1+eps) {
			verdict = "VIOLATED"
			t.Errorf("%s: %s admitted %d in the 1 s window from %v: over %.0f × (1+%.3f)", d.Pos, strings.Join(regs, "+"), best, at, max, eps)
		}
		fmt.Fprintf(&out, "%s: most in any 1 s window %d ≤ %.0f × (1+%.3f) = %.0f: %s\n",
			strings.Join(regs, "+"), best, max, eps, max*(1+eps), verdict)
	case "within":
		var pct float64
		d.ScanArgs(t, "pct", &pct)
		from, to := h.span(t, d)
		sh := h.shares()
		for _, r := range s.Regions() {
			got := s.Rate(r, from, to)
			verdict := "ok"
			if got < sh[r]*(1-pct/100) {
				verdict = "LOW"
				t.Errorf("%s: %s admitted %.0f/s, below %.0f%% of its share %.0f/s", d.Pos, r, got, pct, sh[r])
			}
			fmt.Fprintf(&out, "%s %.0f/s of share %.0f/s: %s\n", r, got, sh[r], verdict)
		}
	case "converge":
		var pct float64
		d.ScanArgs(t, "pct", &pct)
		maxWait := 30 * time.Second
		if a, ok := d.Arg("max"); ok {
			maxWait = dur(t, d, a.SingleVal(t))
		}
		start := s.Now()
		sh := h.shares()
		for {
			s.Run(250 * time.Millisecond)
			ok := s.Now()-start >= time.Second
			for _, r := range s.Regions() {
				got := s.Rate(r, s.Now()-time.Second, s.Now())
				if math.Abs(got-sh[r]) > sh[r]*pct/100 {
					ok = false
				}
			}
			if ok {
				// The first second in which every region is within pct
				// ended now: it converged when that second began.
				fmt.Fprintf(&out, "within %.0f%% of the shares after %v\n", pct, s.Now()-start-time.Second)
				break
			}
			if s.Now()-start > maxWait {
				t.Errorf("%s: not within %.0f%% of the shares after %v", d.Pos, pct, maxWait)
				fmt.Fprintf(&out, "NOT within %.0f%% after %v\n", pct, maxWait)
				break
			}
		}
	case "lends":
		from, to := h.span(t, d)
		var dest string
		d.ScanArgs(t, "dest", &dest)
		var quiet time.Duration
		if a, ok := d.Arg("quiet"); ok {
			quiet = dur(t, d, a.SingleVal(t))
		}
		for slot := from; slot < to; slot += 250 * time.Millisecond {
			var sum float64
			for _, m := range s.SentLog() {
				if m.At >= slot && m.At < slot+250*time.Millisecond && m.Msg.To == "region/"+dest && strings.HasPrefix(m.Msg.From, "region/") {
					for _, e := range m.Msg.Tenants {
						sum += e.Lend[quota.PublishRate]
					}
				}
			}
			if slot < from+quiet && sum > 0 {
				t.Errorf("%s: %g lent to %s at %v, within %v of %v", d.Pos, sum, dest, slot, quiet, from)
			}
			fmt.Fprintf(&out, "%v %.0f\n", slot, sum)
		}
	case "allowance":
		for _, b := range s.Brokers() {
			a, _ := b.Q.Allowance(s.Config().Tenant, quota.PublishRate, s.Clock(b.Region))
			fmt.Fprintf(&out, "%s %.0f  ", b.ID, a)
		}
		out.WriteString("\n")
	case "conns":
		from, to := h.span(t, d)
		for _, r := range s.Regions() {
			fmt.Fprintf(&out, "%s %d  ", r, s.MaxConns(r, from, to))
		}
		max := s.MaxConns("", from, to)
		lim := h.limits.Mesh[quota.Connections]
		verdict := "ok"
		if float64(max) > lim {
			verdict = "VIOLATED"
			t.Errorf("%s: %d connections held at once, over the limit %.0f", d.Pos, max, lim)
		}
		fmt.Fprintf(&out, "mesh %d ≤ %.0f: %s (refused %d)\n", max, lim, verdict, s.ConnRefused(""))
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return out.String()
}
