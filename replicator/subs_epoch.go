package replicator

import (
	"cmp"
	"fmt"
	"math"
	"strings"
	"time"
)

// Epoch names one life of a replicated subscription: a hybrid logical
// clock value made by a Reset or Delete. Epochs are totally ordered by
// Wall, then Logical, then Region (the tie-break), and the highest wins
// everywhere. The zero Epoch is the life that starts when the
// subscription is created (in every region alike).
//
// Its JSON form (MarshalJSON) is
// {"wall":"2026-01-01T00:00:01.5Z","logical":0,"region":"eu"}.
type Epoch struct {
	// Wall is the wall-clock time of the reset, in nanoseconds since the
	// Unix epoch, as the resetting region's clock read it — or the
	// previous epoch's Wall if that was later (HLC: clocks that lag never
	// move an epoch back). Never negative.
	Wall int64
	// Logical orders resets within one Wall value: 0 when Wall moved
	// forward, else the previous epoch's Logical + 1.
	Logical uint64
	// Region is the region that made the epoch ("" for the zero epoch).
	Region string
}

// Compare returns -1, 0 or +1 as e is lower than, equal to or higher than
// f: by Wall, then Logical, then Region.
func (e Epoch) Compare(f Epoch) int {
	if c := cmp.Compare(e.Wall, f.Wall); c != 0 {
		return c
	}
	if c := cmp.Compare(e.Logical, f.Logical); c != 0 {
		return c
	}
	return strings.Compare(e.Region, f.Region)
}

// IsZero reports whether e is the zero epoch (a subscription never reset).
func (e Epoch) IsZero() bool { return e == Epoch{} }

// Time returns Wall as a time.Time (UTC).
func (e Epoch) Time() time.Time { return time.Unix(0, e.Wall).UTC() }

// String returns "0" for the zero epoch, else
// "2026-01-01T00:00:01Z.2@eu" (Wall as RFC 3339, Logical, Region).
func (e Epoch) String() string {
	if e.IsZero() {
		return "0"
	}
	return fmt.Sprintf("%s.%d@%s", e.Time().Format(time.RFC3339Nano), e.Logical, e.Region)
}

// Next returns the epoch a Reset in region at wall time now makes after
// e, by the hybrid logical clock rules: Wall = max(now, e.Wall) (now
// before 1970 counts as 0, after 2262 as the largest Wall); Logical = 0
// if Wall moved forward, else e.Logical+1 (or, if that overflows, Wall+1
// with Logical 0). The result is always higher than e, whatever the
// clocks say, so a reset made after seeing e wins over it. Errors wrap
// ErrInvalid: an empty region, or e already at the largest Wall and
// Logical.
func (e Epoch) Next(now time.Time, region string) (Epoch, error) {
	if region == "" {
		return e, fmt.Errorf("%w: reset by an empty region", ErrInvalid)
	}
	wall := wallNanos(now)
	switch {
	case wall > e.Wall:
		return Epoch{Wall: wall, Region: region}, nil
	case e.Logical < math.MaxUint64:
		return Epoch{Wall: e.Wall, Logical: e.Logical + 1, Region: region}, nil
	case e.Wall < math.MaxInt64:
		return Epoch{Wall: e.Wall + 1, Region: region}, nil
	}
	return e, fmt.Errorf("%w: epoch %s cannot be followed", ErrInvalid, e)
}

var (
	unixZero = time.Unix(0, 0)
	unixMax  = time.Unix(0, math.MaxInt64)
)

// wallNanos is t in Unix nanoseconds, clamped to [0, MaxInt64].
func wallNanos(t time.Time) int64 {
	switch {
	case t.Before(unixZero):
		return 0
	case t.After(unixMax):
		return math.MaxInt64
	}
	return t.UnixNano()
}
