package sublist

import (
	"math/rand/v2"
	"strings"
)

// cache maps published subjects to their match results. Its owner (List)
// guards it with its lock. Every entry is exact for the current trie: a
// change drops the entries whose subject the changed subscription
// matches. Entries are never mutated, only dropped.
//
// The entries live in a slice, indexed by a map, because a change scans
// them: ranging over a Go map costs tens of nanoseconds per entry,
// ranging over a slice about one.
type cache[T comparable] struct {
	// index maps each cached subject to its position in entries.
	index map[string]int
	// entries holds the cached results, in no particular order.
	entries []cacheEntry[T]
	// values is the sum of the entries' values.
	values int
	// maxEntries and maxValues bound len(entries) and values. A result
	// of more than maxValues values is not cached.
	maxEntries, maxValues int
}

// cacheEntry is one cached result.
type cacheEntry[T comparable] struct {
	subject string // owned by the cache, never the caller's memory
	r       *Result[T]
	values  int // values in r: its weight against maxValues
}

func newCache[T comparable](maxEntries, maxValues int) cache[T] {
	return cache[T]{index: make(map[string]int), maxEntries: maxEntries, maxValues: maxValues}
}

// add caches r as the result of subject (which it keeps: it must not be
// the caller's memory), evicting random entries to stay within the
// bounds. If subject is already cached, it returns the cached result
// instead, so that concurrent misses end up sharing one.
func (c *cache[T]) add(subject string, r *Result[T]) *Result[T] {
	if i, ok := c.index[subject]; ok {
		return c.entries[i].r
	}
	w := len(r.Plain)
	for _, g := range r.Groups {
		w += len(g.Members)
	}
	if w > c.maxValues {
		return r
	}
	for len(c.entries) > 0 && (len(c.entries) >= c.maxEntries || c.values+w > c.maxValues) {
		c.drop(rand.IntN(len(c.entries)))
	}
	c.index[subject] = len(c.entries)
	c.entries = append(c.entries, cacheEntry[T]{subject, r, w})
	c.values += w
	return r
}

// drop removes entries[i], moving the last entry into its place.
func (c *cache[T]) drop(i int) {
	delete(c.index, c.entries[i].subject)
	c.values -= c.entries[i].values
	last := len(c.entries) - 1
	if i != last {
		c.entries[i] = c.entries[last]
		c.index[c.entries[i].subject] = i
	}
	c.entries[last] = cacheEntry[T]{}
	c.entries = c.entries[:last]
}

// invalidate drops the entries whose subject the subscription subject
// (valid) matches: one lookup for a literal subject, a scan of the
// entries for one with wildcards (a prefix test first, then token
// matching).
func (c *cache[T]) invalidate(subject string) {
	if len(c.entries) == 0 {
		return
	}
	prefix, wild := literalPrefix(subject)
	if !wild {
		if i, ok := c.index[subject]; ok {
			c.drop(i)
		}
		return
	}
	rest := subject[len(prefix):] // from the first wildcard token on
	for i := 0; i < len(c.entries); {
		// prefix ends with "." (or is empty) and a cached subject does
		// not, so what follows the prefix is whole tokens, at least one.
		if s := c.entries[i].subject; strings.HasPrefix(s, prefix) && matches(rest, s[len(prefix):]) {
			c.drop(i) // brings an unchecked entry to i
			continue
		}
		i++
	}
}
