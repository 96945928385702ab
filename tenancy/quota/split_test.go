package quota

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// naiveSplit is Split's contract computed the obvious way: unreachable
// parties their static share (capped); floors; then, by bisection, the
// level λ at which the targets use what is free: min(cap, λ × (demand
// plus the spare by static share)) when the demand fits, else
// clamp(λ × demand, floor, cap).
func naiveSplit(limit float64, static, demand, caps []float64, minFrac float64) []float64 {
	n := len(static)
	out := make([]float64, n)
	if n == 0 || limit <= 0 {
		return out
	}
	capOf := func(i int) float64 {
		if caps[i] > 0 {
			return caps[i]
		}
		return math.Inf(1)
	}
	free := limit
	for i := range n {
		if demand[i] < 0 {
			out[i] = math.Min(static[i], capOf(i))
			free -= out[i]
		}
	}
	if free <= 0 {
		return out
	}
	// target(λ) per party, the floors and caps first.
	lo := make([]float64, n)
	hi := make([]float64, n)
	slope := make([]float64, n)
	var floors, total, statics float64
	open := 0
	for i := range n {
		if demand[i] >= 0 {
			open++
			f := math.Min(minFrac*static[i], capOf(i))
			floors += f
			total += math.Max(demand[i], f)
			statics += static[i]
		}
	}
	if open == 0 {
		return out
	}
	for i := range n {
		if demand[i] < 0 {
			continue
		}
		f := math.Min(minFrac*static[i], capOf(i))
		hi[i] = capOf(i)
		switch {
		case floors > free:
			out[i] = f * free / floors
		case total <= free:
			w := 1 / float64(open)
			if statics > 0 {
				w = static[i] / statics
			}
			slope[i] = math.Max(demand[i], f) + (free-total)*w
		default:
			lo[i], slope[i] = f, demand[i]
		}
	}
	if floors > free {
		return out
	}
	sum := func(l float64) float64 {
		var s float64
		for i := range n {
			if demand[i] >= 0 {
				s += math.Min(hi[i], math.Max(lo[i], l*slope[i]))
			}
		}
		return s
	}
	a, b := 0.0, 1.0
	for sum(b) < free && b < 1e300 {
		b *= 2
	}
	for range 200 {
		if mid := (a + b) / 2; sum(mid) < free {
			a = mid
		} else {
			b = mid
		}
	}
	for i := range n {
		if demand[i] >= 0 {
			out[i] = math.Min(hi[i], math.Max(lo[i], b*slope[i]))
		}
	}
	return out
}

type splitCase struct {
	limit                float64
	static, demand, caps []float64
	minFrac              float64
}

func drawSplit(t *rapid.T) splitCase {
	n := rapid.IntRange(1, 6).Draw(t, "n")
	c := splitCase{limit: rapid.Float64Range(1, 10000).Draw(t, "limit"), minFrac: rapid.Float64Range(0, 0.2).Draw(t, "minFrac")}
	var ws float64
	w := make([]float64, n)
	for i := range n {
		w[i] = rapid.Float64Range(0.1, 10).Draw(t, "weight")
		ws += w[i]
	}
	for i := range n {
		c.static = append(c.static, c.limit*w[i]/ws)
		// Demands are none, or at least a thousandth of the limit (a
		// vanishing demand would make λ, and the naive bisection,
		// overflow).
		d := -1.0
		switch rapid.IntRange(0, 5).Draw(t, "reachable") {
		case 0:
		case 1:
			d = 0
		default:
			d = rapid.Float64Range(c.limit/1000, 2*c.limit).Draw(t, "demand")
		}
		c.demand = append(c.demand, d)
		cp := 0.0
		if rapid.Bool().Draw(t, "capped") {
			cp = rapid.Float64Range(1, c.limit).Draw(t, "cap")
		}
		c.caps = append(c.caps, cp)
	}
	return c
}

func close(a, b, scale float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, scale) }

// TestSplitProperties: Split against naiveSplit, and its promises: the
// targets sum to at most the limit, respect the caps, give unreachable
// parties their static share, and do not fall when a party's demand
// rises.
func TestSplitProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawSplit(t)
		got := Split(c.limit, c.static, c.demand, c.caps, c.minFrac)
		want := naiveSplit(c.limit, c.static, c.demand, c.caps, c.minFrac)
		var sum float64
		for i := range got {
			if !close(got[i], want[i], c.limit) {
				t.Fatalf("party %d: Split %v, naive %v (all: %v vs %v)", i, got[i], want[i], got, want)
			}
			if got[i] < 0 {
				t.Fatalf("party %d: negative target %v", i, got[i])
			}
			if c.caps[i] > 0 && got[i] > c.caps[i]*(1+1e-9) {
				t.Fatalf("party %d: target %v over its cap %v", i, got[i], c.caps[i])
			}
			if c.demand[i] < 0 {
				s := c.static[i]
				if c.caps[i] > 0 {
					s = math.Min(s, c.caps[i])
				}
				if !close(got[i], s, c.limit) {
					t.Fatalf("unreachable party %d: target %v, want its static share %v", i, got[i], s)
				}
			}
			sum += got[i]
		}
		if sum > c.limit*(1+1e-9) {
			t.Fatalf("targets sum to %v, over the limit %v", sum, c.limit)
		}
		// Monotone in demand: more demand from a reachable party never
		// lowers its target.
		j := rapid.IntRange(0, len(got)-1).Draw(t, "j")
		if c.demand[j] >= 0 {
			more := append([]float64(nil), c.demand...)
			more[j] += rapid.Float64Range(0, c.limit).Draw(t, "more")
			after := Split(c.limit, c.static, more, c.caps, c.minFrac)
			if after[j] < got[j]-1e-6*c.limit {
				t.Fatalf("party %d's demand %v -> %v lowered its target %v -> %v", j, c.demand[j], more[j], got[j], after[j])
			}
		}
	})
}

// TestSplitExamples: the shares of the skews, at twice the limit.
func TestSplitExamples(t *testing.T) {
	static := []float64{1000.0 / 3, 1000.0 / 3, 1000.0 / 3}
	for _, c := range []struct {
		demand, want []float64
	}{
		{[]float64{1600, 200, 200}, []float64{800, 100, 100}},
		{[]float64{666, 666, 666}, []float64{1000.0 / 3, 1000.0 / 3, 1000.0 / 3}},
		{[]float64{2000, 0, 0}, []float64{1000 - 2*1000.0/3*0.05, 1000.0 / 3 * 0.05, 1000.0 / 3 * 0.05}},
		{[]float64{100, 100, 100}, []float64{1000.0 / 3, 1000.0 / 3, 1000.0 / 3}},
		{[]float64{1600, 200, -1}, []float64{(1000 - 1000.0/3) * 1600 / 1800, (1000 - 1000.0/3) * 200 / 1800, 1000.0 / 3}},
	} {
		got := Split(1000, static, c.demand, nil, DefaultMinShare)
		for i := range got {
			if !close(got[i], c.want[i], 1000) {
				t.Errorf("Split(%v) = %v, want %v", c.demand, got, c.want)
				break
			}
		}
	}
}
