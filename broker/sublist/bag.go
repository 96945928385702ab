package sublist

// bagIndexMin is the size above which a bag keeps an index for O(1)
// removal; at or below it, removal scans the items (cheaper than a map).
const bagIndexMin = 32

// bag is a multiset of values. The values live in one slice, so that a
// match result copies them with one copy; once the bag is large, an index
// makes removal O(1) (swap with the last item) instead of a scan.
type bag[T comparable] struct {
	// items holds every copy of every value, in no particular order.
	items []T
	// pos indexes items while len(items) > bagIndexMin/2 after having
	// exceeded bagIndexMin (hysteresis); nil otherwise. For each distinct
	// value: the index in items of one of its copies, and how many copies
	// items holds.
	pos map[T]slot
}

// slot is what bag.pos knows of one distinct value.
type slot struct {
	at int // index in items of one copy
	n  int // number of copies in items, > 0
}

// len returns the number of items, copies included.
func (b *bag[T]) len() int { return len(b.items) }

// add adds one copy of v.
func (b *bag[T]) add(v T) {
	b.items = append(b.items, v)
	switch {
	case b.pos != nil:
		s, ok := b.pos[v]
		if !ok {
			s.at = len(b.items) - 1
		}
		s.n++
		b.pos[v] = s
	case len(b.items) > bagIndexMin:
		b.pos = make(map[T]slot, len(b.items))
		for i, x := range b.items {
			s, ok := b.pos[x]
			if !ok {
				s.at = i
			}
			s.n++
			b.pos[x] = s
		}
	}
}

// remove removes one copy of v and reports whether there was one.
func (b *bag[T]) remove(v T) bool {
	if b.pos == nil {
		for i := len(b.items) - 1; i >= 0; i-- {
			if b.items[i] == v {
				b.deleteAt(i)
				b.shrink()
				return true
			}
		}
		return false
	}
	s, ok := b.pos[v]
	if !ok {
		return false
	}
	last := len(b.items) - 1
	if s.at != last {
		// The last item moves into the hole; if the index pointed at
		// it, point it at its new place.
		if moved := b.items[last]; moved != v {
			if ms := b.pos[moved]; ms.at == last {
				ms.at = s.at
				b.pos[moved] = ms
			}
		}
	}
	b.deleteAt(s.at)
	if s.n--; s.n == 0 {
		delete(b.pos, v)
	} else {
		// Duplicates: find a copy that is still there (rare, so a scan).
		if s.at >= len(b.items) || b.items[s.at] != v {
			s.at = b.find(v)
		}
		b.pos[v] = s
	}
	b.shrink()
	return true
}

// deleteAt removes items[i] by moving the last item into its place.
func (b *bag[T]) deleteAt(i int) {
	last := len(b.items) - 1
	b.items[i] = b.items[last]
	var zero T
	b.items[last] = zero // let the garbage collector have it
	b.items = b.items[:last]
}

// find returns the index of a copy of v in items, or -1.
func (b *bag[T]) find(v T) int {
	for i, x := range b.items {
		if x == v {
			return i
		}
	}
	return -1
}

// shrink gives memory back after removals, so that churn does not keep
// a bag at its high-water mark: it drops the index when the bag is small
// again and reallocates items when they use a quarter of their capacity.
func (b *bag[T]) shrink() {
	n := len(b.items)
	if b.pos != nil && n <= bagIndexMin/2 {
		b.pos = nil
	}
	if c := cap(b.items); c > 16 && n <= c/4 {
		items := make([]T, n, 2*n)
		copy(items, b.items)
		b.items = items
	}
	if n == 0 {
		b.items = nil
	}
}
