package quota

import (
	"math"
	"sort"
)

// countRound is a region's growth of one tenant's count (see tickCount).
type countRound struct {
	// pending is room proposed to the other regions and not handed out
	// yet; pendingAt is the Sent of the tick that proposed it (0: none).
	pending   float64
	pendingAt int64
}

// tickCount runs one round of count k (connections, topics, consumers):
// the region's reservation, its report to the other regions, and, when
// a proposal of room was acknowledged, new caps for its brokers.
//
// A broker's reservation is the larger of its use, the cap it reported
// holding and every cap sent to it since the newest message of ours it
// has echoed (it may hold any of those); the region's is their sum, plus
// the static share of each broker never heard from. Another region
// counts as its reported reservation plus its pending proposal, or, not
// heard from lately or just heard again, the larger of that and its
// static share. The headroom is the limit less all of it.
//
// The region grows in rounds: it proposes room (its static share's part
// of the headroom among the regions heard from, at least 1 while any is
// left), reports it as pending, and hands it out only once every other
// region has echoed that report (so each counts it), or, for a region
// that has not, only 2 × Stale later and up to the region's static share
// (by then that region counts at least the static share: see the package
// doc). At hand-out it checks the room again against the headroom with
// the pending proposals of the regions before it in name order (a later
// one checks against ours), so two regions proposing at once never
// hand out more than the headroom between them. Each fresh broker's new
// cap is its use plus its part of the room (more to those refused since
// the last hand-out), which takes back room given before and not used.
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

	reserved := c.reserved(r, name, k, floorBase)
	// The other regions, as proposals see them (others) and as a
	// hand-out checks them (before: the pending proposals of later
	// regions are theirs to check against ours).
	var others, before, contenders float64
	acked, waited := true, now.Sub(fromNanos(st.pendingAt)) >= 2*c.cfg.Stale
	for _, reg := range c.cfg.Regions {
		if reg == c.cfg.Region {
			continue
		}
		s := staticShare(l, reg, k, n)
		p := r.latest[reg]
		if p == nil || p.echo < st.pendingAt {
			acked = false
		}
		if p == nil || !c.fresh(p, now) || c.relearning(p, now) || !p.count(name, k).set {
			// Unreachable, or just back: at least its static share, and at
			// least what any incarnation of it reported last.
			v := s
			for _, q := range r.regions {
				if q.region == reg {
					v = math.Max(v, regionCount(q, name, k))
				}
			}
			others += v
			before += v
			if p != nil && c.fresh(p, now) {
				contenders += s
			}
			continue
		}
		contenders += s
		f := p.count(name, k)
		v := math.Max(f.use, f.cap)
		if reg < c.cfg.Region {
			before += f.want
		}
		others += v + f.want
		before += v
	}

	handout, reset := 0.0, false
	if st.pendingAt != 0 && (acked || waited) {
		h := st.pending
		if !acked {
			h = math.Min(h, math.Max(0, static-reserved))
		}
		h = math.Floor(math.Min(h, math.Max(0, limit-reserved-before)))
		handout, reset = h, true
		st.pending, st.pendingAt = 0, 0
	}
	if st.pendingAt == 0 && !reset && now.Sub(c.started) >= 2*c.cfg.Interval {
		// Propose the next room (not in the first two intervals: the
		// brokers' reports first).
		head := limit - reserved - others
		var room float64
		if head >= 1 {
			room = math.Max(1, math.Floor(head*static/(static+contenders)))
		}
		if room > 0 {
			st.pending, st.pendingAt = room, sent
		} else {
			reset = true // at the limit: take back the caps not used
		}
	}
	if reset && len(r.fresh) > 0 {
		c.handOut(r, name, k, handout)
		reserved = c.reserved(r, name, k, floorBase)
	}
	var use float64
	for _, b := range r.brokers {
		if e := b.last[name]; e != nil {
			use += e.Use[k]
		}
	}
	// The figures go to the other regions once the brokers have reported
	// (not in the first two intervals: a new coordinator knows too little).
	if now.Sub(c.started) >= 2*c.cfg.Interval {
		for _, p := range r.regions {
			if c.fresh(p, now) {
				e := r.entry(p, name)
				e.Use[k], e.Cap[k], e.Want[k] = use, reserved, st.pending
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
// reservation, its pending proposal.
type countFig struct {
	use, cap, want float64
	set            bool
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
		x[k] = countFig{use: e.Use[k], cap: e.Cap[k], want: e.Want[k], set: true}
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
		v := floorBase // a broker that never reported the tenant holds its static share
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
		sum += v
	}
	if silent := c.cfg.Brokers - len(r.brokers); silent > 0 {
		sum += float64(silent) * floorBase
	}
	return sum
}

// handOut sets every fresh broker's cap on count k to its use plus its
// part of room: in proportion to 1 + its refusals since the last
// hand-out, the units left over to the most refused first.
func (c *Coordinator) handOut(r *round, name string, k Kind, room float64) {
	fb := append([]*cPeer(nil), r.fresh...)
	growth := map[*cPeer]float64{}
	var w float64
	for _, b := range fb {
		growth[b] = c.refusedGrowth(b, name, k)
		w += 1 + growth[b]
	}
	sort.SliceStable(fb, func(i, j int) bool { return growth[fb[i]] > growth[fb[j]] })
	give := map[*cPeer]float64{}
	left := room
	for _, b := range fb {
		g := math.Floor(room * (1 + growth[b]) / w)
		give[b] = g
		left -= g
	}
	for i := 0; left >= 1 && len(fb) > 0; i = (i + 1) % len(fb) {
		give[fb[i]]++
		left--
	}
	sent := nanos(r.now)
	for _, b := range fb {
		var use float64
		if e := b.last[name]; e != nil {
			use = e.Use[k]
		}
		cp := use + give[b]
		cs := b.caps[name]
		if cs == nil {
			cs = &[NumKinds][]capSent{}
			b.caps[name] = cs
		}
		cs[k] = append(cs[k], capSent{sent: sent, cap: cp})
		e := r.entry(b, name)
		e.Cap[k] = cp
		e.Caps |= 1 << k
	}
}

// refusedGrowth is how many count-k refusals broker p reported since
// this was last asked (its demand for room), remembering the latest
// figure.
func (c *Coordinator) refusedGrowth(p *cPeer, name string, k Kind) float64 {
	e := p.last[name]
	if e == nil {
		return 0
	}
	r := p.refused[name]
	if r == nil {
		r = &[NumKinds]float64{}
		p.refused[name] = r
	}
	g := math.Max(0, e.Refused[k]-r[k])
	r[k] = e.Refused[k]
	return g
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
