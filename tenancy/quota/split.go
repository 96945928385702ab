package quota

import (
	"math"
	"sort"
)

// Split divides limit between parties by demand (ARCHITECTURE §5: "the
// mesh-wide limit is split by demand"), returning each party's target.
//
//   - static[i] is party i's static share (they sum to limit); it is
//     what a party gets with no demand information, and the spare is
//     split in its proportion.
//   - demand[i] ≥ 0 is what party i offered per second (admitted and
//     refused). A negative demand means unknown (an unreachable party):
//     its target is its static share, fixed, and the rest is split among
//     the others.
//   - caps[i] > 0 caps party i's target (a per-region limit); 0 is none.
//   - minFrac in [0,1) keeps every reachable party at least minFrac of
//     its static share (its cap if lower; scaled down alike when the
//     floors alone exceed what is free), so a party whose demand appears
//     gets admitted before its next report is acted on.
//
// With total demand ≤ limit, every party gets its demand plus the spare
// in proportion to its static share; above, party i gets clamp(λ ×
// demand[i], floor[i], cap[i]) with λ such that the targets use the
// limit (in proportion to demand, floors and caps first). Caps free room
// for the others in either case (water-filled). The targets sum to at
// most limit. Deterministic: parties with the same inputs get the same
// targets, whoever computes them.
func Split(limit float64, static, demand, caps []float64, minFrac float64) []float64 {
	n := len(static)
	out := make([]float64, n)
	if n == 0 || limit <= 0 {
		return out
	}
	capOf := func(i int) float64 {
		if i < len(caps) && caps[i] > 0 {
			return caps[i]
		}
		return math.Inf(1)
	}
	// Unreachable parties keep their static share (capped).
	free := limit
	var open []int
	for i := range n {
		if demand[i] < 0 {
			out[i] = math.Min(static[i], capOf(i))
			free -= out[i]
			continue
		}
		open = append(open, i)
	}
	if len(open) == 0 || free <= 0 {
		return out
	}
	// Floors first.
	floor := make([]float64, n)
	var floors, total, statics float64
	for _, i := range open {
		floor[i] = math.Min(minFrac*static[i], capOf(i))
		floors += floor[i]
		total += math.Max(demand[i], floor[i])
		statics += static[i]
	}
	if floors > free {
		for _, i := range open {
			out[i] = floor[i] * free / floors
		}
		return out
	}
	lo := make([]float64, n)
	hi := make([]float64, n)
	slope := make([]float64, n)
	for _, i := range open {
		hi[i] = capOf(i)
		if total <= free {
			// Everyone its demand, the spare by static share: scaled up
			// (λ ≥ 1) only where caps leave room unused.
			w := 1 / float64(len(open))
			if statics > 0 {
				w = static[i] / statics
			}
			slope[i] = math.Max(demand[i], floor[i]) + (free-total)*w
		} else {
			lo[i], slope[i] = floor[i], demand[i]
		}
	}
	level(out, open, free, lo, hi, slope)
	return out
}

// level sets out[i] = clamp(λ × slope[i], lo[i], hi[i]) for i in open,
// with the λ ≥ 0 at which they sum to free (the largest sum if none
// reaches it; Σ lo ≤ free). The sum g(λ) is piecewise linear and rises
// with λ, bending where a party leaves its floor (lo/slope) or reaches
// its cap (hi/slope): λ is found between the bends it falls between.
func level(out []float64, open []int, free float64, lo, hi, slope []float64) {
	g := func(l float64) float64 {
		var s float64
		for _, i := range open {
			s += clamp(l*slope[i], lo[i], hi[i])
		}
		return s
	}
	bends := []float64{0}
	for _, i := range open {
		if slope[i] > 0 {
			bends = append(bends, lo[i]/slope[i])
			if !math.IsInf(hi[i], 1) {
				bends = append(bends, hi[i]/slope[i])
			}
		}
	}
	sort.Float64s(bends)
	lambda := math.NaN()
	prev, gPrev := 0.0, g(0)
	for _, b := range bends {
		gb := g(b)
		if gb >= free {
			lambda = b
			if gb > gPrev && b > prev {
				lambda = prev + (free-gPrev)*(b-prev)/(gb-gPrev)
			}
			break
		}
		prev, gPrev = b, gb
	}
	if math.IsNaN(lambda) {
		// Past the last bend only the uncapped parties above their floor
		// still grow, at the sum of their slopes.
		var rise float64
		for _, i := range open {
			if math.IsInf(hi[i], 1) && slope[i] > 0 {
				rise += slope[i]
			}
		}
		lambda = prev
		if rise > 0 {
			lambda = prev + (free-gPrev)/rise
		}
	}
	for _, i := range open {
		out[i] = clamp(lambda*slope[i], lo[i], hi[i])
	}
}

func clamp(v, lo, hi float64) float64 { return math.Min(math.Max(v, lo), hi) }
