package sublist

import (
	"errors"
	"testing"
)

// FuzzSubjects checks Insert's validation and Match against the naive
// versions for arbitrary subjects: a subscription is accepted exactly
// when naiveValid says so, and then matches a published subject exactly
// when naiveMatch says so.
func FuzzSubjects(f *testing.F) {
	for _, s := range [][2]string{
		{"foo.*", "foo.bar"}, {"foo.>", "foo.bar.baz"}, {">", "a"}, {"a*", "a*"},
		{"a..b", "a.b"}, {"a.>.b", "a.x.b"}, {"a b", "a b"}, {"*.*", "a.b"}, {"", ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, subject string) {
		l := New[int]()
		err := l.Insert(pattern, "", 1)
		if valid := naiveValid(pattern, ""); valid != (err == nil) || (!valid && !errors.Is(err, ErrInvalidSubject)) {
			t.Fatalf("Insert(%q) = %v, naive valid %v", pattern, err, valid)
		}
		if err != nil {
			return
		}
		want := naiveMatch(pattern, subject) && literalOK(subject)
		for range 2 { // miss, then hit
			if got := len(l.Match(subject).Plain) == 1; got != want {
				t.Fatalf("%q matches %q: %v, naive %v", pattern, subject, got, want)
			}
			if got := l.HasInterest([]byte(subject)); got != want {
				t.Fatalf("HasInterest: %q matches %q: %v, naive %v", pattern, subject, got, want)
			}
		}
		// Invalidation: a cached result of subject is dropped by a change
		// to pattern exactly when pattern matches subject.
		if literalOK(subject) {
			c := newCache[int](4, 100)
			c.add(subject, &Result[int]{})
			c.add("zz.other", &Result[int]{})
			c.invalidate(pattern)
			_, kept := c.index[subject]
			if dropped := !kept; dropped != want && subject != "zz.other" {
				t.Fatalf("change to %q dropped cached %q: %v, naive match %v", pattern, subject, dropped, want)
			}
		}
		if err := l.Remove(pattern, "", 1); err != nil || !l.root.empty() {
			t.Fatalf("Remove(%q): %v, root empty %v", pattern, err, l.root.empty())
		}
	})
}
