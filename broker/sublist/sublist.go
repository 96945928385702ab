package sublist

import (
	"errors"
	"slices"
	"strings"
	"sync"
)

var (
	// ErrInvalidSubject is returned by Insert and Remove for a subject that
	// cannot be subscribed to: empty, an empty token, whitespace, or ">"
	// before the last token; and for a queue group name with whitespace.
	// The returned error wraps it with the reason.
	ErrInvalidSubject = errors.New("sublist: invalid subject")
	// ErrNotFound is returned by Remove when the (subject, queue, value)
	// is not stored.
	ErrNotFound = errors.New("sublist: subscription not found")
)

// Cache bounds: see cache.
const (
	defaultCacheEntries = 4096
	defaultCacheValues  = 1 << 20
)

// List is a concurrency-safe index of subscriptions by subject with NATS
// wildcards: "*" matches exactly one token, ">" one or more trailing
// tokens; each must be a whole token ("a*" is a literal token). Values are
// caller handles (e.g. *subscription or *route), compared with ==.
//
// Create one with New; the zero List is not usable.
type List[T comparable] struct {
	mu sync.RWMutex // guards every field below

	// root is the trie's root: it stands for the empty subject and never
	// holds subscriptions itself, and it is never pruned.
	root *node[T]
	// count is the number of stored subscriptions (copies included).
	count int
	// gen is bumped by every change to the trie. A cache miss computed
	// under the read lock is cached only if gen has not moved since, so a
	// result computed before a change is never cached after it.
	gen uint64

	// cache holds the results of recent matches (see cache).
	cache cache[T]

	// empty is the result of every subject that matches nothing; shared.
	empty *Result[T]
}

// node is one token of the trie: the subscriptions whose subject ends here
// and the children for the next token. A node other than the root exists
// only while it has subscriptions or children (Remove prunes the rest).
type node[T comparable] struct {
	literal map[string]*node[T] // children by literal token; nil when none
	star    *node[T]            // the "*" child, or nil
	rest    *node[T]            // the ">" child, or nil; it never has children

	// subject is the subscription subject this node stands for ("" for
	// the root). It and the tokens keyed in the parent share one copy of
	// the subject, made by Insert, never the caller's memory.
	subject string
	plain   bag[T]
	groups  []*group[T] // queue groups subscribed here, none empty
}

// group is the members of one queue group on one node.
type group[T comparable] struct {
	name    string
	members bag[T]
}

// New returns an empty List.
func New[T comparable]() *List[T] {
	return &List[T]{
		root:  &node[T]{},
		cache: newCache[T](defaultCacheEntries, defaultCacheValues),
		empty: &Result[T]{},
	}
}

// Insert adds v under subject, in queue group queue ("" = plain
// subscription). Inserting the same (subject, queue, v) twice stores it
// twice (Remove removes one). It returns an error wrapping
// ErrInvalidSubject if the subject or queue name is invalid.
func (l *List[T]) Insert(subject, queue string, v T) error {
	if err := checkSubscription(subject, queue); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()

	n := l.root
	var owned string // our copy of subject, made when the first node is
	for off := 0; ; {
		tok, _, more := strings.Cut(subject[off:], ".")
		end := off + len(tok)
		c := n.child(tok)
		if c == nil {
			if owned == "" {
				owned = strings.Clone(subject)
			}
			c = &node[T]{subject: owned[:end]}
			n.setChild(owned[off:end], c)
		}
		n = c
		if !more {
			break
		}
		off = end + 1
	}
	if queue == "" {
		n.plain.add(v)
	} else {
		g := n.group(queue)
		if g == nil {
			g = &group[T]{name: strings.Clone(queue)}
			n.groups = append(n.groups, g)
		}
		g.members.add(v)
	}
	l.count++
	l.changed(subject)
	return nil
}

// Remove removes one (subject, queue, v). It returns ErrNotFound when
// none is stored, and an error wrapping ErrInvalidSubject for a subject or
// queue name that Insert would refuse.
func (l *List[T]) Remove(subject, queue string, v T) error {
	if err := checkSubscription(subject, queue); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()

	// path[i] is the node reached after i tokens, toks[i] the token from
	// path[i] to path[i+1]; the arrays keep common depths off the heap.
	var pathBuf [16]*node[T]
	var toksBuf [16]string
	path, toks := append(pathBuf[:0], l.root), toksBuf[:0]
	for off := 0; ; {
		tok, _, more := strings.Cut(subject[off:], ".")
		c := path[len(path)-1].child(tok)
		if c == nil {
			return ErrNotFound
		}
		path, toks = append(path, c), append(toks, tok)
		if !more {
			break
		}
		off += len(tok) + 1
	}

	n := path[len(path)-1]
	if queue == "" {
		if !n.plain.remove(v) {
			return ErrNotFound
		}
	} else {
		g := n.group(queue)
		if g == nil || !g.members.remove(v) {
			return ErrNotFound
		}
		if g.members.len() == 0 {
			n.dropGroup(g)
		}
	}
	for i := len(path) - 1; i > 0 && path[i].empty(); i-- {
		path[i-1].setChild(toks[i-1], nil)
	}
	l.count--
	l.changed(subject)
	return nil
}

// changed records a change to the subscriptions of subject: it moves the
// generation and drops the cached results that subject matches. Called
// with l.mu held for writing.
func (l *List[T]) changed(subject string) {
	l.gen++
	l.cache.invalidate(subject)
}

// Count returns the number of stored subscriptions (copies included).
func (l *List[T]) Count() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.count
}

// All calls fn for each stored (subject, queue, v), once per copy, in no
// particular order. It works on a snapshot taken when it is called, and
// calls fn without holding the List's lock, so fn may use the List (its
// changes are not seen by this call).
func (l *List[T]) All(fn func(subject, queue string, v T)) {
	type sub struct {
		subject, queue string
		v              T
	}
	l.mu.RLock()
	subs := make([]sub, 0, l.count)
	l.root.walk(func(n *node[T]) {
		for _, v := range n.plain.items {
			subs = append(subs, sub{n.subject, "", v})
		}
		for _, g := range n.groups {
			for _, v := range g.members.items {
				subs = append(subs, sub{n.subject, g.name, v})
			}
		}
	})
	l.mu.RUnlock()
	for _, s := range subs {
		fn(s.subject, s.queue, s.v)
	}
}

// child returns n's child for the token tok, or nil.
func (n *node[T]) child(tok string) *node[T] {
	switch tok {
	case "*":
		return n.star
	case ">":
		return n.rest
	default:
		return n.literal[tok]
	}
}

// setChild makes c n's child for tok; a nil c removes the child.
func (n *node[T]) setChild(tok string, c *node[T]) {
	switch {
	case tok == "*":
		n.star = c
	case tok == ">":
		n.rest = c
	case c != nil:
		if n.literal == nil {
			n.literal = make(map[string]*node[T])
		}
		n.literal[tok] = c
	default:
		delete(n.literal, tok)
		if len(n.literal) == 0 {
			n.literal = nil // a map never shrinks: let it go
		}
	}
}

// group returns n's queue group name, or nil.
func (n *node[T]) group(name string) *group[T] {
	for _, g := range n.groups {
		if g.name == name {
			return g
		}
	}
	return nil
}

// dropGroup removes the queue group g from n, keeping the others' order.
func (n *node[T]) dropGroup(g *group[T]) {
	if i := slices.Index(n.groups, g); i >= 0 {
		n.groups = slices.Delete(n.groups, i, i+1) // clears the freed slot
	}
	if len(n.groups) == 0 {
		n.groups = nil
	}
}

// hasSubs reports whether any subscription ends at n.
func (n *node[T]) hasSubs() bool { return n.plain.len() > 0 || len(n.groups) > 0 }

// empty reports whether n can be pruned: no subscriptions, no children.
func (n *node[T]) empty() bool {
	return !n.hasSubs() && len(n.literal) == 0 && n.star == nil && n.rest == nil
}

// walk calls fn for n and every node below it.
func (n *node[T]) walk(fn func(*node[T])) {
	fn(n)
	for _, c := range n.literal {
		c.walk(fn)
	}
	if n.star != nil {
		n.star.walk(fn)
	}
	if n.rest != nil {
		n.rest.walk(fn)
	}
}
