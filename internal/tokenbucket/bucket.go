// Package tokenbucket is a token bucket whose rate changes while it runs,
// with time passed in (no clock of its own), for admission control on
// the data path (tenant publish quotas).
//
// The bucket holds at most Rate × Depth tokens and refills at Rate per
// second. Take admits while the bucket is not empty and may leave it in
// debt by less than one take's units, which later refills repay: over
// any window of W seconds a bucket admits at most Rate×W + Rate×Depth +
// one take's units (the largest single Take). Lowering the rate clips the
// tokens to the new depth at once, so a bucket never spends, at a lower
// rate, tokens it saved at a higher one.
//
// Times are read on their wall clock (time.Time.UnixNano), whatever
// monotonic reading they carry: the bucket runs on the time its owner
// passes in, and the quota core passes wall times without one. A clock
// that steps back earns nothing until it is past the last time again.
//
// A Bucket is not safe for concurrent use; its owner locks.
package tokenbucket

import (
	"math"
	"time"
)

// Bucket is one token bucket. The zero value has rate 0 and admits
// nothing; call SetRate first.
type Bucket struct {
	rate   float64 // tokens per second
	depth  time.Duration
	cap    float64 // rate × depth: the most it holds
	tokens float64
	last   int64 // the last refill, Unix ns (time.Time.Sub costs ~4× more per publish)
	init   bool
}

// New is a bucket with rate tokens/s and depth (the burst, as time at
// rate), full at now.
func New(rate float64, depth time.Duration, now time.Time) *Bucket {
	b := &Bucket{depth: depth}
	b.SetRate(rate, now)
	b.tokens = b.capacity()
	return b
}

func (b *Bucket) capacity() float64 { return b.cap }

// setCap recomputes the capacity after the rate or the depth changed.
func (b *Bucket) setCap() { b.cap = b.rate * b.depth.Seconds() }

// refill adds the tokens earned since the last call, up to the capacity.
// Time that goes backwards earns nothing.
func (b *Bucket) refill(now time.Time) {
	n := now.UnixNano()
	if !b.init {
		b.last, b.init = n, true
		return
	}
	if dt := n - b.last; dt > 0 {
		t := b.tokens + b.rate*time.Duration(dt).Seconds()
		if t > b.cap {
			t = b.cap
		}
		b.tokens, b.last = t, n
	}
}

// SetRate changes the rate (tokens/s, ≥ 0; negative is taken as 0) from
// now on; tokens earned before now are earned at the old rate. The depth
// is unchanged.
func (b *Bucket) SetRate(rate float64, now time.Time) {
	b.refill(now)
	if rate < 0 || math.IsNaN(rate) {
		rate = 0
	}
	b.rate = rate
	b.setCap()
	if c := b.capacity(); b.tokens > c {
		b.tokens = c
	}
}

// SetDepth changes the depth (burst as time at rate; tokens above the new
// capacity are dropped).
func (b *Bucket) SetDepth(depth time.Duration, now time.Time) {
	b.refill(now)
	b.depth = depth
	b.setCap()
	if c := b.capacity(); b.tokens > c {
		b.tokens = c
	}
}

// Rate is the current rate in tokens/s.
func (b *Bucket) Rate() float64 { return b.rate }

// Tokens is what the bucket holds at now (negative: in debt).
func (b *Bucket) Tokens(now time.Time) float64 {
	b.refill(now)
	return b.tokens
}

// Take admits units (> 0) at now when the bucket holds more than zero
// tokens, and takes them (possibly into debt); otherwise it takes
// nothing and says no.
func (b *Bucket) Take(units float64, now time.Time) bool {
	b.refill(now)
	if b.tokens <= 0 || b.rate <= 0 {
		return false
	}
	b.tokens -= units
	return true
}

// Allows says whether Take would admit at now, taking nothing.
func (b *Bucket) Allows(now time.Time) bool {
	b.refill(now)
	return b.tokens > 0 && b.rate > 0
}

// Refund gives back units taken by a Take whose work did not happen
// (another bucket refused the same request), up to the capacity.
func (b *Bucket) Refund(units float64) {
	b.tokens = math.Min(b.capacity(), b.tokens+units)
}
