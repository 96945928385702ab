package replicator

import (
	"errors"
	"fmt"
	"time"
)

// Config tunes a Sender. Start from DefaultConfig; Validate reports every
// problem at once.
type Config struct {
	// MaxInFlight is the send window: the most origin sequences sent and
	// not yet answered (a gap record counts 1). Default 1000. Larger hides
	// more round-trip latency on a far link; each one is held in the
	// driver's memory until answered and resent after a failure.
	MaxInFlight int
	// MaxBatchMsgs is the most messages in one batch. Default 100. Larger
	// batches mean fewer requests but more to resend after a failure.
	MaxBatchMsgs int
	// MaxBatchBytes is the most Msg.Bytes in one batch, in bytes; a single
	// larger message goes alone. Default 1 MiB (the NATS max_payload); the
	// link carries up to max_payload plus the envelope.
	MaxBatchBytes int
	// AckTimeout is how long a batch may wait for its answer before the
	// sender treats it as failed (rewind and back off). Default 10 s. Too
	// short resends work a slow remote is still doing (harmless: the
	// remote answers duplicates); too long delays recovery from a lost
	// answer.
	AckTimeout time.Duration
	// BackoffInitial is the wait after the first failure in a row;
	// each further failure doubles it, up to BackoffMax. Default 100 ms.
	BackoffInitial time.Duration
	// BackoffMax caps the wait between retries. Default 30 s: a remote
	// back from an outage waits at most that long for replication to
	// resume.
	BackoffMax time.Duration
	// BackoffJitter, in [0, 1), shortens each wait by up to that fraction,
	// drawn from a generator seeded with Seed, so that many topics failing
	// together do not retry in lockstep. 0 (the default) is jitter-free.
	BackoffJitter float64
	// Seed seeds the jitter: the same seed gives the same waits, so tests
	// are reproducible. The driver passes a random one.
	Seed uint64
	// StallAfter is how long a sender with a non-empty backlog may go
	// without progress (no acknowledgement advancing its position) before
	// its health is Stalled. It keeps retrying. Default 60 s.
	StallAfter time.Duration
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		MaxInFlight:    1000,
		MaxBatchMsgs:   100,
		MaxBatchBytes:  1 << 20,
		AckTimeout:     10 * time.Second,
		BackoffInitial: 100 * time.Millisecond,
		BackoffMax:     30 * time.Second,
		StallAfter:     60 * time.Second,
	}
}

// Validate returns every problem with c, each wrapping ErrInvalid, joined;
// nil when c is usable.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: config: "+format, append([]any{ErrInvalid}, args...)...))
	}
	if c.MaxInFlight < 1 {
		bad("max_in_flight %d < 1", c.MaxInFlight)
	}
	if c.MaxBatchMsgs < 1 {
		bad("max_batch_msgs %d < 1", c.MaxBatchMsgs)
	}
	if c.MaxBatchBytes < 1 {
		bad("max_batch_bytes %d < 1", c.MaxBatchBytes)
	}
	if c.AckTimeout <= 0 {
		bad("ack_timeout %v <= 0", c.AckTimeout)
	}
	if c.BackoffInitial <= 0 {
		bad("backoff_initial %v <= 0", c.BackoffInitial)
	}
	if c.BackoffMax < c.BackoffInitial {
		bad("backoff_max %v < backoff_initial %v", c.BackoffMax, c.BackoffInitial)
	}
	if !(c.BackoffJitter >= 0 && c.BackoffJitter < 1) {
		bad("backoff_jitter %v not in [0, 1)", c.BackoffJitter)
	}
	if c.StallAfter <= 0 {
		bad("stall_after %v <= 0", c.StallAfter)
	}
	return errors.Join(errs...)
}

// backoff computes retry waits: BackoffInitial·2^(n-1) for the n-th
// failure in a row, capped at BackoffMax, shortened by the seeded jitter.
type backoff struct {
	initial, max time.Duration
	jitter       float64
	rng          uint64 // splitmix64 state
}

func newBackoff(c Config) backoff {
	return backoff{initial: c.BackoffInitial, max: c.BackoffMax, jitter: c.BackoffJitter, rng: c.Seed}
}

// wait returns the wait after the n-th failure in a row (n >= 1).
func (b *backoff) wait(n int) time.Duration {
	d := min(b.initial, b.max)
	for i := 1; i < n && d < b.max; i++ {
		if d > b.max/2 {
			d = b.max
			break
		}
		d *= 2
	}
	if b.jitter > 0 {
		u := float64(b.next()>>11) / (1 << 53) // [0, 1)
		d -= time.Duration(float64(d) * b.jitter * u)
	}
	return max(d, 1)
}

// next is splitmix64: small, seeded, and good enough to spread retries.
func (b *backoff) next() uint64 {
	b.rng += 0x9e3779b97f4a7c15
	z := b.rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
