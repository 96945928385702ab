package drill

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/stratamesh/strata/tenancy"
)

// MinMsgs is the fewest messages a drill must have acknowledged in the
// cut region before the cut for its RPO to mean anything; CheckLoad
// refuses a --load that would plan fewer, before the cut or during the
// outage, and Check fails a drill that acknowledged fewer before the cut.
const MinMsgs = 5

// LoadShortRatio: a report whose achieved rate before the cut is below
// this fraction of the asked --load is flagged (Report.LoadShort).
const LoadShortRatio = 0.8

// ErrLoad is returned by CheckLoad for a --load too low to measure.
var ErrLoad = errors.New("drill: --load too low")

// CheckLoad refuses a publish rate (msgs/s) that would plan fewer than
// MinMsgs messages in the warmup (before the cut) or in the outage
// (cut → heal); the error names the minimum rate for these durations.
func CheckLoad(rate float64, warmup, outage time.Duration) error {
	short := min(warmup, outage)
	if short <= 0 {
		return fmt.Errorf("%w: --warmup %v and --for %v must be positive", ErrLoad, warmup, outage)
	}
	if rate*warmup.Seconds() >= MinMsgs && rate*outage.Seconds() >= MinMsgs {
		return nil
	}
	need := MinMsgs / short.Seconds()
	return fmt.Errorf("%w: %s msgs/s plans %s messages in the %v warmup and %s in the %v outage; "+
		"a drill needs at least %d in each: give --load %s/s or more (or a longer --warmup/--for)",
		ErrLoad, num(rate), num(rate*warmup.Seconds()), warmup, num(rate*outage.Seconds()), outage,
		MinMsgs, num(math.Ceil(need*1000)/1000))
}

// num prints a rate or count compactly (at most 3 decimals).
func num(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "" || s == "-0" {
		return "0"
	}
	return s
}

// measured lists what a drill failed to measure: no producer
// acknowledgement or no consumer delivery in a surviving region after
// the cut, or fewer than MinMsgs acknowledged in the region before it.
// Such a drill fails whatever thresholds were given.
func measured(r Report) []Violation {
	var out []Violation
	if r.Published.InRegion < MinMsgs {
		out = append(out, Violation{Flag: "measure", Msg: fmt.Sprintf(
			"only %d messages acknowledged in %s before the cut (at least %d needed): the RPO measures nothing; raise --load or --warmup",
			r.Published.InRegion, r.Region, MinMsgs)})
	}
	if r.RTO.PublishS == nil {
		out = append(out, Violation{Flag: "measure", Msg: fmt.Sprintf(
			"the producer never resumed: no publish acknowledged in %s after the cut (RTO publish never)", r.Survivor)})
	}
	if r.RTO.ConsumeS == nil {
		out = append(out, Violation{Flag: "measure", Msg: fmt.Sprintf(
			"the consumer never resumed: no delivery in %s after the cut (RTO consume never)", r.Survivor)})
	}
	return out
}

// ErrRegion is returned by CheckRegion and PickSurvivor.
var ErrRegion = errors.New("drill: bad region")

// CheckRegion reports whether name (given as --flag) is one of the
// mesh's regions.
func CheckRegion(mesh []string, flag, name string) error {
	if slices.Contains(mesh, name) {
		return nil
	}
	return fmt.Errorf("%w: --%s %s: unknown region %s (regions: %s)", ErrRegion, flag, name, name, strings.Join(mesh, ", "))
}

// PickSurvivor checks region and survivor against namespace ns's
// replication list and returns the survivor: the one given, or the
// list's first region other than region.
func PickSurvivor(ns tenancy.NSName, replication []string, region, survivor string) (string, error) {
	list := "[" + strings.Join(replication, " ") + "]"
	if !slices.Contains(replication, region) {
		return "", fmt.Errorf("%w: --region %s is not in %s's replication list %s", ErrRegion, region, ns, list)
	}
	if survivor != "" {
		if survivor == region {
			return "", fmt.Errorf("%w: --survivor %s is the region cut", ErrRegion, survivor)
		}
		if !slices.Contains(replication, survivor) {
			return "", fmt.Errorf("%w: --survivor %s is not in %s's replication list %s", ErrRegion, survivor, ns, list)
		}
		return survivor, nil
	}
	for _, r := range replication {
		if r != region {
			return r, nil
		}
	}
	return "", fmt.Errorf("%w: %s replicates only to %s: a drill needs a region besides %s", ErrRegion, ns, list, region)
}
