package audit

import "fmt"

// Fetch asks a region for its summary of one origin stream (nil when it
// holds none of it in the request's range).
type Fetch func(q Request) (*OriginSummary, error)

// Settle narrows the spans first.Narrow left open (first being
// Compare(ref, got, …) of origin o) by asking both regions for finer
// spans of those spans only, each request reading only the local
// sequences where the spans' messages were found, until every span is
// settled; it returns the single sequences whose digests differ and how
// many requests it made. Errors: the first Fetch error.
func Settle(first Result, ref, got *OriginSummary, o Origin, refLast uint64, fetchRef, fetchGot Fetch) ([]Range, int, error) {
	type open struct {
		r        Range
		ref, got *OriginSummary // where its hints come from
	}
	var queue []open
	for _, r := range first.Narrow {
		queue = append(queue, open{r, ref, got})
	}
	var differing []Range
	requests := 0
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		ask := func(f Fetch, s *OriginSummary) (*OriginSummary, error) {
			lf, lt, ok := hint(s, c.r)
			if !ok {
				return nil, nil
			}
			requests++
			oo := o
			got, err := f(Request{Origin: &oo, From: c.r.From, To: c.r.To, Span: NextSpan(c.r.Len()), LocalFrom: lf, LocalTo: lt})
			if err != nil {
				return nil, fmt.Errorf("narrowing %s of origin %s: %w", c.r, o, err)
			}
			return got, nil
		}
		rs, err := ask(fetchRef, c.ref)
		if err != nil {
			return nil, requests, err
		}
		gs, err := ask(fetchGot, c.got)
		if err != nil {
			return nil, requests, err
		}
		res := Compare(rs, gs, c.r, refLast)
		differing = append(differing, res.Differing...)
		for _, r := range res.Narrow {
			if r.Len() >= c.r.Len() {
				return nil, requests, fmt.Errorf("narrowing %s of origin %s: the answers do not follow the request's grid", c.r, o)
			}
			queue = append(queue, open{r, rs, gs})
		}
	}
	return normalize(differing), requests, nil
}

// hint is the local sequences where s's spans overlapping r were found.
func hint(s *OriginSummary, r Range) (from, to uint64, ok bool) {
	for _, sp := range spansOf(s) {
		if sp.To < r.From || sp.From > r.To {
			continue
		}
		if !ok {
			from, to, ok = sp.LocalFirst, sp.LocalLast, true
			continue
		}
		from, to = min(from, sp.LocalFirst), max(to, sp.LocalLast)
	}
	return from, to, ok
}
