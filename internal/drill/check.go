package drill

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Thresholds are the limits given on the command line; a nil one is not
// checked. MaxLost is always checked (default 0), and so is catch-up: a
// drill that did not catch up before its deadline fails.
type Thresholds struct {
	MaxRPOMsgs *int           // --max-rpo-msgs: RPO in messages
	MaxRPO     *time.Duration // --max-rpo: RPO in seconds of traffic
	MaxRTO     *time.Duration // --max-rto: both RTOs (publish and consume)
	MaxLost    int            // --max-lost (default 0)
	MaxDups    *int           // --max-duplicates: duplicate deliveries
	MaxCatchUp *time.Duration // --max-catch-up: heal → caught up
	// WithinBound (--dups-within-bound) fails the drill when
	// redeliveries exceed the design's bound.
	WithinBound bool
}

// Violation is one threshold missed: Flag names it, Msg says by how much.
type Violation struct {
	Flag string `json:"flag"`
	Msg  string `json:"msg"`
}

func (v Violation) String() string { return v.Flag + ": " + v.Msg }

// Check lists what failed, in a fixed order: first what the drill
// failed to measure (flag "measure": no producer or consumer resumed in
// the survivor after the cut, fewer than MinMsgs acknowledged before the
// cut; always checked, so a drill that measured nothing never passes),
// then every threshold r misses.
func Check(r Report, t Thresholds) []Violation {
	out := measured(r)
	add := func(flag, format string, a ...any) {
		out = append(out, Violation{Flag: flag, Msg: fmt.Sprintf(format, a...)})
	}
	if t.MaxRPOMsgs != nil && r.RPO.Msgs > *t.MaxRPOMsgs {
		add("--max-rpo-msgs", "RPO %d messages > %d", r.RPO.Msgs, *t.MaxRPOMsgs)
	}
	if t.MaxRPO != nil && r.RPO.S > t.MaxRPO.Seconds() {
		add("--max-rpo", "RPO %.3fs of traffic > %v", r.RPO.S, *t.MaxRPO)
	}
	if t.MaxRTO != nil {
		for _, x := range []struct {
			what string
			v    *float64
		}{{"publish", r.RTO.PublishS}, {"consume", r.RTO.ConsumeS}} {
			// never (nil) is already a "measure" violation.
			if x.v != nil && *x.v > t.MaxRTO.Seconds() {
				add("--max-rto", "RTO %s %.3fs > %v", x.what, *x.v, *t.MaxRTO)
			}
		}
	}
	if r.Lost > t.MaxLost {
		add("--max-lost", "%d acknowledged messages lost > %d (e.g. %s)", r.Lost, t.MaxLost, strings.Join(r.LostIDs, " "))
	}
	if t.MaxDups != nil && r.Duplicates.Delivered > *t.MaxDups {
		add("--max-duplicates", "%d duplicate deliveries > %d", r.Duplicates.Delivered, *t.MaxDups)
	}
	if t.WithinBound && !r.Duplicates.WithinBound {
		add("--dups-within-bound", "%d redeliveries > bound %d", r.Duplicates.Redeliveries, r.Duplicates.Bound)
	}
	if !r.CaughtUp {
		add("catch-up", "regions did not catch up before the deadline (--catch-up-timeout)")
	} else if t.MaxCatchUp != nil && *r.CatchUpS > t.MaxCatchUp.Seconds() {
		add("--max-catch-up", "catch-up %.3fs > %v", *r.CatchUpS, *t.MaxCatchUp)
	}
	return out
}

// ErrRate is returned by ParseRate for a malformed rate.
var ErrRate = errors.New("drill: bad rate")

// ParseRate parses a publish rate in messages per second: "200", "200/s",
// "12000/m" or "0.5/s". It must be positive and at most 1e6/s.
func ParseRate(s string) (float64, error) {
	num, unit, _ := strings.Cut(strings.TrimSpace(s), "/")
	per := 1.0
	switch unit {
	case "", "s":
	case "m":
		per = 60
	case "h":
		per = 3600
	default:
		return 0, fmt.Errorf("%w %q: unit %q: want /s, /m or /h", ErrRate, s, unit)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" || strings.Trim(num, "0123456789.") != "" {
		return 0, fmt.Errorf("%w %q: want a number of messages per second such as 200 or 200/s", ErrRate, s)
	}
	v /= per
	if v <= 0 || v > 1e6 {
		return 0, fmt.Errorf("%w %q: want more than 0 and at most 1000000 messages/s", ErrRate, s)
	}
	return v, nil
}
