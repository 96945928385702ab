package sublist

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// sub is one subscription of a test table.
type sub struct {
	subject, queue string
	v              int
}

// canon is a Result in a comparable form: sorted plain values, and each
// group's sorted members under "name=" prefixes, sorted.
func canon(r *Result[int]) string {
	plain := slices.Clone(r.Plain)
	slices.Sort(plain)
	var groups []string
	for _, g := range r.Groups {
		m := slices.Clone(g.Members)
		slices.Sort(m)
		groups = append(groups, fmt.Sprintf("%s=%v", g.Name, m))
	}
	slices.Sort(groups)
	return fmt.Sprintf("plain=%v groups=%v", plain, groups)
}

// want builds the canon form of a result from plain values and "name=v,v"
// groups.
func want(plain []int, groups ...string) string {
	p := slices.Clone(plain)
	slices.Sort(p)
	var gs []string
	for _, g := range groups {
		name, vals, _ := strings.Cut(g, "=")
		var m []int
		for s := range strings.SplitSeq(vals, ",") {
			var v int
			fmt.Sscan(s, &v)
			m = append(m, v)
		}
		slices.Sort(m)
		gs = append(gs, fmt.Sprintf("%s=%v", name, m))
	}
	slices.Sort(gs)
	return fmt.Sprintf("plain=%v groups=%v", p, gs)
}

func TestMatchSemantics(t *testing.T) {
	tests := []struct {
		name  string
		subs  []sub
		match map[string]string // published subject → want(...)
	}{
		{
			name: "literal",
			subs: []sub{{"foo.bar", "", 1}},
			match: map[string]string{
				"foo.bar":     want([]int{1}),
				"foo":         want(nil),
				"foo.bar.baz": want(nil),
				"foo.baz":     want(nil),
				"Foo.bar":     want(nil), // case-sensitive
			},
		},
		{
			name: "star matches exactly one token",
			subs: []sub{{"foo.*", "", 1}},
			match: map[string]string{
				"foo.bar":     want([]int{1}),
				"foo.baz":     want([]int{1}),
				"foo.bar.baz": want(nil),
				"foo":         want(nil),
				"bar.foo":     want(nil),
			},
		},
		{
			name: "gt matches one or more trailing tokens",
			subs: []sub{{"foo.>", "", 1}},
			match: map[string]string{
				"foo.bar":       want([]int{1}),
				"foo.bar.baz":   want([]int{1}),
				"foo.bar.baz.q": want([]int{1}),
				"foo":           want(nil),
				"bar.foo":       want(nil),
			},
		},
		{
			name: "bare gt matches everything non-empty",
			subs: []sub{{">", "", 1}},
			match: map[string]string{
				"a":     want([]int{1}),
				"a.b":   want([]int{1}),
				"a.b.c": want([]int{1}),
				"":      want(nil),
				".a":    want(nil),
				"a..b":  want(nil),
				"a.":    want(nil),
			},
		},
		{
			name: "star star",
			subs: []sub{{"*.*", "", 1}},
			match: map[string]string{
				"a.b":   want([]int{1}),
				"a":     want(nil),
				"a.b.c": want(nil),
			},
		},
		{
			name: "star in the middle and gt after star",
			subs: []sub{{"a.*.c", "", 1}, {"*.>", "", 2}, {"a.*.>", "", 3}},
			match: map[string]string{
				"a.b.c":   want([]int{1, 2, 3}),
				"a.x.c":   want([]int{1, 2, 3}),
				"a.b":     want([]int{2}),
				"a.b.d":   want([]int{2, 3}),
				"a.b.c.d": want([]int{2, 3}),
				"a":       want(nil),
			},
		},
		{
			name: "partial wildcards are literal tokens",
			subs: []sub{{"a*", "", 1}, {"foo.b>", "", 2}, {"x.*y", "", 3}},
			match: map[string]string{
				"a*":      want([]int{1}),
				"ab":      want(nil),
				"a":       want(nil),
				"foo.b>":  want([]int{2}),
				"foo.bar": want(nil),
				"x.*y":    want([]int{3}),
				"x.zy":    want(nil),
			},
		},
		{
			name: "wildcards in a published subject are literal",
			subs: []sub{{"a.b", "", 1}, {"a.*", "", 2}},
			match: map[string]string{
				"a.*": want([]int{2}),
				"a.>": want([]int{2}),
			},
		},
		{
			name: "duplicates are kept and overlapping subjects repeat values",
			subs: []sub{{"a.b", "", 1}, {"a.b", "", 1}, {"a.*", "", 1}, {"a.>", "", 2}},
			match: map[string]string{
				"a.b":   want([]int{1, 1, 1, 2}),
				"a.c":   want([]int{1, 2}),
				"a.b.c": want([]int{2}),
			},
		},
		{
			name: "queue groups merge by name across subjects",
			subs: []sub{{"orders.*", "w", 1}, {"orders.>", "w", 2}, {"orders.new", "", 3}},
			match: map[string]string{
				"orders.new":   want([]int{3}, "w=1,2"),
				"orders.old":   want(nil, "w=1,2"),
				"orders.new.x": want(nil, "w=2"),
				"orders":       want(nil),
			},
		},
		{
			name: "distinct queue groups stay apart",
			subs: []sub{{"q.a", "g1", 1}, {"q.a", "g1", 2}, {"q.a", "g2", 3}, {"q.*", "g2", 4}, {"q.>", "g3", 5}},
			match: map[string]string{
				"q.a": want(nil, "g1=1,2", "g2=3,4", "g3=5"),
				"q.b": want(nil, "g2=4", "g3=5"),
			},
		},
		{
			name: "the same value as plain and queue member",
			subs: []sub{{"s", "", 7}, {"s", "g", 7}},
			match: map[string]string{
				"s": want([]int{7}, "g=7"),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := New[int]()
			for _, s := range tc.subs {
				if err := l.Insert(s.subject, s.queue, s.v); err != nil {
					t.Fatalf("Insert(%q, %q, %d): %v", s.subject, s.queue, s.v, err)
				}
			}
			if got := l.Count(); got != len(tc.subs) {
				t.Errorf("Count() = %d, want %d", got, len(tc.subs))
			}
			for round := range 2 { // the second round is served by the cache
				for subject, w := range tc.match {
					if got := canon(l.Match(subject)); got != w {
						t.Errorf("round %d: Match(%q) = %s, want %s", round, subject, got, w)
					}
					if got := canon(l.MatchBytes([]byte(subject))); got != w {
						t.Errorf("round %d: MatchBytes(%q) = %s, want %s", round, subject, got, w)
					}
					if got, w := l.HasInterest([]byte(subject)), w != want(nil); got != w {
						t.Errorf("round %d: HasInterest(%q) = %v, want %v", round, subject, got, w)
					}
				}
			}
		})
	}
}

func TestInvalidSubjects(t *testing.T) {
	bad := []struct{ subject, queue string }{
		{"", ""},
		{".", ""},
		{"a.", ""},
		{".a", ""},
		{"a..b", ""},
		{">.a", ""},
		{"a.>.b", ""},
		{"a.>.>", ""},
		{"a b", ""},
		{"a.\tb", ""},
		{"a\n", ""},
		{"a\r.b", ""},
		{"a\u00a0b", ""}, // no-break space
		{"a\u2003", ""},  // em space
		{"a.b", "q 1"},
		{"a.b", "q\t"},
	}
	l := New[int]()
	for _, b := range bad {
		if err := l.Insert(b.subject, b.queue, 1); !errors.Is(err, ErrInvalidSubject) {
			t.Errorf("Insert(%q, %q) = %v, want ErrInvalidSubject", b.subject, b.queue, err)
		}
		if err := l.Remove(b.subject, b.queue, 1); !errors.Is(err, ErrInvalidSubject) {
			t.Errorf("Remove(%q, %q) = %v, want ErrInvalidSubject", b.subject, b.queue, err)
		}
	}
	if n := l.Count(); n != 0 {
		t.Errorf("Count() = %d after invalid inserts", n)
	}
	good := []string{"a", "*", ">", "a.*", "*.b", "a.>", "*.*.>", "a*", "a>", ">a", "a.b>.c", "$JS.API.>", "_INBOX.x.*", "ünï.cödé", "a-b_c:d"}
	for _, s := range good {
		if err := l.Insert(s, "", 1); err != nil {
			t.Errorf("Insert(%q) = %v", s, err)
		}
	}
	if err := l.Insert("a", "q.1-x", 1); err != nil {
		t.Errorf("Insert with queue q.1-x: %v", err)
	}
}

func TestRemove(t *testing.T) {
	l := New[int]()
	mustInsert(t, l, "a.b", "", 1)
	mustInsert(t, l, "a.b", "", 1)
	mustInsert(t, l, "a.b", "q", 1)
	for _, r := range []sub{{"a.b", "", 2}, {"a.c", "", 1}, {"a", "", 1}, {"a.b.c", "", 1}, {"a.b", "r", 1}, {"a.*", "", 1}, {"a.>", "", 1}} {
		if err := l.Remove(r.subject, r.queue, r.v); !errors.Is(err, ErrNotFound) {
			t.Errorf("Remove(%q, %q, %d) = %v, want ErrNotFound", r.subject, r.queue, r.v, err)
		}
	}
	if got, w := canon(l.Match("a.b")), want([]int{1, 1}, "q=1"); got != w {
		t.Fatalf("Match = %s, want %s", got, w)
	}
	mustRemove(t, l, "a.b", "", 1)
	if got, w := canon(l.Match("a.b")), want([]int{1}, "q=1"); got != w {
		t.Fatalf("after one Remove: Match = %s, want %s", got, w)
	}
	mustRemove(t, l, "a.b", "", 1)
	mustRemove(t, l, "a.b", "q", 1)
	if err := l.Remove("a.b", "q", 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove of a removed value = %v, want ErrNotFound", err)
	}
	if got := canon(l.Match("a.b")); got != want(nil) {
		t.Errorf("Match after removing all = %s", got)
	}
	if l.HasInterest([]byte("a.b")) || l.Count() != 0 {
		t.Errorf("HasInterest = %v, Count = %d after removing all", l.HasInterest([]byte("a.b")), l.Count())
	}
}

// TestPrune checks that removing every subscription leaves the trie as
// new, whatever the order of removal.
func TestPrune(t *testing.T) {
	subjects := []string{"a", "a.b", "a.b.c", "a.*", "a.*.c", "a.>", "*", ">", "*.b.>", "x.y.z.w"}
	for _, reverse := range []bool{false, true} {
		l := New[int]()
		for i, s := range subjects {
			mustInsert(t, l, s, "", i)
			mustInsert(t, l, s, "g", i)
		}
		order := slices.Clone(subjects)
		if reverse {
			slices.Reverse(order)
		}
		for _, s := range order {
			i := slices.Index(subjects, s)
			mustRemove(t, l, s, "", i)
			mustRemove(t, l, s, "g", i)
		}
		r := l.root
		if len(r.literal) != 0 || r.literal != nil || r.star != nil || r.rest != nil || r.hasSubs() {
			t.Errorf("reverse=%v: root not empty after removing all: %+v", reverse, r)
		}
	}
}

func TestAll(t *testing.T) {
	l := New[int]()
	subs := []sub{{"a", "", 1}, {"a", "", 1}, {"a.*", "q", 2}, {"a.>", "", 3}, {"b.c", "q", 4}, {"b.c", "r", 4}}
	for _, s := range subs {
		mustInsert(t, l, s.subject, s.queue, s.v)
	}
	var got []sub
	l.All(func(subject, queue string, v int) {
		got = append(got, sub{subject, queue, v})
		// fn runs without the lock: using the List must not deadlock.
		mustInsert(t, l, "during.all", "", v)
	})
	key := func(s sub) string { return fmt.Sprintf("%s|%s|%d", s.subject, s.queue, s.v) }
	var g, w []string
	for _, s := range got {
		g = append(g, key(s))
	}
	for _, s := range subs {
		w = append(w, key(s))
	}
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Errorf("All gave %v, want %v", g, w)
	}
}

// TestResultsNotMutated checks that results handed out stay as they were
// after the changes that make them stale, and that a caller appending to
// a result's slices cannot affect another caller's.
func TestResultsNotMutated(t *testing.T) {
	l := New[int]()
	mustInsert(t, l, "a.b", "", 1)
	mustInsert(t, l, "a.*", "g", 2)
	r := l.Match("a.b")
	before := canon(r)
	mustInsert(t, l, "a.b", "", 3)
	mustInsert(t, l, "a.>", "g", 4)
	mustRemove(t, l, "a.b", "", 1)
	if got := canon(r); got != before {
		t.Errorf("old result changed from %s to %s", before, got)
	}
	r2 := l.Match("a.b")
	if got, w := canon(r2), want([]int{3}, "g=2,4"); got != w {
		t.Fatalf("Match = %s, want %s", got, w)
	}
	r3 := l.Match("a.b")
	if r3 != r2 {
		t.Errorf("second Match was not served from the cache")
	}
	_ = append(r2.Plain, 99)
	_ = append(r2.Groups[0].Members, 99)
	_ = append(r2.Groups, Group[int]{Name: "x"})
	if got, w := canon(r3), want([]int{3}, "g=2,4"); got != w {
		t.Errorf("appending to a result changed the shared one: %s, want %s", got, w)
	}
}

// TestCacheBounds checks the cache's limits on entries and values, and
// that a result too big to cache is still right.
func TestCacheBounds(t *testing.T) {
	l := New[int]()
	l.cache.maxEntries, l.cache.maxValues = 8, 20
	for i := range 10 {
		mustInsert(t, l, "a.>", "", i)
	}
	for i := range 100 {
		s := fmt.Sprintf("a.%d", i)
		if got := len(l.Match(s).Plain); got != 10 {
			t.Fatalf("Match(%q) has %d values, want 10", s, got)
		}
		if len(l.cache.entries) > 2 || l.cache.values > 20 {
			t.Fatalf("cache holds %d entries, %d values; want ≤ 2, ≤ 20", len(l.cache.entries), l.cache.values)
		}
	}
	for i := range 100 {
		l.Match(fmt.Sprintf("b.%d", i)) // empty results: bounded by entries
		if len(l.cache.entries) > 8 {
			t.Fatalf("cache holds %d entries, want ≤ 8", len(l.cache.entries))
		}
	}
	for i := 10; i < 30; i++ {
		mustInsert(t, l, "a.>", "", i)
	}
	if got := len(l.Match("a.x").Plain); got != 30 {
		t.Fatalf("Match over the value bound has %d values, want 30", got)
	}
	if _, ok := l.cache.index["a.x"]; ok {
		t.Errorf("a result over the value bound was cached")
	}
	all := make([]int, 30)
	for i := range all {
		all[i] = i
	}
	checkCache(t, &l.cache, func(s string) string {
		if strings.HasPrefix(s, "a.") {
			return want(all)
		}
		return want(nil)
	})
}

func TestMatchBytesNoAllocOnHit(t *testing.T) {
	l := New[int]()
	mustInsert(t, l, "foo.*", "", 1)
	mustInsert(t, l, "foo.>", "q", 2)
	subj := []byte("foo.bar")
	l.MatchBytes(subj)
	if n := testing.AllocsPerRun(100, func() { l.MatchBytes(subj) }); n != 0 {
		t.Errorf("MatchBytes on a cache hit: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { l.HasInterest([]byte("foo.baz.q")) }); n != 0 {
		t.Errorf("HasInterest on a miss: %v allocations, want 0", n)
	}
}

func mustInsert(t testing.TB, l *List[int], subject, queue string, v int) {
	t.Helper()
	if err := l.Insert(subject, queue, v); err != nil {
		t.Fatalf("Insert(%q, %q, %d): %v", subject, queue, v, err)
	}
}

func mustRemove(t testing.TB, l *List[int], subject, queue string, v int) {
	t.Helper()
	if err := l.Remove(subject, queue, v); err != nil {
		t.Fatalf("Remove(%q, %q, %d): %v", subject, queue, v, err)
	}
}

// weight returns the number of values r holds.
func weight(r *Result[int]) int {
	n := len(r.Plain)
	for _, g := range r.Groups {
		n += len(g.Members)
	}
	return n
}
