package audit

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Topic is a replicated topic to audit: its name (tenant/namespace/topic)
// and its namespace's replication list (at least two regions).
type Topic struct {
	Name    string
	Regions []string
}

// Replication is one region's reading of a topic's replication at its
// owner: its own origin stream (incarnation, last origin sequence) and
// its replicator cursors (Cursor.Region is that region).
type Replication struct {
	Incarnation   string
	LastOriginSeq uint64
	Cursors       []Cursor
}

// Mesh is what Run asks: the topics to audit and each region's answers.
// cmd/strata implements it over the admin API.
type Mesh interface {
	// Topics lists the replicated topics (those of the scope asked for).
	Topics(ctx context.Context) ([]Topic, error)
	// Replication reads topic's replication at region's owner.
	Replication(ctx context.Context, region, topic string) (Replication, error)
	// Summary asks region's owner of topic for a summary.
	Summary(ctx context.Context, region, topic string, q Request) (*Summary, error)
}

// Options of Run.
type Options struct {
	// Watch is the time between the two readings of the replicator
	// cursors (a cursor that did not move across it is stalled).
	Watch time.Duration
	// Span is the span width of the first summaries (DefaultSpan if 0).
	Span uint64
	// Sleep waits d or until ctx ends (time.Sleep-like; injected so
	// tests need no clock).
	Sleep func(ctx context.Context, d time.Duration) error
}

// Kinds of Finding.
const (
	KindMissing   = "missing"           // the origin holds it (within the window), Region does not
	KindMissingAt = "missing-at-origin" // Region holds it, the origin no longer does
	KindExtra     = "extra"             // Region holds it above the origin's last origin sequence
	KindDiffering = "differing"         // both hold it, with different content
	KindDuplicate = "duplicate"         // Region holds it more than once
)

// Finding is one difference: origin sequences of one origin stream of
// a topic, in one region's copy.
type Finding struct {
	Topic  string  `json:"topic"`
	Origin Origin  `json:"origin"`
	Region string  `json:"region"`
	Kind   string  `json:"kind"`
	Ranges []Range `json:"ranges"`
}

// Compared is one (topic, origin, region) pair compared, and its window.
type Compared struct {
	Topic  string `json:"topic"`
	Origin Origin `json:"origin"`
	Region string `json:"region"`
	// Window is what was compared; InFlight the origin sequences above
	// it up to the origin's last (not yet acknowledged: not compared).
	Window   Range  `json:"window"`
	InFlight uint64 `json:"in_flight"`
}

// Report is an audit's result.
type Report struct {
	Topics   int        `json:"topics"`
	Compared []Compared `json:"compared"`
	Findings []Finding  `json:"findings"`
	Stalled  []Stall    `json:"stalled"`
	// Errors are what could not be read (the audit is incomplete).
	Errors []string `json:"errors"`
	// Scanned is the messages the owners read; Requests the summaries
	// asked for (narrowing included).
	Scanned  uint64 `json:"scanned"`
	Requests int    `json:"requests"`
}

// Exit is the process exit status for r: 0 clean, 1 any difference or
// stalled cursor, 2 no difference found but the audit is incomplete.
func (r *Report) Exit() int {
	switch {
	case len(r.Findings)+len(r.Stalled) > 0:
		return 1
	case len(r.Errors) > 0:
		return 2
	}
	return 0
}

// Run audits the mesh's replicated topics: it reads every region's
// replicator cursors, then every region's summary of every topic,
// waits o.Watch, reads the cursors again, and compares each region's
// copy of each origin stream with the origin region's (Compare, up to
// Bound: what the origin's cursor towards that region had acknowledged
// at the first reading, or more when that region holds more), settling
// differing spans with finer requests (Settle).
func Run(ctx context.Context, m Mesh, o Options) (*Report, error) {
	if o.Span == 0 {
		o.Span = DefaultSpan
	}
	rep := &Report{Compared: []Compared{}, Findings: []Finding{}, Stalled: []Stall{}, Errors: []string{}}
	topics, err := m.Topics(ctx)
	if err != nil {
		return nil, err
	}
	rep.Topics = len(topics)
	type key struct{ topic, region string }
	first := map[key]Replication{}
	var firstCursors []Cursor
	for _, t := range topics {
		for _, r := range t.Regions {
			rp, err := m.Replication(ctx, r, t.Name)
			if err != nil {
				rep.Errors = append(rep.Errors, fmt.Sprintf("%s in %s: replication state: %v", t.Name, r, err))
				continue
			}
			first[key{t.Name, r}] = rp
			firstCursors = append(firstCursors, rp.Cursors...)
		}
	}
	sums := map[key]*Summary{}
	for _, t := range topics {
		for _, r := range t.Regions {
			s, err := m.Summary(ctx, r, t.Name, Request{Span: o.Span})
			rep.Requests++
			if err != nil {
				rep.Errors = append(rep.Errors, fmt.Sprintf("%s in %s: summary: %v", t.Name, r, err))
				continue
			}
			rep.Scanned += s.Scanned
			sums[key{t.Name, r}] = s
		}
	}
	if o.Watch > 0 && o.Sleep != nil {
		if err := o.Sleep(ctx, o.Watch); err != nil {
			return nil, err
		}
	}
	second := map[key]Replication{}
	var secondCursors []Cursor
	for _, t := range topics {
		for _, r := range t.Regions {
			rp, err := m.Replication(ctx, r, t.Name)
			if err != nil {
				rep.Errors = append(rep.Errors, fmt.Sprintf("%s in %s: replication state (second reading): %v", t.Name, r, err))
				continue
			}
			second[key{t.Name, r}] = rp
			secondCursors = append(secondCursors, rp.Cursors...)
		}
	}
	rep.Stalled = append(rep.Stalled, Stalled(firstCursors, secondCursors)...)

	for _, t := range topics {
		for _, origin := range t.Regions {
			f, ok1 := first[key{t.Name, origin}]
			s, ok2 := second[key{t.Name, origin}]
			refSum := sums[key{t.Name, origin}]
			if !ok1 || !ok2 || refSum == nil || f.Incarnation == "" || f.Incarnation != s.Incarnation {
				continue // not readable, or re-created between the readings
			}
			o := Origin{Region: origin, Incarnation: f.Incarnation}
			ref := refSum.Find(o)
			for _, region := range t.Regions {
				gotSum := sums[key{t.Name, region}]
				if region == origin || gotSum == nil {
					continue
				}
				var pos uint64
				for _, c := range f.Cursors {
					if c.Remote == region {
						pos = c.Position
					}
				}
				got := gotSum.Find(o)
				win, ok := Window(ref, got, Bound(pos, got, s.LastOriginSeq))
				if !ok {
					continue
				}
				rep.Compared = append(rep.Compared, Compared{Topic: t.Name, Origin: o, Region: region, Window: win, InFlight: s.LastOriginSeq - min(win.To, s.LastOriginSeq)})
				res := Compare(ref, got, win, s.LastOriginSeq)
				fetch := func(r string) Fetch {
					return func(q Request) (*OriginSummary, error) {
						sm, err := m.Summary(ctx, r, t.Name, q)
						if err != nil {
							return nil, err
						}
						rep.Scanned += sm.Scanned
						return sm.Find(o), nil
					}
				}
				diff, n, err := Settle(res, ref, got, o, s.LastOriginSeq, fetch(origin), fetch(region))
				rep.Requests += n
				if err != nil {
					rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %s in %s: %v", t.Name, o, region, err))
				}
				add := func(kind string, rs []Range) {
					if len(rs) > 0 {
						rep.Findings = append(rep.Findings, Finding{Topic: t.Name, Origin: o, Region: region, Kind: kind, Ranges: rs})
					}
				}
				add(KindMissing, res.MissingAtGot)
				add(KindMissingAt, res.MissingAtRef)
				add(KindExtra, res.ExtraAtGot)
				add(KindDiffering, normalize(append(slices.Clone(res.Differing), diff...)))
				var dups []Range
				for _, d := range res.Duplicates {
					dups = append(dups, Range{d, d})
				}
				add(KindDuplicate, dups)
			}
		}
	}
	return rep, nil
}
