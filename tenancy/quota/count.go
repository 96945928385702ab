package quota

import (
	"math"
	"sort"
	"time"
)

// countRound is a region's state of one tenant's count k (see
// tickCount).
type countRound struct {
	// allot is what the region may hold of the count: what it reports to
	// the other regions as its reservation (Cap), never less than its
	// brokers' reservation. It grows only by a proposal the other regions
	// have echoed; set says it was computed once.
	allot float64
	set   bool
	// pending is room proposed to the other regions and not handed out
	// yet; pendingAt is the Sent of the tick that proposed it (0: none).
	pending   float64
	pendingAt int64
}

// brokerCount is what a coordinator keeps of one broker's count.
type brokerCount struct {
	cap     float64 // the cap last sent to it (capSet: one was)
	capSet  bool
	refused float64 // its refusals when last looked at (seen: once)
	seen    bool
	needAt  time.Time // when they last grew (my clock; zero: never)
}

// countParty is a region sharing a count's free room (shareRoom).
type countParty struct {
	region string
	weight float64 // its static share
	use    float64
	need   float64 // its brokers refused lately
	cap    float64 // its cap on the count (0: none)
}

// tickCount runs one round of count k (connections, topics, consumers)
// for one tenant: the region's target, its allotment (grown by
// proposals, released down to the target), the caps of its brokers
// within the allotment, and its report to the other regions.
//
// A broker's reservation is the larger of its use, the cap it reported
// holding and every cap sent to it since the newest message of ours it
// has echoed (it may hold any of those); the region's is their sum, plus
// the static share of each broker never heard from. Another region
// counts as its reported allotment plus its pending proposal, or, not
// heard from lately or just heard again, the larger of that and its
// static share.
//
// The target is the region's use plus its part of the mesh's free room
// (the limit less every region's use; a region not heard from lately, or
// just heard again, counts with all it may hold and shares none of it):
// the whole units in proportion to the static shares of the regions
// sharing it, the odd units to a region whose brokers were refused
// lately, then to the one using more, then by name (shareRoom: every
// coordinator with the same figures computes the same split). So the
// room is held ahead of demand, where it was used last. The region
// releases only what it holds above the larger of its target and its
// part with the silent regions sharing by their last figures (room
// released for their sake would help nobody: the others count them at
// those or more).
//
// Below its target, the region proposes the room it lacks, reports it
// as pending, and adds it to its allotment only once every other region
// has echoed that report (so each counts it), or, for a region that has
// not, only 2 × Stale later and up to the region's static share (by then
// that region counts at least the static share: see the package doc).
// At each hand-out it checks the room against the limit less its
// allotment and the others' (with the pending proposals of the regions
// before it in name order: a later one checks against ours), so two
// regions proposing at once never hand out more than the limit between
// them; what does not fit yet stays proposed, shrinking as the target
// does. Above its target, it releases the rest: it lowers its brokers'
// caps, and its allotment follows as they echo them.
//
// Within the allotment, each fresh broker's cap is its use plus its part
// of the region's spare: evenly, the odd units to the brokers refused
// lately (within 2 × Stale), then to those holding more now
// (distribute).
//
// Storage gets no caps: its mesh-wide use is reported to the brokers and
// each refuses once it reaches the limit (tickStorage).
func (c *Coordinator) tickCount(r *round, name string, l Limits, k Kind) {
	if k == Storage {
		c.tickStorage(r, name, l, k)
		return
	}
	now, sent := r.now, nanos(r.now)
	limit := l.Mesh[k]
	n := len(c.cfg.Regions)
	static := staticShare(l, c.cfg.Region, k, n)
	floorBase := math.Floor(static / float64(c.cfg.Brokers))
	st := c.countState(name, k)
	// A new coordinator acts once the brokers have reported (not in its
	// first two intervals: it knows too little).
	ready := now.Sub(c.started) >= 2*c.cfg.Interval

	need := c.noteRefusals(r, name, k)
	reserved := c.reserved(r, name, k, floorBase)
	if !st.set || st.allot < reserved {
		st.allot, st.set = reserved, true
	}
	var use float64
	for _, b := range r.brokers {
		if e := b.last[name]; e != nil {
			use += e.Use[k]
		}
	}

	// The other regions as a hand-out checks them (before), the free room
	// and the regions that share it.
	me := countParty{region: c.cfg.Region, weight: static, use: use, need: need, cap: l.regionCap(c.cfg.Region, k)}
	parties, free := []countParty{me}, limit-use
	// As the region keeps room: the regions not heard from lately share
	// it too, by their last figures.
	kept, keptFree := []countParty{me}, limit-use
	var before float64
	acked := true
	for _, reg := range c.cfg.Regions {
		if reg == c.cfg.Region {
			continue
		}
		s := staticShare(l, reg, k, n)
		p := r.latest[reg]
		if p == nil || p.echo < st.pendingAt {
			acked = false
		}
		if p != nil && p.count(name, k).set {
			f := p.count(name, k)
			keptFree -= f.use
			kept = append(kept, countParty{region: reg, weight: s, use: f.use, need: f.need, cap: l.regionCap(reg, k)})
		}
		if p == nil || !c.fresh(p, now) || c.relearning(p, now) || !p.count(name, k).set {
			// Unreachable, or just back: at least its static share, and at
			// least what any incarnation of it reported last; none of the
			// free room is its.
			v := s
			for _, q := range r.regions {
				if q.region == reg {
					v = math.Max(v, regionCount(q, name, k))
				}
			}
			before += v
			free -= v
			if p == nil || !p.count(name, k).set {
				keptFree -= v
			}
			continue
		}
		f := p.count(name, k)
		before += math.Max(f.use, f.cap)
		if reg < c.cfg.Region {
			before += f.want
		}
		free -= f.use
		parties = append(parties, countParty{region: reg, weight: s, use: f.use, need: f.need, cap: l.regionCap(reg, k)})
	}
	target := use + shareRoom(free, parties)[0]
	keep := math.Max(target, use+shareRoom(keptFree, kept)[0])

	releasing := false
	if st.pendingAt != 0 {
		// A proposal only shrinks (to what the region still lacks) until it
		// is handed out.
		st.pending = math.Min(st.pending, math.Max(0, math.Floor(target-st.allot)))
		waited := now.Sub(fromNanos(st.pendingAt)) >= 2*c.cfg.Stale
		if st.pending >= 1 && (acked || waited) {
			h := st.pending
			if !acked {
				h = math.Min(h, math.Max(0, static-st.allot))
			}
			h = math.Floor(math.Min(h, math.Max(0, limit-st.allot-before)))
			st.allot += h
			st.pending -= h
			if !acked {
				st.pending = 0 // the next one waits again
			}
		}
		if st.pending < 1 {
			st.pending, st.pendingAt = 0, 0
		}
	} else if ready {
		if room := math.Floor(target - st.allot); room >= 1 {
			st.pending, st.pendingAt = room, sent
		} else if st.allot > keep {
			st.allot, releasing = math.Max(reserved, keep), true
		}
	}
	if ready {
		// The brokers' caps are set within the allotment, or, when
		// releasing, within the target (the allotment follows as they
		// echo them).
		budget := st.allot
		if releasing {
			budget = keep
		}
		c.distribute(r, name, k, budget, floorBase)
		// (The caps fit in the allotment; should they not, the region
		// reports what it holds.)
		st.allot = math.Max(st.allot, c.reserved(r, name, k, floorBase))
		for _, p := range r.regions {
			if c.fresh(p, now) {
				e := r.entry(p, name)
				e.Use[k], e.Cap[k], e.Want[k], e.Demand[k] = use, st.allot, st.pending, need
				e.Caps |= 1 << k
			}
		}
	}
	// The brokers are told the mesh-wide use (for refusals).
	mesh := use
	for _, reg := range c.cfg.Regions {
		if p := r.latest[reg]; reg != c.cfg.Region && p != nil {
			mesh += p.count(name, k).use
		}
	}
	for _, b := range r.fresh {
		r.entry(b, name).Use[k] = mesh
	}
}

// shareRoom is each party's part of the whole units of free room: in
// proportion to their weights (static shares), the odd units by the
// largest remainder, ties to a party with refusals lately, then to the
// one using more, then by name; no party above its cap (what a cap
// leaves goes to the others). Deterministic, and independent of the
// parties' order.
func shareRoom(free float64, ps []countParty) []float64 {
	out := make([]float64, len(ps))
	units := math.Floor(free + 1e-9)
	open := make([]int, len(ps))
	for i := range ps {
		open[i] = i
	}
	for units >= 1 && len(open) > 0 {
		var w float64
		for _, i := range open {
			w += ps[i].weight
		}
		give := make([]float64, len(ps))
		rem := make([]float64, len(ps))
		var given float64
		for _, i := range open {
			q := units / float64(len(open))
			if w > 0 {
				q = units * ps[i].weight / w
			}
			give[i] = math.Floor(q + 1e-9)
			rem[i] = q - give[i]
			given += give[i]
		}
		order := append([]int(nil), open...)
		sort.SliceStable(order, func(a, b int) bool {
			i, j := order[a], order[b]
			if math.Abs(rem[i]-rem[j]) > 1e-9 {
				return rem[i] > rem[j]
			}
			if (ps[i].need > 0) != (ps[j].need > 0) {
				return ps[i].need > 0
			}
			if ps[i].use != ps[j].use {
				return ps[i].use > ps[j].use
			}
			return ps[i].region < ps[j].region
		})
		for a := 0; given < units && a < len(order); a++ {
			give[order[a]]++
			given++
		}
		var next []int
		for _, i := range open {
			if cp := ps[i].cap; cp > 0 && ps[i].use+out[i]+give[i] > cp {
				g := math.Max(0, math.Floor(cp-ps[i].use-out[i]))
				out[i] += g
				units -= g
				continue
			}
			next = append(next, i)
		}
		if len(next) == len(open) {
			for _, i := range open {
				out[i] += give[i]
			}
			break
		}
		open = next
	}
	return out
}

// noteRefusals notes, per fresh broker, when its refusals of count k
// last grew, and returns how many were refused lately (needs).
func (c *Coordinator) noteRefusals(r *round, name string, k Kind) float64 {
	var n float64
	for _, b := range r.fresh {
		e := b.last[name]
		if e == nil {
			continue
		}
		bc := b.countOf(name, k)
		if bc.seen && e.Refused[k] > bc.refused {
			bc.needAt = r.now
		}
		bc.refused, bc.seen = e.Refused[k], true // (lower: a restarted broker)
		if c.needs(bc, r.now) {
			n++
		}
	}
	return n
}

// needs says whether a broker was refused lately: its refusals grew
// within 2 × Stale.
func (c *Coordinator) needs(bc *brokerCount, now time.Time) bool {
	return !bc.needAt.IsZero() && now.Sub(bc.needAt) < 2*c.cfg.Stale
}

// countOf is what the coordinator keeps of broker p's count k.
func (p *cPeer) countOf(name string, k Kind) *brokerCount {
	x := p.bcounts[name]
	if x == nil {
		x = &[NumKinds]brokerCount{}
		p.bcounts[name] = x
	}
	return &x[k]
}

// regionCount is what region peer q last reported it reserves of
// tenant's count k, its pending proposal included.
func regionCount(q *cPeer, name string, k Kind) float64 {
	f := q.count(name, k)
	v := math.Max(f.use, f.cap) + f.want
	if x := q.inherited[name]; x != nil {
		v = math.Max(v, x[k])
	}
	return v
}

// countFig is a region's last report of a count: its use, its
// allotment, its pending proposal, how many of its brokers were refused
// lately.
type countFig struct {
	use, cap, want, need float64
	set                  bool
}

// count is region peer p's last report of tenant's count k.
func (p *cPeer) count(name string, k Kind) countFig {
	if x := p.counts[name]; x != nil {
		return x[k]
	}
	return countFig{}
}

// takeCounts keeps the count figures of a region's entry (those its
// Caps bits say it carries).
func (p *cPeer) takeCounts(name string, e *Entry) {
	for k := range NumKinds {
		if k.Rate() || k == Storage || e.Caps&(1<<k) == 0 {
			continue
		}
		x := p.counts[name]
		if x == nil {
			x = &[NumKinds]countFig{}
			p.counts[name] = x
		}
		x[k] = countFig{use: e.Use[k], cap: e.Cap[k], want: e.Want[k], need: e.Demand[k], set: true}
		if in := p.inherited[name]; in != nil {
			in[k] = 0 // its own figures now
		}
	}
}

// inherit passes superseded incarnation old's count figures on to the
// region's newest incarnation p, as a floor until p reports its own: a
// new coordinator cut off before it reports must not count for less
// than its predecessor did.
func (p *cPeer) inherit(old *cPeer) {
	for name, figs := range old.counts {
		x := p.inherited[name]
		if x == nil {
			x = &[NumKinds]float64{}
			p.inherited[name] = x
		}
		for k, f := range figs {
			if f.set && !p.count(name, Kind(k)).set {
				x[k] = math.Max(x[k], regionCount(old, name, Kind(k)))
			}
		}
	}
}

func (c *Coordinator) countState(name string, k Kind) *countRound {
	x := c.counts[name]
	if x == nil {
		x = &[NumKinds]countRound{}
		c.counts[name] = x
	}
	return &x[k]
}

// reserved is this region's reservation of count k (see tickCount),
// pruning the caps its brokers have moved past.
func (c *Coordinator) reserved(r *round, name string, k Kind, floorBase float64) float64 {
	var sum float64
	for _, b := range r.brokers {
		sum += c.held(b, name, k, floorBase)
	}
	if silent := c.cfg.Brokers - len(r.brokers); silent > 0 {
		sum += float64(silent) * floorBase
	}
	return sum
}

// held is broker b's reservation of count k: the larger of its use, the
// cap it reported and every cap sent to it since the newest message of
// ours it has echoed (its static share if it never reported the
// tenant), pruning the caps it has moved past.
func (c *Coordinator) held(b *cPeer, name string, k Kind, floorBase float64) float64 {
	v := floorBase
	if e := b.last[name]; e != nil {
		v = math.Max(e.Use[k], e.Cap[k])
	}
	if cs := b.caps[name]; cs != nil {
		keep := cs[k][:0]
		for _, x := range cs[k] {
			if x.sent >= b.echo {
				keep = append(keep, x)
				v = math.Max(v, x.cap)
			}
		}
		cs[k] = keep
	}
	return v
}

// distribute sets every fresh broker's cap on count k within budget
// (the region's allotment, or its target when releasing): its use plus
// its part of the spare (the budget less the brokers' use and what the
// brokers it cannot reach hold), evenly, the odd units to the brokers
// refused lately, then to those holding more spare now (so that room
// stays where it is). A lower cap is sent at once but counts only once the
// broker has echoed it; a higher one only as far as the allotment
// leaves room with every broker counted at its reservation (the
// brokers refused lately first).
func (c *Coordinator) distribute(r *round, name string, k Kind, budget, floorBase float64) {
	type bd struct {
		p              *cPeer
		bc             *brokerCount
		use, held, cur float64
		want, cap      float64
		need           bool
	}
	fixed := math.Max(0, float64(c.cfg.Brokers-len(r.brokers))) * floorBase
	var ds []*bd
	var uses float64
	for _, b := range r.brokers {
		h := c.held(b, name, k, floorBase)
		e := b.last[name]
		if e == nil || !c.fresh(b, r.now) {
			fixed += h
			continue
		}
		bc := b.countOf(name, k)
		cur := e.Cap[k]
		if bc.capSet {
			cur = bc.cap
		}
		d := &bd{p: b, bc: bc, use: e.Use[k], held: h, cur: cur, need: c.needs(bc, r.now)}
		ds = append(ds, d)
		uses += d.use
	}
	if len(ds) == 0 {
		return
	}
	spare := math.Max(0, math.Floor(budget-fixed-uses+1e-9))
	pool := append([]*bd(nil), ds...)
	sort.SliceStable(pool, func(i, j int) bool {
		if pool[i].need != pool[j].need {
			return pool[i].need
		}
		si, sj := pool[i].cur-pool[i].use, pool[j].cur-pool[j].use
		if si != sj {
			return si > sj
		}
		return pool[i].p.from < pool[j].p.from
	})
	each := math.Floor(spare / float64(len(pool)))
	odd := spare - each*float64(len(pool))
	for i, d := range pool {
		d.want = d.use + each
		if float64(i) < odd {
			d.want++
		}
	}
	// Lower first, then raise within what the allotment leaves.
	total := fixed
	for _, d := range ds {
		d.cap = math.Min(d.cur, d.want)
		total += math.Max(d.held, d.cap)
	}
	left := budget - total
	order := append([]*bd(nil), ds...)
	sort.SliceStable(order, func(i, j int) bool { return order[i].need && !order[j].need })
	for _, d := range order {
		if d.want <= d.cap {
			continue
		}
		base := math.Max(d.held, d.cap)
		x := d.want
		if x-base > left {
			x = math.Max(d.cap, math.Floor(base+math.Max(0, left)+1e-9))
		}
		left -= math.Max(0, x-base)
		d.cap = x
	}
	sent := nanos(r.now)
	for _, d := range ds {
		cs := d.p.caps[name]
		if cs == nil {
			cs = &[NumKinds][]capSent{}
			d.p.caps[name] = cs
		}
		cs[k] = append(cs[k], capSent{sent: sent, cap: d.cap})
		d.bc.cap, d.bc.capSet = d.cap, true
		e := r.entry(d.p, name)
		e.Cap[k] = d.cap
		e.Caps |= 1 << k
	}
}

// tickStorage reports storage's mesh-wide use: this region's brokers'
// use plus every other region's last report (a region not heard from
// keeps its last figure: bytes stay stored while it is cut off).
func (c *Coordinator) tickStorage(r *round, name string, l Limits, k Kind) {
	var own float64
	for _, b := range r.brokers {
		if e := b.last[name]; e != nil {
			own += e.Use[k]
		}
	}
	mesh := own
	for _, reg := range c.cfg.Regions {
		if reg == c.cfg.Region {
			continue
		}
		if p := r.latest[reg]; p != nil && p.last[name] != nil {
			mesh += p.last[name].Use[k]
		}
	}
	for _, p := range r.regions {
		if c.fresh(p, r.now) {
			r.entry(p, name).Use[k] = own
		}
	}
	for _, b := range r.fresh {
		r.entry(b, name).Use[k] = mesh
	}
}
