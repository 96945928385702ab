package sublist

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"

	"pgregory.net/rapid"
)

// naiveValid is the obvious reading of §1.7 for subscription subjects.
func naiveValid(subject, queue string) bool {
	toks := strings.Split(subject, ".")
	for i, tok := range toks {
		if tok == "" || strings.IndexFunc(tok, isSpace) >= 0 || (tok == ">" && i != len(toks)-1) {
			return false
		}
	}
	return strings.IndexFunc(queue, isSpace) < 0
}

// isSpace is the standard library's idea of whitespace.
func isSpace(r rune) bool { return unicode.IsSpace(r) }

// naiveMatch is the obvious reading of §1.7: does the subscription subject
// pattern match the published subject?
func naiveMatch(pattern, subject string) bool {
	st := strings.Split(subject, ".")
	if slices.Contains(st, "") {
		return false
	}
	pt := strings.Split(pattern, ".")
	for i, p := range pt {
		if p == ">" {
			return len(st) > i
		}
		if i >= len(st) || (p != "*" && p != st[i]) {
			return false
		}
	}
	return len(pt) == len(st)
}

// model is the List as a slice of subscriptions, answering by scanning.
type model struct{ subs []sub }

func (m *model) remove(s sub) bool {
	i := slices.Index(m.subs, s)
	if i < 0 {
		return false
	}
	m.subs = slices.Delete(m.subs, i, i+1)
	return true
}

// match returns the canon form of what Match(subject) must return.
func (m *model) match(subject string) string {
	r := &Result[int]{}
	for _, s := range m.subs {
		if !naiveMatch(s.subject, subject) {
			continue
		}
		if s.queue == "" {
			r.Plain = append(r.Plain, s.v)
			continue
		}
		i := slices.IndexFunc(r.Groups, func(g Group[int]) bool { return g.Name == s.queue })
		if i < 0 {
			r.Groups = append(r.Groups, Group[int]{Name: s.queue})
			i = len(r.Groups) - 1
		}
		r.Groups[i].Members = append(r.Groups[i].Members, s.v)
	}
	return canon(r)
}

// handedOut is a result returned earlier and what it held then.
type handedOut struct {
	subject string
	r       *Result[int]
	was     string
}

var (
	subTokens = []string{"a", "a", "b", "b", "c", "*", "*", ">", ">"}
	badTokens = []string{"", "x y", "\t"}
	pubTokens = []string{"a", "a", "b", "b", "c", "d"}
	queues    = []string{"", "", "q1", "q2"}
)

// subjectGen draws subscription subjects: mostly valid, with "*" and ">"
// (and so sometimes ">" before the end), and now and then an empty or
// whitespace token.
func subjectGen() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		toks := rapid.SliceOfN(rapid.SampledFrom(subTokens), 1, 4).Draw(t, "tokens")
		if rapid.IntRange(0, 15).Draw(t, "bad") == 0 {
			i := rapid.IntRange(0, len(toks)-1).Draw(t, "badAt")
			toks[i] = rapid.SampledFrom(badTokens).Draw(t, "badToken")
		}
		return strings.Join(toks, ".")
	})
}

// pubGen draws published subjects: literal tokens, now and then "*" as a
// literal token or an empty token.
func pubGen() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		toks := rapid.SliceOfN(rapid.SampledFrom(pubTokens), 1, 4).Draw(t, "tokens")
		if rapid.IntRange(0, 10).Draw(t, "odd") == 0 {
			i := rapid.IntRange(0, len(toks)-1).Draw(t, "oddAt")
			toks[i] = rapid.SampledFrom([]string{"*", ">", ""}).Draw(t, "oddToken")
		}
		return strings.Join(toks, ".")
	})
}

// TestProperty runs random Insert/Remove/Match sequences against the model.
// After every step, every cached result must equal the model's answer
// (the cache is never stale), and every result handed out earlier must
// still hold what it held then (results are never mutated).
func TestProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := New[int]()
		l.cache.maxEntries = rapid.SampledFrom([]int{1, 3, 4096}).Draw(t, "maxEntries")
		l.cache.maxValues = rapid.SampledFrom([]int{2, 8, 1 << 20}).Draw(t, "maxValues")
		var m model
		var out []handedOut
		pub := pubGen()

		matched := func(subject string, r *Result[int], how string) {
			if got, want := canon(r), m.match(subject); got != want {
				t.Fatalf("%s(%q) = %s, model %s", how, subject, got, want)
			}
			for _, g := range r.Groups {
				if len(g.Members) == 0 {
					t.Fatalf("%s(%q): empty group %q", how, subject, g.Name)
				}
			}
			if len(out) < 64 {
				out = append(out, handedOut{subject, r, canon(r)})
			}
		}

		t.Repeat(map[string]func(*rapid.T){
			"insert": func(t *rapid.T) {
				s := sub{subjectGen().Draw(t, "subject"), rapid.SampledFrom(queues).Draw(t, "queue"), rapid.IntRange(0, 3).Draw(t, "v")}
				err := l.Insert(s.subject, s.queue, s.v)
				if !naiveValid(s.subject, s.queue) {
					if !errors.Is(err, ErrInvalidSubject) {
						t.Fatalf("Insert(%+v) = %v, want ErrInvalidSubject", s, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Insert(%+v): %v", s, err)
				}
				m.subs = append(m.subs, s)
			},
			"removeStored": func(t *rapid.T) {
				if len(m.subs) == 0 {
					return // nothing stored: a no-op step
				}
				s := rapid.SampledFrom(m.subs).Draw(t, "sub")
				if err := l.Remove(s.subject, s.queue, s.v); err != nil {
					t.Fatalf("Remove(%+v): %v", s, err)
				}
				m.remove(s)
			},
			"removeAny": func(t *rapid.T) {
				s := sub{subjectGen().Draw(t, "subject"), rapid.SampledFrom(queues).Draw(t, "queue"), rapid.IntRange(0, 3).Draw(t, "v")}
				err := l.Remove(s.subject, s.queue, s.v)
				switch {
				case !naiveValid(s.subject, s.queue):
					if !errors.Is(err, ErrInvalidSubject) {
						t.Fatalf("Remove(%+v) = %v, want ErrInvalidSubject", s, err)
					}
				case m.remove(s):
					if err != nil {
						t.Fatalf("Remove(%+v): %v", s, err)
					}
				default:
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("Remove(%+v) = %v, want ErrNotFound", s, err)
					}
				}
			},
			"match": func(t *rapid.T) {
				s := pub.Draw(t, "subject")
				matched(s, l.Match(s), "Match")
			},
			"matchBytes": func(t *rapid.T) {
				s := pub.Draw(t, "subject")
				matched(s, l.MatchBytes([]byte(s)), "MatchBytes")
			},
			"matchBytesOnce": func(t *rapid.T) {
				s := pub.Draw(t, "subject")
				matched(s, l.MatchBytesOnce([]byte(s)), "MatchBytesOnce")
			},
			"hasInterest": func(t *rapid.T) {
				s := pub.Draw(t, "subject")
				if got, want := l.HasInterest([]byte(s)), m.match(s) != canon(&Result[int]{}); got != want {
					t.Fatalf("HasInterest(%q) = %v, model %v", s, got, want)
				}
			},
			"all": func(t *rapid.T) {
				var got []string
				l.All(func(subject, queue string, v int) { got = append(got, fmt.Sprint(sub{subject, queue, v})) })
				var want []string
				for _, s := range m.subs {
					want = append(want, fmt.Sprint(s))
				}
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("All gave %v, model %v", got, want)
				}
			},
			"": func(t *rapid.T) {
				if got := l.Count(); got != len(m.subs) {
					t.Fatalf("Count() = %d, model %d", got, len(m.subs))
				}
				checkCache(t, &l.cache, m.match)
				for _, h := range out {
					if got := canon(h.r); got != h.was {
						t.Fatalf("result of %q changed from %s to %s", h.subject, h.was, got)
					}
				}
				if len(m.subs) == 0 && !l.root.empty() {
					t.Fatalf("trie not pruned with nothing stored: %+v", l.root)
				}
			},
		})
	})
}

// TestBagProperty checks bag against a plain multiset, across the index
// threshold in both directions.
func TestBagProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var b bag[int]
		want := map[int]int{}
		n := 0
		vals := rapid.IntRange(0, rapid.SampledFrom([]int{3, 40, 200}).Draw(t, "distinct"))
		t.Repeat(map[string]func(*rapid.T){
			"addMany": func(t *rapid.T) {
				for range rapid.IntRange(1, 50).Draw(t, "count") {
					v := vals.Draw(t, "v")
					b.add(v)
					want[v]++
					n++
				}
			},
			"remove": func(t *rapid.T) {
				v := vals.Draw(t, "v")
				if got := b.remove(v); got != (want[v] > 0) {
					t.Fatalf("remove(%d) = %v, multiset has %d", v, got, want[v])
				}
				if want[v] > 0 {
					want[v]--
					n--
				}
			},
			"removeMany": func(t *rapid.T) {
				for range rapid.IntRange(1, 50).Draw(t, "count") {
					v := vals.Draw(t, "v")
					if b.remove(v) {
						want[v]--
						n--
					}
				}
			},
			"": func(t *rapid.T) {
				if b.len() != n {
					t.Fatalf("len = %d, want %d", b.len(), n)
				}
				got := map[int]int{}
				for _, v := range b.items {
					got[v]++
				}
				for v, c := range want {
					if got[v] != c {
						t.Fatalf("value %d: %d copies, want %d", v, got[v], c)
					}
				}
				if b.pos != nil {
					if len(b.pos) != len(got) {
						t.Fatalf("index has %d values, items %d", len(b.pos), len(got))
					}
					for v, s := range b.pos {
						if s.n != got[v] || b.items[s.at] != v {
							t.Fatalf("index of %d: %+v, items hold %d copies, items[at] = %d", v, s, got[v], b.items[s.at])
						}
					}
				} else if n > bagIndexMin {
					t.Fatalf("no index at %d items", n)
				}
			},
		})
	})
}

// checkCache checks c's invariants, and that every entry is what match
// (the model) says.
func checkCache(t interface{ Fatalf(string, ...any) }, c *cache[int], match func(string) string) {
	values := 0
	for i, e := range c.entries {
		if got, want := canon(e.r), match(e.subject); got != want {
			t.Fatalf("stale cache entry %q: %s, model %s", e.subject, got, want)
		}
		if e.values != weight(e.r) {
			t.Fatalf("cache entry %q: weight %d, holds %d values", e.subject, e.values, weight(e.r))
		}
		if j, ok := c.index[e.subject]; !ok || j != i {
			t.Fatalf("cache entry %d (%q) indexed at %d, %v", i, e.subject, j, ok)
		}
		values += e.values
	}
	if len(c.index) != len(c.entries) || values != c.values || len(c.entries) > c.maxEntries || values > c.maxValues {
		t.Fatalf("cache: %d entries (%d indexed), %d values (counted %d); bounds %d, %d",
			len(c.entries), len(c.index), values, c.values, c.maxEntries, c.maxValues)
	}
}
