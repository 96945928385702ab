package quota

import "math"

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
//     its static share, so a party whose demand appears gets admitted
//     before its next report is acted on.
//
// With total demand ≤ limit, every party gets its demand plus the spare
// in proportion to its static share; above, limit is split in proportion
// to demand (floors and caps first, the rest water-filled). The targets
// sum to at most limit. Deterministic: parties with the same inputs get
// the same targets, whoever computes them.
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
	var floors float64
	for _, i := range open {
		floor[i] = math.Min(minFrac*static[i], capOf(i))
		floors += floor[i]
	}
	if floors > free {
		for _, i := range open {
			out[i] = floor[i] * free / floors
		}
		return out
	}
	var total float64
	for _, i := range open {
		total += math.Max(demand[i], floor[i])
	}
	want := make([]float64, n)
	if total <= free {
		// Everyone gets its demand; the spare goes by static share.
		var statics float64
		for _, i := range open {
			statics += static[i]
		}
		spare := free - total
		for _, i := range open {
			w := 1 / float64(len(open))
			if statics > 0 {
				w = static[i] / statics
			}
			want[i] = math.Max(demand[i], floor[i]) + spare*w
		}
	} else {
		for _, i := range open {
			want[i] = math.Max(floor[i], free*demand[i]/total)
		}
	}
	// Cap and water-fill what the caps free to the uncapped, by weight.
	fill(out, want, open, free, capOf)
	return out
}

// fill sets out[i] for i in open to want[i] scaled to sum to at most
// free, with no party above its cap: a capped party's excess goes to the
// others in proportion to their want.
func fill(out, want []float64, open []int, free float64, capOf func(int) float64) {
	active := append([]int(nil), open...)
	for len(active) > 0 && free > 1e-12 {
		var w float64
		for _, i := range active {
			w += want[i]
		}
		if w <= 0 {
			return
		}
		scale := math.Min(1, free/w)
		if free > w {
			scale = free / w // grow into the spare left by caps
		}
		var next []int
		capped := false
		for _, i := range active {
			v := want[i] * scale
			if c := capOf(i); v >= c {
				out[i] = c
				free -= c
				capped = true
				continue
			}
			next = append(next, i)
		}
		if !capped {
			for _, i := range active {
				out[i] = want[i] * scale
			}
			// Never hand out more than wanted when the caps freed
			// nothing: scale ≤ free/w by construction.
			return
		}
		active = next
	}
}
