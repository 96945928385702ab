package sublist

import (
	"bytes"
	"slices"
	"strings"
)

// Result is what matches one literal subject. It is shared and read-only
// for callers (it may come from the cache), valid until they drop it: it
// is never mutated afterwards, a change builds new results.
type Result[T comparable] struct {
	// Plain holds every matching plain subscription, in no particular
	// order. A value inserted under two matching subjects (or twice under
	// one) appears twice; callers dedupe if they need to.
	Plain []T
	// Groups holds one entry per matching queue group name, its members
	// merged across all matching subjects; in no particular order.
	Groups []Group[T]
}

// Group is one queue group in a Result.
type Group[T comparable] struct {
	Name string
	// Members holds the group's matching members, at least one; like
	// Result.Plain, a value may appear more than once.
	Members []T
}

// Match returns the subscriptions matching the literal subject. Tokens are
// compared literally ("*" and ">" in subject are not wildcards; PUB
// subjects are checked by the caller). An empty subject or one with an
// empty token matches nothing. The result is shared: see Result.
func (l *List[T]) Match(subject string) *Result[T] {
	l.mu.RLock()
	i, ok := l.cache.index[subject]
	var r *Result[T]
	if ok {
		r = l.cache.entries[i].r
	}
	l.mu.RUnlock()
	if ok {
		return r
	}
	return l.miss(subject, true)
}

// MatchBytes is Match for a subject in a byte slice, which it does not
// retain. It does not allocate when the result is cached.
func (l *List[T]) MatchBytes(subject []byte) *Result[T] {
	l.mu.RLock()
	i, ok := l.cache.index[string(subject)] // no allocation: the compiler uses the bytes
	var r *Result[T]
	if ok {
		r = l.cache.entries[i].r
	}
	l.mu.RUnlock()
	if ok {
		return r
	}
	return l.miss(string(subject), false)
}

// MatchBytesOnce is MatchBytes for a subject that is unlikely to be
// published to again, such as a request's reply inbox: a result the cache
// lacks is computed and returned without being cached, so one-off
// subjects neither evict the entries worth keeping nor take the write
// lock. The result is shared: see Result.
func (l *List[T]) MatchBytesOnce(subject []byte) *Result[T] {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if i, ok := l.cache.index[string(subject)]; ok {
		return l.cache.entries[i].r
	}
	if !literalBytesOK(subject) {
		return l.empty
	}
	var buf [8]*node[T]
	return l.result(l.root.collect(string(subject), buf[:0]))
}

// HasInterest reports whether anything matches subject (as Match would
// say). It does not allocate, and it does not fill the cache.
func (l *List[T]) HasInterest(subject []byte) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if i, ok := l.cache.index[string(subject)]; ok {
		r := l.cache.entries[i].r
		return len(r.Plain) > 0 || len(r.Groups) > 0
	}
	return literalBytesOK(subject) && l.root.interested(subject)
}

// miss computes the result for subject, which the cache did not have, and
// caches it unless the trie changed meanwhile. callers says whether
// subject is the caller's memory (then the cache key is a copy of it) or
// already a fresh copy.
func (l *List[T]) miss(subject string, callers bool) *Result[T] {
	if !literalOK(subject) {
		return l.empty
	}
	l.mu.RLock()
	gen := l.gen
	var buf [8]*node[T]
	r := l.result(l.root.collect(subject, buf[:0]))
	l.mu.RUnlock()

	if callers {
		subject = strings.Clone(subject)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen != gen {
		return r // still a true answer, as of when it was computed
	}
	return l.cache.add(subject, r)
}

// collect appends to hits the nodes with subscriptions that match the
// literal subject (non-empty, no empty token) from n, and returns hits.
// Each node appears once: a trie path matches a subject at most once.
func (n *node[T]) collect(subject string, hits []*node[T]) []*node[T] {
	tok, rest, more := strings.Cut(subject, ".")
	if c := n.rest; c != nil && c.hasSubs() {
		hits = append(hits, c) // ">" takes this token and all after it
	}
	if c := n.star; c != nil {
		hits = c.collectRest(rest, more, hits)
	}
	if c := n.literal[tok]; c != nil {
		hits = c.collectRest(rest, more, hits)
	}
	return hits
}

// collectRest continues collect at n, the node of the current token: on to
// the remaining tokens if more, else n itself matches.
func (n *node[T]) collectRest(rest string, more bool, hits []*node[T]) []*node[T] {
	if more {
		return n.collect(rest, hits)
	}
	if n.hasSubs() {
		hits = append(hits, n)
	}
	return hits
}

// interested reports whether any subscription matches subject from n; it
// is collect stopping at the first hit, on bytes, without allocating.
func (n *node[T]) interested(subject []byte) bool {
	tok, rest, more := bytes.Cut(subject, []byte("."))
	if c := n.rest; c != nil && c.hasSubs() {
		return true
	}
	if c := n.star; c != nil && c.interestedRest(rest, more) {
		return true
	}
	c := n.literal[string(tok)]
	return c != nil && c.interestedRest(rest, more)
}

// interestedRest is collectRest for interested.
func (n *node[T]) interestedRest(rest []byte, more bool) bool {
	if more {
		return n.interested(rest)
	}
	return n.hasSubs()
}

// result builds the Result of the matching nodes hits (l.empty if none):
// Plain concatenates their plain subscriptions, Groups merges their queue
// groups by name. The slices are new and clipped, so nothing a caller
// does to them can reach the trie or another result.
func (l *List[T]) result(hits []*node[T]) *Result[T] {
	if len(hits) == 0 {
		return l.empty
	}
	nplain, ngroups := 0, 0
	for _, n := range hits {
		nplain += n.plain.len()
		ngroups += len(n.groups)
	}
	r := &Result[T]{}
	if nplain > 0 {
		r.Plain = make([]T, 0, nplain)
		for _, n := range hits {
			r.Plain = append(r.Plain, n.plain.items...)
		}
	}
	if ngroups > 0 {
		r.Groups = mergeGroups(hits, ngroups)
	}
	return r
}

// mergeGroups returns the queue groups of hits (ngroups in all, some
// perhaps sharing a name), one Group per name.
func mergeGroups[T comparable](hits []*node[T], ngroups int) []Group[T] {
	out := make([]Group[T], 0, ngroups)
	var index map[string]int // name → position in out; built when out is long
	find := func(name string) int {
		if len(hits) == 1 {
			return -1 // names are unique within a node
		}
		if index != nil {
			if i, ok := index[name]; ok {
				return i
			}
			return -1
		}
		return slices.IndexFunc(out, func(g Group[T]) bool { return g.Name == name })
	}
	for _, n := range hits {
		for _, g := range n.groups {
			if i := find(g.name); i >= 0 {
				out[i].Members = append(out[i].Members, g.members.items...)
				continue
			}
			out = append(out, Group[T]{Name: g.name, Members: slices.Clone(g.members.items)})
			if index != nil {
				index[g.name] = len(out) - 1
			} else if len(out) > 8 && len(hits) > 1 { // beyond this, a scan costs more
				index = make(map[string]int, ngroups)
				for i, x := range out {
					index[x.Name] = i
				}
			}
		}
	}
	for i := range out {
		out[i].Members = slices.Clip(out[i].Members)
	}
	return slices.Clip(out)
}
