package tenancy

import (
	"cmp"
	"fmt"
)

// HLC is a hybrid logical clock timestamp (Kulkarni et al., "Logical
// Physical Clocks"): wall milliseconds, a logical counter that orders
// events within one millisecond or against a clock that ran ahead, and
// the region that made it, which breaks exact ties. Configuration
// records are ordered by it: last writer wins.
type HLC struct {
	Wall    int64  `json:"wall"`    // Unix milliseconds
	Logical uint32 `json:"logical"` // order within Wall
	Region  string `json:"region"`  // tie-break
}

// Compare orders a and b: by Wall, then Logical, then Region (-1, 0, +1).
func (a HLC) Compare(b HLC) int {
	if c := cmp.Compare(a.Wall, b.Wall); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Logical, b.Logical); c != 0 {
		return c
	}
	return cmp.Compare(a.Region, b.Region)
}

// IsZero reports whether h is the zero timestamp (older than any other).
func (h HLC) IsZero() bool { return h == HLC{} }

func (h HLC) String() string { return fmt.Sprintf("%d.%d@%s", h.Wall, h.Logical, h.Region) }

// Clock issues HLC timestamps for one region. It is not safe for
// concurrent use (its driver locks it). Wall time is passed in, so tests
// drive skew and stalls directly.
type Clock struct {
	region string
	last   HLC
}

// NewClock returns a clock stamping for region.
func NewClock(region string) *Clock { return &Clock{region: region} }

// Now returns a timestamp later than every one this clock issued or
// observed: wall time when it is ahead, else the last one's wall with
// the logical counter bumped.
func (c *Clock) Now(wallMillis int64) HLC {
	if wallMillis > c.last.Wall {
		c.last = HLC{Wall: wallMillis, Region: c.region}
	} else {
		c.last = HLC{Wall: c.last.Wall, Logical: c.last.Logical + 1, Region: c.region}
	}
	return c.last
}

// Observe takes in a timestamp seen elsewhere (a stored record, a
// remote region's), so that later Now values order after it whatever
// this region's wall clock says (HLC's receive rule).
func (c *Clock) Observe(h HLC) {
	if h.Wall > c.last.Wall || h.Wall == c.last.Wall && h.Logical > c.last.Logical {
		c.last = HLC{Wall: h.Wall, Logical: h.Logical, Region: c.region}
	}
}
