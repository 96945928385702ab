package sublist

import (
	"fmt"
	"testing"
)

// benchList returns a List shaped like a busy broker: 10,000 literal
// subscriptions (orders.<region>.<n>), a few hundred wildcard ones, and
// queue groups, with plain values 0.. and members 1,000,000+.
func benchList(b *testing.B) *List[int] {
	b.Helper()
	l := New[int]()
	v := 0
	for r := range 10 {
		for n := range 1000 {
			mustInsert(b, l, fmt.Sprintf("orders.r%d.%d", r, n), "", v)
			v++
		}
		mustInsert(b, l, fmt.Sprintf("orders.r%d.*", r), "", v)
		mustInsert(b, l, fmt.Sprintf("orders.r%d.>", r), "workers", 1_000_000+v)
		v++
	}
	for i := range 200 {
		mustInsert(b, l, fmt.Sprintf("_INBOX.%d.*", i), "", v)
		v++
	}
	mustInsert(b, l, "orders.>", "audit", 2_000_000)
	mustInsert(b, l, ">", "", -1) // a monitor
	return l
}

// BenchmarkMatchBytesHit is the hot path: a publish to a subject whose
// result is cached (3 plain, 2 groups). It must not allocate.
func BenchmarkMatchBytesHit(b *testing.B) {
	l := benchList(b)
	subj := []byte("orders.r3.42")
	want := len(l.MatchBytes(subj).Plain)
	b.ReportAllocs()
	for b.Loop() {
		if len(l.MatchBytes(subj).Plain) != want {
			b.Fatal("wrong result")
		}
	}
}

// BenchmarkMatchBytesHitParallel is BenchmarkMatchBytesHit from all
// GOMAXPROCS goroutines at once (read-lock contention).
func BenchmarkMatchBytesHitParallel(b *testing.B) {
	l := benchList(b)
	subjects := make([][]byte, 64)
	for i := range subjects {
		subjects[i] = fmt.Appendf(nil, "orders.r%d.%d", i%10, i)
		l.MatchBytes(subjects[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			l.MatchBytes(subjects[i%len(subjects)])
			i++
		}
	})
}

// BenchmarkMatchBytesMiss publishes to subjects never seen before (as
// request replies are), so every call walks the trie, builds a result,
// and caches it (evicting once the cache is full).
func BenchmarkMatchBytesMiss(b *testing.B) {
	l := benchList(b)
	subjects := missSubjects()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.MatchBytes(subjects[i%len(subjects)])
		i++
	}
}

// missSubjects are 65,536 distinct subjects, far more than the cache
// holds.
func missSubjects() [][]byte {
	subjects := make([][]byte, 1<<16)
	for i := range subjects {
		subjects[i] = fmt.Appendf(nil, "orders.r%d.x%d", i%10, i)
	}
	return subjects
}

// BenchmarkMatchBytesOnceMiss is BenchmarkMatchBytesMiss through
// MatchBytesOnce, which leaves the cache alone (how PubAcks reach their
// one-off reply inboxes).
func BenchmarkMatchBytesOnceMiss(b *testing.B) {
	l := benchList(b)
	subjects := missSubjects()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.MatchBytesOnce(subjects[i%len(subjects)])
		i++
	}
}

// BenchmarkHasInterestMiss is the no-responders check on an uncached
// subject: a trie walk without building a result.
func BenchmarkHasInterestMiss(b *testing.B) {
	l := benchList(b)
	subj := []byte("_INBOX.7.abcdefgh")
	b.ReportAllocs()
	for b.Loop() {
		if !l.HasInterest(subj) {
			b.Fatal("no interest")
		}
	}
}

// BenchmarkInsertRemove subscribes and unsubscribes, with a full cache of
// the subjects it does not match. Literal: the cache costs one delete.
// Wildcard: it costs a scan of the cache (4096 entries here).
func BenchmarkInsertRemove(b *testing.B) {
	for _, tc := range []struct{ name, subject string }{
		{"literal", "orders.r3.new"},
		{"wildcard", "orders.r3.*.new"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l := benchList(b)
			for i := range defaultCacheEntries {
				l.Match(fmt.Sprintf("orders.r%d.%d", i%10, i))
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Insert(tc.subject, "", 7); err != nil {
					b.Fatal(err)
				}
				if err := l.Remove(tc.subject, "", 7); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRemoveFanout removes and re-adds one of 10,000 plain
// subscribers of one subject (O(1) with the bag's index).
func BenchmarkRemoveFanout(b *testing.B) {
	l := New[int]()
	for i := range 10_000 {
		mustInsert(b, l, "events.>", "", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		v := i % 10_000
		if err := l.Remove("events.>", "", v); err != nil {
			b.Fatal(err)
		}
		if err := l.Insert("events.>", "", v); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
