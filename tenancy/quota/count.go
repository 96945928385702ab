package quota

import (
	"math"
	"sort"
	"time"
)

// tickCount sets this round's caps on count k (connections, topics,
// consumers) for every fresh broker, and the mesh-wide use it reports.
//
// A region reserves, per broker, the larger of its use and the caps sent
// to it within the last Stale (a lower cap may not have arrived yet).
// The mesh's use is this region's reservation plus every other region's
// reported one; a region not heard from counts as the larger of its last
// report and its static share. What is left of the limit (the headroom)
// is shared: this region takes its static share's fraction of it this
// round (at least one while any is left), split between its brokers.
// Storage gets no caps: its mesh-wide use is reported and each broker
// refuses once it reaches the limit.
func (c *Coordinator) tickCount(name string, l Limits, k Kind, now time.Time, brokers, regions []*cPeer, entry func(*cPeer, string) *Entry) {
	limit := l.Mesh[k]
	n := len(c.cfg.Regions)
	static := staticShare(l, c.cfg.Region, k, n)
	capLeases := func(p *cPeer) *leases {
		x := p.comm[name]
		if x == nil {
			x = &[NumKinds]leases{}
			p.comm[name] = x
		}
		return &x[k]
	}
	use := func(p *cPeer) float64 {
		if e := p.last[name]; e != nil {
			return e.Use[k]
		}
		return 0
	}
	var reserved float64
	for _, b := range brokers {
		reserved += math.Max(use(b), capLeases(b).at(now))
	}
	// Brokers that never reported may use their static share.
	silent := c.cfg.Brokers - len(brokers)
	if silent > 0 && k != Storage {
		reserved += float64(silent) * math.Floor(static/float64(c.cfg.Brokers))
	}
	mesh := reserved
	byRegion := map[string]*cPeer{}
	for _, p := range regions {
		byRegion[p.region] = p
	}
	for _, r := range c.cfg.Regions {
		if r == c.cfg.Region {
			continue
		}
		p := byRegion[r]
		switch {
		case p != nil && c.fresh(p, now):
			mesh += use(p)
		case k == Storage:
			if p != nil {
				mesh += use(p)
			}
		default:
			last := 0.0
			if p != nil {
				last = use(p)
			}
			mesh += math.Max(last, staticShare(l, r, k, n))
		}
	}
	for _, p := range regions {
		if c.fresh(p, now) {
			entry(p, name).Use[k] = reserved
		}
	}
	var fb []*cPeer
	for _, b := range brokers {
		if c.fresh(b, now) {
			fb = append(fb, b)
		}
	}
	if k == Storage {
		for _, b := range fb {
			entry(b, name).Use[k] = mesh
		}
		return
	}
	head := math.Max(0, limit-mesh)
	room := math.Floor(head * static / limit)
	if room < 1 && head >= 1 {
		room = 1
	}
	if len(fb) == 0 {
		return
	}
	// Brokers that were refused most recently first, then by name.
	growth := map[*cPeer]float64{}
	for _, b := range fb {
		growth[b] = c.refusedGrowth(b, name, k)
	}
	sort.SliceStable(fb, func(i, j int) bool { return growth[fb[i]] > growth[fb[j]] })
	each := math.Floor(room / float64(len(fb)))
	left := room - each*float64(len(fb))
	for _, b := range fb {
		r := each
		if left >= 1 {
			r++
			left--
		}
		cp := use(b) + r
		capLeases(b).add(cp, now.Add(c.cfg.Stale))
		e := entry(b, name)
		e.Cap[k], e.Use[k] = cp, mesh
	}
}

// refusedGrowth is how many count-k refusals broker p reported since its
// previous report (its demand for room), remembering the latest figure.
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
	g := e.Refused[k] - r[k]
	r[k] = e.Refused[k]
	return g
}
