package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
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

// ErrNoAnswer marks a Mesh error meaning the region did not answer
// (no node reachable, or none answered in time), as opposed to an
// answer that is an error. Run asks such a region nothing more.
var ErrNoAnswer = errors.New("audit: the region did not answer")

// Options of Run.
type Options struct {
	// Watch is the time between the two readings of the replicator
	// cursors (a cursor that did not move across it is stalled); 0
	// turns stall detection off (Report.StallDetection false).
	Watch time.Duration
	// Timeout bounds each Mesh call (0: only ctx's bound); a call that
	// runs out counts as ErrNoAnswer.
	Timeout time.Duration
	// Span is the span width of the first summaries (DefaultSpan if 0).
	Span uint64
	// Sleep waits d or until ctx ends (time.Sleep-like; injected so
	// tests need no clock).
	Sleep func(ctx context.Context, d time.Duration) error
	// Progress, when set, is told what Run is doing (one line each:
	// phases and regions that do not answer).
	Progress func(line string)
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
	// StallDetection is false when Options.Watch was 0: the cursors
	// were read once and none can be found stalled.
	StallDetection bool `json:"stall_detection"`
	// NoAnswer is the regions that did not answer (ErrNoAnswer), sorted;
	// the audit is incomplete without them.
	NoAnswer []string `json:"no_answer"`
	// Unreachable is the replicator cursors (second reading, else first)
	// towards a region in NoAnswer that had a backlog: not stalled, their
	// remote is not answering.
	Unreachable []Cursor `json:"unreachable"`
	// Errors are what could not be read (the audit is incomplete).
	Errors []string `json:"errors"`
	// Scanned is the messages the owners read; Requests the summaries
	// asked for (narrowing included).
	Scanned  uint64 `json:"scanned"`
	Requests int    `json:"requests"`
}

// Incomplete reports whether part of the mesh was not read.
func (r *Report) Incomplete() bool { return len(r.Errors)+len(r.NoAnswer) > 0 }

// Exit is the process exit status for r: 0 clean, 1 any difference or
// stalled cursor (even if incomplete), 2 no difference found but the
// audit is incomplete.
func (r *Report) Exit() int {
	switch {
	case len(r.Findings)+len(r.Stalled) > 0:
		return 1
	case r.Incomplete():
		return 2
	}
	return 0
}

// Classify splits the stalls of Stalled(first, second) by what is known
// of their remote: towards a region in noAnswer a cursor that does not
// move is unreachable (its second reading, or its first when the second
// is missing), not stalled; a cursor with a backlog at the first reading
// towards such a region that was not read again is unreachable too.
func Classify(first, second []Cursor, noAnswer map[string]bool) (stalled []Stall, unreachable []Cursor) {
	type key struct{ topic, region, remote string }
	seen := map[key]bool{}
	for _, st := range Stalled(first, second) {
		c := st.Second
		seen[key{c.Topic, c.Region, c.Remote}] = true
		if noAnswer[c.Remote] {
			unreachable = append(unreachable, c)
			continue
		}
		stalled = append(stalled, st)
	}
	again := map[key]bool{}
	for _, c := range second {
		again[key{c.Topic, c.Region, c.Remote}] = true
	}
	for _, c := range first {
		k := key{c.Topic, c.Region, c.Remote}
		if !seen[k] && noAnswer[c.Remote] && c.LastOriginSeq > c.Position && !again[k] {
			seen[k] = true
			unreachable = append(unreachable, c)
		}
	}
	return stalled, unreachable
}

// Run audits the mesh's replicated topics: it reads every region's
// replicator cursors, then every region's summary of every topic,
// waits o.Watch, reads the cursors again, and compares each region's
// copy of each origin stream with the origin region's (Compare, up to
// Bound: what the origin's cursor towards that region had acknowledged
// at the first reading, or more when that region holds more), settling
// differing spans with finer requests (Settle). Regions are asked in
// parallel (one request at a time each); a region that does not answer
// (ErrNoAnswer, or o.Timeout) is asked nothing more. When ctx ends Run
// stops asking and reports what it had, incomplete. Errors: Topics'.
func Run(ctx context.Context, m Mesh, o Options) (*Report, error) {
	if o.Span == 0 {
		o.Span = DefaultSpan
	}
	say := func(format string, a ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(format, a...))
		}
	}
	rep := &Report{Compared: []Compared{}, Findings: []Finding{}, Stalled: []Stall{}, Errors: []string{},
		NoAnswer: []string{}, Unreachable: []Cursor{}, StallDetection: o.Watch > 0}
	topics, err := m.Topics(ctx)
	if err != nil {
		return nil, err
	}
	rep.Topics = len(topics)
	var regions []string
	for _, t := range topics {
		for _, r := range t.Regions {
			if !slices.Contains(regions, r) {
				regions = append(regions, r)
			}
		}
	}
	slices.Sort(regions)
	var mu sync.Mutex
	down := map[string]bool{}
	ended := false
	// call runs f bounded by o.Timeout; a region that does not answer
	// is marked down.
	call := func(region string, f func(ctx context.Context) error) error {
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if o.Timeout > 0 {
			cctx, cancel = context.WithTimeout(ctx, o.Timeout)
		}
		err := f(cctx)
		timedOut := err != nil && cctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrNoAnswer) || timedOut {
			mu.Lock()
			if !down[region] {
				down[region] = true
				rep.NoAnswer = append(rep.NoAnswer, region)
				say("region %s did not answer: %v", region, err)
			}
			mu.Unlock()
		}
		return err
	}
	// each runs f for every topic replicated to a region, regions in
	// parallel, skipping regions down and stopping when ctx ends.
	each := func(phase string, f func(t Topic, region string)) {
		var wg sync.WaitGroup
		for _, r := range regions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, t := range topics {
					mu.Lock()
					skip := down[r] || !slices.Contains(t.Regions, r)
					mu.Unlock()
					if skip {
						continue
					}
					if ctx.Err() != nil {
						mu.Lock()
						if !ended {
							ended = true
							rep.Errors = append(rep.Errors, fmt.Sprintf("the audit's time ran out during the %s: %v", phase, ctx.Err()))
						}
						mu.Unlock()
						return
					}
					f(t, r)
				}
			}()
		}
		wg.Wait()
	}
	failed := func(what string, t Topic, r string, err error) {
		mu.Lock()
		rep.Errors = append(rep.Errors, fmt.Sprintf("%s in %s: %s: %v", t.Name, r, what, err))
		mu.Unlock()
	}
	type key struct{ topic, region string }
	first := map[key]Replication{}
	var firstCursors []Cursor
	say("reading the replicator cursors of %d topic(s) in %d region(s)", len(topics), len(regions))
	each("first reading of the cursors", func(t Topic, r string) {
		var rp Replication
		if err := call(r, func(ctx context.Context) (err error) { rp, err = m.Replication(ctx, r, t.Name); return }); err != nil {
			failed("replication state", t, r, err)
			return
		}
		mu.Lock()
		first[key{t.Name, r}] = rp
		firstCursors = append(firstCursors, rp.Cursors...)
		mu.Unlock()
	})
	sums := map[key]*Summary{}
	say("asking the topics' owners for summaries")
	each("summaries", func(t Topic, r string) {
		var s *Summary
		err := call(r, func(ctx context.Context) (err error) {
			s, err = m.Summary(ctx, r, t.Name, Request{Span: o.Span})
			return
		})
		mu.Lock()
		rep.Requests++
		mu.Unlock()
		if err != nil {
			failed("summary", t, r, err)
			return
		}
		mu.Lock()
		rep.Scanned += s.Scanned
		sums[key{t.Name, r}] = s
		mu.Unlock()
	})
	if o.Watch > 0 && o.Sleep != nil && ctx.Err() == nil {
		say("reading the cursors again in %v", o.Watch)
		if err := o.Sleep(ctx, o.Watch); err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("the audit's time ran out waiting for the second reading of the cursors: %v", err))
			ended = true
		}
	}
	second := map[key]Replication{}
	var secondCursors []Cursor
	each("second reading of the cursors", func(t Topic, r string) {
		var rp Replication
		if err := call(r, func(ctx context.Context) (err error) { rp, err = m.Replication(ctx, r, t.Name); return }); err != nil {
			failed("replication state (second reading)", t, r, err)
			return
		}
		mu.Lock()
		second[key{t.Name, r}] = rp
		secondCursors = append(secondCursors, rp.Cursors...)
		mu.Unlock()
	})
	slices.Sort(rep.NoAnswer)
	if o.Watch > 0 {
		stalled, unreachable := Classify(firstCursors, secondCursors, down)
		rep.Stalled = append(rep.Stalled, stalled...)
		rep.Unreachable = append(rep.Unreachable, unreachable...)
	} else {
		_, unreachable := Classify(firstCursors, nil, down)
		rep.Unreachable = append(rep.Unreachable, unreachable...)
	}
	say("comparing")

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
				if region == origin || gotSum == nil || down[region] || down[origin] {
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
						var sm *Summary
						err := call(r, func(ctx context.Context) (err error) { sm, err = m.Summary(ctx, r, t.Name, q); return })
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
	slices.Sort(rep.Errors) // the regions answered in parallel
	slices.Sort(rep.NoAnswer)
	return rep, nil
}
