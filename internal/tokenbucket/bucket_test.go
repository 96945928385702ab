package tokenbucket

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestWindowBound: over any window, a bucket whose rate changes admits
// at most its rate integrated over the window, plus what it held when
// the window began (at most Depth at the rate then), plus one take
// (the debt). Checked on every window between two events of random runs.
func TestWindowBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		depth := time.Duration(rapid.IntRange(1, 200).Draw(t, "depthMs")) * time.Millisecond
		b := New(rapid.Float64Range(0, 1000).Draw(t, "rate0"), depth, t0)
		type ev struct {
			at     time.Duration
			rate   float64 // rate from at on
			tokens float64 // held at at, before a take
			took   float64
		}
		var evs []ev
		at := time.Duration(0)
		maxUnits := 0.0
		for range rapid.IntRange(1, 300).Draw(t, "events") {
			at += time.Duration(rapid.IntRange(0, 50).Draw(t, "gapMs")) * time.Millisecond
			now := t0.Add(at)
			if rapid.IntRange(0, 9).Draw(t, "kind") == 0 {
				b.SetRate(rapid.Float64Range(0, 1000).Draw(t, "rate"), now)
				evs = append(evs, ev{at: at, rate: b.Rate(), tokens: b.Tokens(now)})
				continue
			}
			u := rapid.Float64Range(0.1, 5).Draw(t, "units")
			maxUnits = math.Max(maxUnits, u)
			e := ev{at: at, rate: b.Rate(), tokens: b.Tokens(now)}
			if b.Take(u, now) {
				e.took = u
			}
			evs = append(evs, e)
		}
		for i := range evs {
			// Tokens at the window's start are at most Depth at the rate.
			if evs[i].tokens > evs[i].rate*depth.Seconds()+1e-9 {
				t.Fatalf("at %v: %v tokens, over the capacity %v", evs[i].at, evs[i].tokens, evs[i].rate*depth.Seconds())
			}
			var took, earned float64
			for j := i; j < len(evs); j++ {
				took += evs[j].took
				if j > i {
					earned += evs[j-1].rate * (evs[j].at - evs[j-1].at).Seconds()
				}
				if bound := earned + evs[i].rate*depth.Seconds() + maxUnits; took > bound+1e-9 {
					t.Fatalf("[%v, %v]: took %v, over %v earned + %v held + one take %v", evs[i].at, evs[j].at, took, earned, evs[i].rate*depth.Seconds(), maxUnits)
				}
			}
		}
	})
}

// TestSetRateClips: lowering the rate drops the tokens above the new
// capacity at once; raising it does not add any.
func TestSetRateClips(t *testing.T) {
	b := New(1000, 50*time.Millisecond, t0) // full: 50 tokens
	if got := b.Tokens(t0); got != 50 {
		t.Fatalf("new bucket holds %v, want 50", got)
	}
	b.SetRate(100, t0)
	if got := b.Tokens(t0); got != 5 {
		t.Errorf("after lowering to 100/s it holds %v, want 5 (its new capacity)", got)
	}
	b.SetRate(1000, t0)
	if got := b.Tokens(t0); got != 5 {
		t.Errorf("after raising it holds %v, want 5 still (refills earn the rest)", got)
	}
	if got := b.Tokens(t0.Add(20 * time.Millisecond)); math.Abs(got-25) > 1e-9 {
		t.Errorf("20 ms later it holds %v, want 25", got)
	}
	// Tokens earned before a change are earned at the old rate.
	b2 := New(0, time.Second, t0)
	b2.SetRate(100, t0.Add(time.Second))
	if got := b2.Tokens(t0.Add(time.Second)); got != 0 {
		t.Errorf("a bucket at 0/s for 1 s earned %v, want 0", got)
	}
}

// TestDebt: a take admits while the bucket holds anything, may leave it
// in debt by less than one take, and later refills repay the debt
// before the next take.
func TestDebt(t *testing.T) {
	b := New(10, 100*time.Millisecond, t0) // capacity 1
	if !b.Take(5, t0) {
		t.Fatal("a take with 1 token held was refused")
	}
	if got := b.Tokens(t0); got != -4 {
		t.Fatalf("after taking 5 of 1 it holds %v, want -4", got)
	}
	if b.Allows(t0.Add(400*time.Millisecond)) || b.Take(1, t0.Add(400*time.Millisecond)) {
		t.Error("admitted while in debt (0 tokens at +400 ms)")
	}
	if !b.Allows(t0.Add(401 * time.Millisecond)) {
		t.Error("refused once the debt was repaid (+401 ms)")
	}
	// A bucket at rate 0 admits nothing, whatever it holds.
	z := New(0, time.Second, t0)
	if z.Take(1, t0.Add(time.Hour)) {
		t.Error("a bucket at 0/s admitted")
	}
	// Refund gives back up to the capacity.
	b.Refund(100)
	if got := b.Tokens(t0.Add(401 * time.Millisecond)); got != 1 {
		t.Errorf("after a large refund it holds %v, want its capacity 1", got)
	}
}

// TestTimeBackwards: time that goes backwards earns nothing and takes
// nothing back.
func TestTimeBackwards(t *testing.T) {
	b := New(100, time.Second, t0)
	b.Take(100, t0)
	b.Tokens(t0.Add(500 * time.Millisecond)) // 50
	if got := b.Tokens(t0.Add(100 * time.Millisecond)); math.Abs(got-50) > 1e-9 {
		t.Errorf("after time went back it holds %v, want 50", got)
	}
	if got := b.Tokens(t0.Add(600 * time.Millisecond)); math.Abs(got-60) > 1e-9 {
		t.Errorf("then forward again: %v, want 60", got)
	}
	b.SetRate(-5, t0.Add(600*time.Millisecond))
	if b.Rate() != 0 {
		t.Errorf("a negative rate is %v, want 0", b.Rate())
	}
	b.SetRate(math.NaN(), t0.Add(600*time.Millisecond))
	if b.Rate() != 0 {
		t.Errorf("a NaN rate is %v, want 0", b.Rate())
	}
}

// TestSetDepth: a shallower bucket drops what it cannot hold.
func TestSetDepth(t *testing.T) {
	b := New(100, time.Second, t0)
	b.SetDepth(100*time.Millisecond, t0)
	if got := b.Tokens(t0); got != 10 {
		t.Errorf("after SetDepth(100ms) at 100/s it holds %v, want 10", got)
	}
}

// TestWallClock: the bucket reads times on their wall clock, so the same
// instant with or without a monotonic reading, or in another zone, earns
// nothing more.
func TestWallClock(t *testing.T) {
	now := time.Now() // carries a monotonic reading
	b := New(1000, time.Second, now)
	b.Take(1000, now)
	if got := b.Tokens(now.Round(0)); got != 0 {
		t.Errorf("the same instant without its monotonic reading: %v tokens, want 0", got)
	}
	if got := b.Tokens(now.In(time.FixedZone("x", 3600))); got != 0 {
		t.Errorf("the same instant in another zone: %v tokens, want 0", got)
	}
	if got := b.Tokens(now.Round(0).Add(250 * time.Millisecond)); math.Abs(got-250) > 1e-6 {
		t.Errorf("250 ms later (wall): %v tokens, want 250", got)
	}
}
