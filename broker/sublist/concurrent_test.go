package sublist

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestConcurrent runs readers (Match, MatchBytes, HasInterest, Count, All)
// while writers insert and remove, under -race. Each writer owns the
// subject w.<i>.x and the queue group w<i> (on w.*.x, member 100+i) and
// checks that its own Match sees each change at once (read-your-writes
// through the cache, which is kept small so that evictions happen too);
// readers check that the subscriptions that never
// change are always there and that nothing foreign shows up.
func TestConcurrent(t *testing.T) {
	const writers, readers, rounds = 4, 4, 1500
	l := New[int]()
	l.cache.maxEntries = 16 // evictions race with invalidations too
	mustInsert(t, l, "stable.>", "", -1)
	mustInsert(t, l, "stable.*", "g", -2)
	mustInsert(t, l, "w.*.x", "all", -3)

	var wg sync.WaitGroup
	done := make(chan struct{})
	for i := range writers {
		wg.Go(func() {
			subject, group, member := fmt.Sprintf("w.%d.x", i), fmt.Sprintf("w%d", i), 100+i
			has := func(r *Result[int]) (plain, queued bool) {
				plain = slices.Contains(r.Plain, i)
				for _, g := range r.Groups {
					queued = queued || (g.Name == group && slices.Contains(g.Members, member))
				}
				return plain, queued
			}
			for n := range rounds {
				wild := n%3 == 0
				if err := l.Insert(subject, "", i); err != nil {
					t.Errorf("writer %d: %v", i, err)
					return
				}
				if wild {
					if err := l.Insert("w.*.x", group, member); err != nil {
						t.Errorf("writer %d: %v", i, err)
						return
					}
				}
				if p, q := has(l.MatchBytes([]byte(subject))); !p || q != wild {
					t.Errorf("writer %d round %d: after Insert, own plain %v, own group %v (want true, %v)", i, n, p, q, wild)
					return
				}
				if err := l.Remove(subject, "", i); err != nil {
					t.Errorf("writer %d: %v", i, err)
					return
				}
				if wild {
					if err := l.Remove("w.*.x", group, member); err != nil {
						t.Errorf("writer %d: %v", i, err)
						return
					}
				}
				if p, q := has(l.Match(subject)); p || q {
					t.Errorf("writer %d round %d: after Remove, own plain %v, own group %v", i, n, p, q)
					return
				}
			}
		})
	}
	var rg sync.WaitGroup
	for r := range readers {
		rg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-done:
					return
				default:
				}
				stable := l.MatchBytes(fmt.Appendf(nil, "stable.%d", n%7))
				if !slices.Equal(stable.Plain, []int{-1}) || len(stable.Groups) != 1 || !slices.Equal(stable.Groups[0].Members, []int{-2}) {
					t.Errorf("reader %d: stable.%d gave %s", r, n%7, canon(stable))
					return
				}
				j := (n + r) % writers
				res := l.Match(fmt.Sprintf("w.%d.x", j))
				if len(res.Plain) > 1 || (len(res.Plain) == 1 && res.Plain[0] != j) {
					t.Errorf("reader %d: w.%d.x gave %s", r, j, canon(res))
					return
				}
				for _, g := range res.Groups {
					if g.Name != "all" && !slices.Equal(g.Members, []int{100 + int(g.Name[1]-'0')}) {
						t.Errorf("reader %d: w.%d.x gave %s", r, j, canon(res))
						return
					}
				}
				if res := l.Match(fmt.Sprintf("u.%d", n)); len(res.Plain)+len(res.Groups) != 0 {
					t.Errorf("reader %d: u.%d gave %s", r, n, canon(res))
					return
				}
				if !l.HasInterest([]byte("stable.x")) || l.HasInterest([]byte("nobody.home")) {
					t.Errorf("reader %d: HasInterest wrong", r)
					return
				}
				if n%100 == 0 {
					if c := l.Count(); c < 3 || c > 3+2*writers {
						t.Errorf("reader %d: Count() = %d", r, c)
					}
					l.All(func(string, string, int) {})
				}
			}
		})
	}
	wg.Wait()
	close(done)
	rg.Wait()
	if c := l.Count(); c != 3 {
		t.Errorf("Count() = %d at the end, want 3", c)
	}
}
