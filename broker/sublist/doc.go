// Package sublist is the subject-interest index of a NATS broker: which
// subscriptions (of local clients, or of route peers) a published subject
// reaches, with the wildcards and queue groups of nats-wire.md §1.7.
//
// # What it owns
//
//   - The index (List): a trie with one node per subject token, each node
//     with its literal children, a "*" child and a ">" child, and the plain
//     subscriptions and queue groups whose subject ends there. Values are
//     the caller's handles, compared with ==; the same (subject, queue,
//     value) may be stored more than once and is then removed once per
//     Remove. Remove prunes nodes left without subscriptions or children,
//     and member lists give memory back as they shrink, so memory follows
//     the live subscriptions, not their churn.
//   - Subscription-subject validation (ErrInvalidSubject): non-empty
//     tokens, no whitespace, ">" only last; "a*" is a literal token.
//   - A cache of match results by published subject (empty results
//     included: "no interest" is worth caching too), bounded to 4096
//     subjects and 2^20 values in all, evicting random entries when full.
//     A change drops exactly the cached subjects its subscription subject
//     matches (one map delete for a literal subject, a scan of the cache
//     for a wildcard one), so a cached result is always exact.
//
// # What it must not do
//
// Choose a queue group member, deliver, count messages, or know clients,
// routes, accounts or permissions: it answers "who is interested", and the
// broker decides what to do with the answer. It does not check PUB
// subjects beyond treating one with an empty token as matching nothing:
// Match compares tokens literally, so "*" or ">" in a published subject
// are plain tokens there.
//
// # Concurrency
//
// A List is safe for concurrent use. One sync.RWMutex guards it: Match,
// MatchBytes and HasInterest take it for reading (many at once), Insert
// and Remove for writing. A cache hit costs one read lock and one map
// lookup, and MatchBytes and HasInterest do not allocate then. A miss
// computes the result under the read lock and then takes the write lock
// briefly to cache it, unless the trie changed meanwhile (a generation
// counter), so a result computed before a change is never cached after
// it. Every call is linearizable: a Match that starts after an Insert or
// Remove returned sees its effect. All calls its callback on a snapshot,
// without holding the lock.
//
// # Results are immutable
//
// Match returns a *Result shared with the cache and with other callers.
// Callers must treat it, and the slices in it, as read-only; in return it
// is never changed afterwards, so it stays valid (a consistent answer as
// of the call) for as long as the caller keeps it, with no lock held. A
// change to the index builds new results instead of editing old ones.
//
// # Costs
//
// Insert and Remove cost O(tokens) under the write lock, plus, for a
// subject with wildcards, a scan of the cache (a prefix compare per cached
// subject, a token match for those that pass): tens of microseconds with
// a full cache, during which matches wait. Removing a value from a node
// with many subscribers is O(1) (an index by value, kept once a node has
// more than 32; a scan only if that value is stored there twice). A cache
// miss costs the trie walk and a copy of every matching value (O(N) for a
// subject with fan-out N, which is why the cache is also bounded in
// values), then the write lock briefly to cache the result: many distinct
// subjects published at once (unique reply subjects, say) contend on it.
package sublist
