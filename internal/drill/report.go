package drill

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Report is a drill's outcome; its JSON is what `strata drill failover
// --json` prints (schema in docs/drill.md). Times are seconds; a *float64
// that is null never happened (no producer or consumer recovered).
type Report struct {
	Region   string   `json:"region"`
	Survivor string   `json:"survivor"`
	Regions  []string `json:"regions"`
	Mode     string   `json:"mode"`
	// Load is the target publish rate (msgs/s); OutageS the time from
	// the cut to the heal.
	Load    float64 `json:"load"`
	OutageS float64 `json:"outage_s"`

	// Published counts distinct messages acknowledged: in the cut region
	// (before the cut) and in the other regions (after it).
	Published Published `json:"published"`
	RPO       RPO       `json:"rpo"`
	RTO       RTO       `json:"rto"`
	// Lost counts acknowledged messages absent from at least one region
	// after catch-up (must be 0); LostIDs shows up to 10 of them and
	// MissingByRegion how many each region lacks.
	Lost            int            `json:"lost"`
	LostIDs         []string       `json:"lost_ids,omitempty"`
	MissingByRegion map[string]int `json:"missing_by_region,omitempty"`
	Duplicates      Duplicates     `json:"duplicates"`
	// CatchUpS is heal → every acknowledged message in every region;
	// null when that did not happen before the deadline.
	CatchUpS *float64 `json:"catch_up_s"`
	CaughtUp bool     `json:"caught_up"`
	// LoadShort is set when Published.RatePerS is below LoadShortRatio
	// of Load: the producer did not publish at the rate asked (the
	// client or the mesh could not keep up), and Warnings says so.
	LoadShort bool `json:"load_short"`
	// Warnings are findings that do not fail the drill (one line each).
	Warnings []string `json:"warnings"`
}

// Published counts distinct acknowledged messages.
type Published struct {
	InRegion    int `json:"in_region"`
	InSurvivors int `json:"in_survivors"`
	Total       int `json:"total"`
	// RatePerS is the observed acknowledged rate in the cut region
	// before the cut (msgs/s): the acknowledgements from Log.Start to
	// Log.CutBegan (the fault call, which may stall publishes while it
	// runs; without it Log.Cut) over that time (without Start: from the
	// first acknowledgement to the cut); Report.Load is the rate asked.
	RatePerS float64 `json:"rate_per_s"`
}

// RPO is what was acknowledged in the cut region and missing from the
// survivor when read right after the cut.
type RPO struct {
	Msgs int `json:"msgs"`
	// S is Msgs as seconds of traffic: Msgs / Published.RatePerS.
	S float64 `json:"s"`
	// OldestAgeS is the age at the cut of the oldest missing message's
	// acknowledgement (0 when none is missing).
	OldestAgeS float64 `json:"oldest_age_s"`
}

// RTO is cut → first producer acknowledgement and cut → first consumer
// delivery in a surviving region (null: never).
type RTO struct {
	PublishS *float64 `json:"publish_s"`
	ConsumeS *float64 `json:"consume_s"`
}

// Duplicates are deliveries of a message id already delivered. The
// design (docs/architecture.md, replicated subscriptions) bounds
// redeliveries after a region move by what was acknowledged in the last
// sync interval: Bound = ceil(ConsumeRatePerS × SyncIntervalS) + 1 (the
// one message the consumer may hold unacknowledged at the cut).
// Delivered counts every extra delivery; StoredTwice the ids stored twice
// in one region (a publish whose acknowledgement the cut lost, retried in
// the survivor under a new origin), whose second copy is delivered too and
// is not a redelivery; Redeliveries = extra deliveries beyond each id's
// stored copies, which is what the bound is about.
type Duplicates struct {
	Delivered       int     `json:"delivered"`
	StoredTwice     int     `json:"stored_twice"`
	Redeliveries    int     `json:"redeliveries"`
	Bound           int     `json:"bound"`
	WithinBound     bool    `json:"within_bound"`
	ConsumeRatePerS float64 `json:"consume_rate_per_s"`
	SyncIntervalS   float64 `json:"sync_interval_s"`
}

// Analyze computes the report of l. It does not look at a clock: every
// time is from the log.
func Analyze(l Log) Report {
	r := Report{
		Region: l.Region, Survivor: l.Survivor, Regions: slices.Clone(l.Regions),
		Mode: l.Mode, Load: l.Load,
	}
	if !l.Healed.IsZero() {
		r.OutageS = secs(l.Healed.Sub(l.Cut))
	}
	inR, inS := map[string]time.Time{}, map[string]bool{}
	var firstR time.Time
	var rtoPub *float64
	for _, a := range l.Acks {
		if a.Region == l.Region {
			if t, ok := inR[a.ID]; !ok || a.At.Before(t) {
				inR[a.ID] = a.At
			}
			if firstR.IsZero() || a.At.Before(firstR) {
				firstR = a.At
			}
			continue
		}
		inS[a.ID] = true
		if !a.At.Before(l.Cut) {
			d := secs(a.At.Sub(l.Cut))
			if rtoPub == nil || d < *rtoPub {
				rtoPub = &d
			}
		}
	}
	r.RTO.PublishS = rtoPub
	acked := map[string]bool{}
	for id := range inR {
		acked[id] = true
	}
	for id := range inS {
		acked[id] = true
	}
	r.Published = Published{InRegion: len(inR), InSurvivors: len(inS), Total: len(acked)}
	if !l.Start.IsZero() {
		end := l.Cut
		if !l.CutBegan.IsZero() && l.CutBegan.Before(end) {
			end = l.CutBegan
		}
		n := 0
		for _, at := range inR {
			if !at.Before(l.Start) && !at.After(end) {
				n++
			}
		}
		if span := end.Sub(l.Start); span > 0 {
			r.Published.RatePerS = float64(n) / span.Seconds()
		}
	} else if span := l.Cut.Sub(firstR); len(inR) > 1 && span > 0 {
		r.Published.RatePerS = float64(len(inR)) / span.Seconds()
	}
	r.Warnings = []string{}
	if l.Load > 0 && r.Published.RatePerS < LoadShortRatio*l.Load {
		r.LoadShort = true
		r.Warnings = append(r.Warnings, fmt.Sprintf(
			"load: %.1f msgs/s acknowledged in %s before the cut, %.3g%% of the %s msgs/s asked (--load): the producer or the mesh did not keep up",
			r.Published.RatePerS, l.Region, 100*r.Published.RatePerS/l.Load, num(l.Load)))
	}

	// RPO: acknowledged in the region, not in the survivor at the cut.
	atCut := set(l.SurvivorAtCut)
	var oldest time.Time
	for id, at := range inR {
		if atCut[id] == 0 {
			r.RPO.Msgs++
			if oldest.IsZero() || at.Before(oldest) {
				oldest = at
			}
		}
	}
	if r.RPO.Msgs > 0 {
		if r.Published.RatePerS > 0 {
			r.RPO.S = float64(r.RPO.Msgs) / r.Published.RatePerS
		} else {
			r.RPO.S = secs(l.Cut.Sub(oldest))
		}
		r.RPO.OldestAgeS = max(0, secs(l.Cut.Sub(oldest)))
	}

	// Lost: acknowledged anywhere, absent from some region at the end.
	finals := map[string]map[string]int{}
	for _, reg := range l.Regions {
		finals[reg] = set(l.Final[reg])
	}
	var lost []string
	for id := range acked {
		missing := false
		for _, reg := range l.Regions {
			if finals[reg][id] == 0 {
				missing = true
				if r.MissingByRegion == nil {
					r.MissingByRegion = map[string]int{}
				}
				r.MissingByRegion[reg]++
			}
		}
		if missing {
			lost = append(lost, id)
		}
	}
	slices.Sort(lost)
	r.Lost = len(lost)
	r.LostIDs = lost[:min(len(lost), 10)]

	r.Duplicates = duplicates(l, finals)
	for _, d := range l.Deliveries {
		if d.Region != l.Region && !d.At.Before(l.Cut) {
			v := secs(d.At.Sub(l.Cut))
			if r.RTO.ConsumeS == nil || v < *r.RTO.ConsumeS {
				r.RTO.ConsumeS = &v
			}
		}
	}
	if !l.CaughtUp.IsZero() {
		r.CaughtUp = true
		v := max(0, secs(l.CaughtUp.Sub(l.Healed)))
		r.CatchUpS = &v
	}
	return r
}

func duplicates(l Log, finals map[string]map[string]int) Duplicates {
	d := Duplicates{SyncIntervalS: l.SyncInterval.Seconds()}
	count := map[string]int{}
	var first time.Time
	inR := 0
	for _, x := range l.Deliveries {
		count[x.ID]++
		if x.Region == l.Region && x.At.Before(l.Cut) {
			inR++
			if first.IsZero() || x.At.Before(first) {
				first = x.At
			}
		}
	}
	for id, n := range count {
		d.Delivered += n - 1
		copies := 1
		for _, f := range finals {
			copies = max(copies, f[id])
		}
		if copies > 1 {
			d.StoredTwice++
		}
		d.Redeliveries += max(0, n-copies)
	}
	if span := l.Cut.Sub(first); inR > 1 && span > 0 {
		d.ConsumeRatePerS = float64(inR) / span.Seconds()
	}
	d.Bound = int(math.Ceil(d.ConsumeRatePerS*l.SyncInterval.Seconds())) + 1
	d.WithinBound = d.Redeliveries <= d.Bound
	return d
}

func set(ids []string) map[string]int {
	m := make(map[string]int, len(ids))
	for _, id := range ids {
		m[id]++
	}
	return m
}

// secs is d in seconds, rounded to the millisecond.
func secs(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }
