package quota

import (
	"math"
	"sort"
	"strings"
	"time"
)

// CoordConfig configures a region's quota coordinator.
type CoordConfig struct {
	// Region is this coordinator's region; Regions are all the mesh's
	// regions (the static share is limit ÷ len(Regions)).
	Region  string
	Regions []string
	// Term is the coordinator's election term (a new term is a new
	// party). Every incarnation needs a term of its own: its peers tell
	// its leases and clock from its predecessor's by it.
	Term uint64
	// Brokers is the number of brokers in the region (the topology's):
	// a broker's static share is the region's ÷ Brokers.
	Brokers int
	// Interval is how often the driver calls Tick and brokers report
	// (default DefaultInterval); it sets the defaults of Stale and how
	// long a rejoining region relearns.
	Interval time.Duration
	// LeaseTTL bounds the leases the coordinator grants (default
	// DefaultLeaseTTL): a grant lasts at most LeaseTTL/2, and never
	// longer than the leases that back it.
	LeaseTTL time.Duration
	// Stale is how long a peer may go unheard before it counts as
	// unreachable (default 2 × Interval + LeaseTTL/4).
	Stale time.Duration
	// MinShare is the fraction of its static share every reachable region
	// and broker keeps however the demand is split (default
	// DefaultMinShare).
	MinShare float64
	// Forget is how long a broker may go unheard before the coordinator
	// forgets it (default DefaultForget); until then its counts stay
	// reserved, after it counts at its static share like a broker that
	// never reported.
	Forget time.Duration
}

// DefaultForget is CoordConfig.Forget's default.
const DefaultForget = time.Minute

func (c *CoordConfig) fill() {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.Stale <= 0 {
		c.Stale = 2*c.Interval + c.LeaseTTL/4
	}
	if c.MinShare <= 0 {
		c.MinShare = DefaultMinShare
	}
	if c.Brokers <= 0 {
		c.Brokers = 1
	}
	if c.Forget <= 0 {
		c.Forget = DefaultForget
	}
}

// minGrant is the shortest lease worth granting.
const minGrant = 100 * time.Millisecond

// Coordinator is a region's quota coordinator: it sums its brokers'
// use and demand, exchanges its region's with the other regions'
// coordinators, splits each tenant's mesh-wide limit by demand (Split),
// and moves allowance with leases: it asks brokers to lend it the part
// of their static share they should not use, grants brokers and other
// regions leases out of what it holds, and never grants more than it
// holds for as long as the grant lasts. Not safe for concurrent use:
// one driver goroutine owns it.
type Coordinator struct {
	cfg     CoordConfig
	tenants map[string]Limits
	// peers are its brokers ("broker/<id>", term 0) and the other
	// regions' coordinators ("region/<name>", by term: two incarnations
	// of one region are two parties).
	peers   map[peerKey]*cPeer
	started time.Time
	counts  map[string]*[NumKinds]countRound
}

// peerKey names a peer: a broker, or one incarnation of a region's
// coordinator.
type peerKey struct {
	from string
	term uint64
}

type cPeer struct {
	from   string
	region string // for region peers
	term   uint64
	sent   int64     // its last Sent, to echo
	echo   int64     // the newest Sent of mine it had (of my term), 0 none
	seen   time.Time // my clock
	first  time.Time // when heard again after a silence (my clock)
	last   map[string]*Entry
	hist   map[string][]sample // brokers: recent cumulative counts
	lentMe map[string]*[NumKinds]leases
	comm   map[string]*[NumKinds]leases
	// caps are the count caps sent to the broker, by my Sent: those sent
	// at or after its echo may be the one it holds.
	caps map[string]*[NumKinds][]capSent
	// bcounts are what the coordinator keeps of a broker's counts: the
	// cap it last sent, the refusals it last saw and when they grew.
	bcounts map[string]*[NumKinds]brokerCount
	// counts are a region's last count figures (its reports carry them
	// once its coordinator has heard its brokers).
	counts map[string]*[NumKinds]countFig
	// inherited are the count figures of superseded incarnations of a
	// region, kept by its newest until it reports its own.
	inherited map[string]*[NumKinds]float64
}

type capSent struct {
	sent int64
	cap  float64
}

type sample struct {
	at       int64 // the broker's clock
	offered  [NumKinds]float64
	admitted [NumKinds]float64
}

// NewCoordinator is a coordinator that has heard from nobody.
func NewCoordinator(cfg CoordConfig, now time.Time) *Coordinator {
	cfg.fill()
	regs := append([]string(nil), cfg.Regions...)
	sort.Strings(regs)
	cfg.Regions = regs
	return &Coordinator{cfg: cfg, tenants: map[string]Limits{}, peers: map[peerKey]*cPeer{}, started: now,
		counts: map[string]*[NumKinds]countRound{}}
}

// From is this coordinator's name on the wire.
func (c *Coordinator) From() string { return "region/" + c.cfg.Region }

// SetTenant sets tenant's limits (all kinds zero: no quotas, dropped).
func (c *Coordinator) SetTenant(tenant string, l Limits) {
	for k := range NumKinds {
		if l.Limited(k) {
			c.tenants[tenant] = l
			return
		}
	}
	delete(c.tenants, tenant)
	delete(c.counts, tenant)
}

// BrokerBase is a broker's static share of each of l's kinds in a region
// of brokers brokers, in a mesh of regions regions: what Broker.SetTenant
// takes.
func BrokerBase(l Limits, region string, regions, brokers int) [NumKinds]float64 {
	var base [NumKinds]float64
	if regions < 1 {
		regions = 1
	}
	if brokers < 1 {
		brokers = 1
	}
	for k := range NumKinds {
		if l.Limited(k) {
			base[k] = staticShare(l, region, k, regions) / float64(brokers)
		}
	}
	return base
}

// staticShare is region's static share of k in a mesh of regions
// regions: the limit split evenly, except that a region's cap holds it
// down and what the caps leave goes evenly to the others (water-filled),
// so the static shares sum to the limit unless the caps sum to less.
// Every party computes it from the limits alone.
func staticShare(l Limits, region string, k Kind, regions int) float64 {
	level := staticLevel(l, k, regions)
	if c := l.regionCap(region, k); c > 0 && c < level {
		return c
	}
	return level
}

// staticLevel is the static share of a region with no cap below it.
func staticLevel(l Limits, k Kind, regions int) float64 {
	var caps []float64
	for _, c := range l.Regions {
		if c[k] > 0 {
			caps = append(caps, c[k])
		}
	}
	sort.Float64s(caps)
	left, n := l.Mesh[k], regions
	for _, c := range caps {
		if n <= 1 || c >= left/float64(n) {
			break
		}
		left -= c
		n--
	}
	if n < 1 {
		n = 1
	}
	return left / float64(n)
}

// Receive takes a message from a broker of this region or from another
// region's coordinator. A message addressed to another term of this
// region's coordinator (ToTerm) is taken without its Echo and leases.
func (c *Coordinator) Receive(m *Msg, now time.Time) {
	key := peerKey{m.From, m.Term}
	p := c.peers[key]
	if p == nil {
		p = &cPeer{from: m.From, term: m.Term, first: now, last: map[string]*Entry{}, hist: map[string][]sample{},
			lentMe: map[string]*[NumKinds]leases{}, comm: map[string]*[NumKinds]leases{},
			caps: map[string]*[NumKinds][]capSent{}, bcounts: map[string]*[NumKinds]brokerCount{},
			counts: map[string]*[NumKinds]countFig{}, inherited: map[string]*[NumKinds]float64{}}
		if r, ok := strings.CutPrefix(m.From, "region/"); ok {
			p.region = r
		}
		c.peers[key] = p
	}
	if m.Sent < p.sent {
		return
	}
	if !c.fresh(p, now) {
		// Heard again after a silence: a rejoin (relearning).
		p.first = now
	}
	p.sent, p.seen = m.Sent, now
	mine := m.ToTerm == 0 || m.ToTerm == c.cfg.Term
	echo := time.Time{}
	if mine && m.Echo > p.echo {
		p.echo = m.Echo
	}
	if mine {
		echo = fromNanos(m.Echo)
	}
	for name, e := range m.Tenants {
		p.last[name] = e
		if p.region != "" {
			p.takeCounts(name, e)
		}
		if p.region == "" {
			h := p.hist[name]
			if n := len(h); n > 0 && restarted(h[n-1], e) {
				h = h[:0] // its counters restarted: a new process
			}
			h = append(h, sample{at: m.Sent, offered: e.Offered, admitted: e.Admitted})
			// Keep about a second and a half of reports.
			for len(h) > 2 && time.Duration(m.Sent-h[1].at) > 1500*time.Millisecond {
				h = h[1:]
			}
			p.hist[name] = h
		}
		lm := p.lentMe[name]
		if lm == nil {
			lm = &[NumKinds]leases{}
			p.lentMe[name] = lm
		}
		for _, k := range rateKinds {
			if e.Lend[k] > 0 && !echo.IsZero() {
				lm[k].add(e.Lend[k], echo.Add(time.Duration(e.LendFor[k])))
			}
		}
	}
}

// restarted says whether a broker's cumulative counts went back.
func restarted(s sample, e *Entry) bool {
	for _, k := range rateKinds {
		if e.Offered[k] < s.offered[k] || e.Admitted[k] < s.admitted[k] {
			return true
		}
	}
	return false
}

// fresh says whether p was heard from recently.
func (c *Coordinator) fresh(p *cPeer, now time.Time) bool {
	return !p.seen.IsZero() && now.Sub(p.seen) <= c.cfg.Stale
}

// brokerRates is a broker's offered and admitted rate for k (units/s):
// over its last report interval and over its last ~1.5 s, the larger
// (demand rises at once and falls slowly).
func brokerRates(h []sample, k Kind) (offered, admitted float64) {
	if len(h) < 2 {
		return 0, 0
	}
	rate := func(a, b sample) (float64, float64) {
		dt := time.Duration(b.at - a.at).Seconds()
		if dt <= 0 {
			return 0, 0
		}
		return math.Max(0, b.offered[k]-a.offered[k]) / dt, math.Max(0, b.admitted[k]-a.admitted[k]) / dt
	}
	o1, a1 := rate(h[len(h)-2], h[len(h)-1])
	o2, a2 := rate(h[0], h[len(h)-1])
	return math.Max(o1, o2), math.Max(a1, a2)
}

func (c *Coordinator) sortedPeers(regions bool) []*cPeer {
	var ps []*cPeer
	for _, p := range c.peers {
		if (p.region != "") == regions {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].from != ps[j].from {
			return ps[i].from < ps[j].from
		}
		return ps[i].term < ps[j].term
	})
	return ps
}

// round is one Tick's view of the peers and the messages it builds.
type round struct {
	now     time.Time
	brokers []*cPeer          // every broker known, by name
	fresh   []*cPeer          // the fresh ones
	regions []*cPeer          // every region incarnation known
	latest  map[string]*cPeer // each region's newest incarnation
	// active is each region's incarnation that rates deal with: the
	// newest fresh one past relearning, else the newest (a new
	// coordinator is acted on once it has been heard for two intervals;
	// its predecessor, while it runs, until then).
	active map[string]*cPeer
	out    map[peerKey]*Msg
	c      *Coordinator
}

// msg is the message to p this round.
func (r *round) msg(p *cPeer) *Msg {
	key := peerKey{p.from, p.term}
	m := r.out[key]
	if m == nil {
		m = &Msg{From: r.c.From(), Term: r.c.cfg.Term, Sent: nanos(r.now), Echo: p.sent, To: p.from, ToTerm: p.term, Tenants: map[string]*Entry{}}
		r.out[key] = m
	}
	return m
}

// entry is tenant's entry in the message to p this round.
func (r *round) entry(p *cPeer, tenant string) *Entry {
	m := r.msg(p)
	e := m.Tenants[tenant]
	if e == nil {
		e = &Entry{}
		m.Tenants[tenant] = e
	}
	return e
}

// latest is each region's newest incarnation heard from.
func (c *Coordinator) latest() map[string]*cPeer {
	m := map[string]*cPeer{}
	for _, p := range c.peers {
		if p.region == "" {
			continue
		}
		if l := m[p.region]; l == nil || p.term > l.term {
			m[p.region] = p
		}
	}
	return m
}

// round is the peers as they stand at now, with no messages yet.
func (c *Coordinator) round(now time.Time) *round {
	r := &round{now: now, latest: c.latest(), active: map[string]*cPeer{}, out: map[peerKey]*Msg{}, c: c,
		brokers: c.sortedPeers(false), regions: c.sortedPeers(true)}
	for reg, p := range r.latest {
		r.active[reg] = p
	}
	for _, p := range r.regions {
		if !c.fresh(p, now) || c.relearning(p, now) {
			continue
		}
		if a := r.active[p.region]; !c.fresh(a, now) || c.relearning(a, now) || p.term > a.term {
			r.active[p.region] = p
		}
	}
	for _, p := range r.brokers {
		if c.fresh(p, now) {
			r.fresh = append(r.fresh, p)
		}
	}
	return r
}

// Tick runs one round at now: forgets peers gone long enough, splits
// every tenant's limits, and returns the messages to send (To names each
// one's receiver): one per fresh broker, one per fresh incarnation of
// another region's coordinator, and a hello (no tenants) to each other
// region not heard from lately, so that a region cut off is found again
// when the link heals.
func (c *Coordinator) Tick(now time.Time) []*Msg {
	latest := c.latest()
	for key, p := range c.peers {
		silent := now.Sub(p.seen)
		switch {
		case p.region == "" && silent > c.cfg.Forget:
			delete(c.peers, key)
		case p.region != "" && latest[p.region] != p && silent > c.cfg.LeaseTTL+c.cfg.Stale:
			// A superseded incarnation, its leases all expired.
			latest[p.region].inherit(p)
			delete(c.peers, key)
		}
	}
	r := c.round(now)
	for _, p := range r.fresh {
		r.msg(p)
	}
	for _, p := range r.regions {
		if c.fresh(p, now) {
			r.msg(p)
		}
	}
	for _, reg := range c.cfg.Regions {
		if reg == c.cfg.Region {
			continue
		}
		if p := r.latest[reg]; p == nil {
			key := peerKey{"region/" + reg, 0}
			r.out[key] = &Msg{From: c.From(), Term: c.cfg.Term, Sent: nanos(now), To: key.from}
		} else if !c.fresh(p, now) {
			r.msg(p) // a hello to the incarnation last heard
		}
	}
	names := make([]string, 0, len(c.tenants))
	for n := range c.tenants {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		l := c.tenants[name]
		for k := range NumKinds {
			if !l.Limited(k) {
				continue
			}
			if k.Rate() {
				c.tickRate(r, name, l, k)
			} else {
				c.tickCount(r, name, l, k)
			}
		}
	}
	keys := make([]peerKey, 0, len(r.out))
	for k := range r.out {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].from != keys[j].from {
			return keys[i].from < keys[j].from
		}
		return keys[i].term < keys[j].term
	})
	res := make([]*Msg, 0, len(keys))
	for _, k := range keys {
		res = append(res, r.out[k])
	}
	return res
}

// regionView is the mesh as this coordinator sees it for one tenant and
// kind: each region's static share, demand (-1 unreachable), cap and
// use.
type regionView struct {
	names  []string
	static []float64
	demand []float64
	caps   []float64
	rate   []float64 // admitted units/s (rates) or use (counts)
	me     int
}

func (c *Coordinator) view(r *round, name string, l Limits, k Kind) regionView {
	n := len(c.cfg.Regions)
	v := regionView{names: c.cfg.Regions, static: make([]float64, n), demand: make([]float64, n), caps: make([]float64, n), rate: make([]float64, n), me: -1}
	for i, reg := range c.cfg.Regions {
		v.static[i] = staticShare(l, reg, k, n)
		v.caps[i] = l.regionCap(reg, k)
		if reg == c.cfg.Region {
			v.me = i
			var d, a float64
			for _, b := range r.fresh {
				if k.Rate() {
					o, ad := brokerRates(b.hist[name], k)
					d, a = d+o, a+ad
				} else if e := b.last[name]; e != nil {
					a += e.Use[k]
				}
			}
			v.demand[i], v.rate[i] = d, a
			continue
		}
		p := r.active[reg]
		if p != nil && p.last[name] != nil {
			v.rate[i] = p.last[name].Rate[k]
			if !k.Rate() {
				v.rate[i] = p.last[name].Use[k]
			}
		}
		if p == nil || !c.fresh(p, r.now) || c.relearning(p, r.now) {
			v.demand[i] = -1
			continue
		}
		if e := p.last[name]; e != nil {
			v.demand[i] = e.Demand[k]
		}
	}
	return v
}

// relearning says whether peer region p rejoined too recently for its
// demand to be acted on: it must have been heard from for two intervals
// since it was last silent (ARCHITECTURE §5: a region that rejoins
// relearns demand before granting).
func (c *Coordinator) relearning(p *cPeer, now time.Time) bool {
	return now.Sub(p.first) < 2*c.cfg.Interval
}

func (c *Coordinator) tickRate(r *round, name string, l Limits, k Kind) {
	now := r.now
	v := c.view(r, name, l, k)
	target := Split(l.Mesh[k], v.static, v.demand, v.caps, c.cfg.MinShare)
	me := v.me
	if me < 0 {
		return
	}
	var meshRate float64
	for _, x := range v.rate {
		meshRate += x
	}
	// What this coordinator holds: leases lent to it, by brokers and by
	// other regions; what it has granted.
	lm := func(p *cPeer) *leases {
		x := p.lentMe[name]
		if x == nil {
			x = &[NumKinds]leases{}
			p.lentMe[name] = x
		}
		return &x[k]
	}
	cm := func(p *cPeer) *leases {
		x := p.comm[name]
		if x == nil {
			x = &[NumKinds]leases{}
			p.comm[name] = x
		}
		return &x[k]
	}
	var wanHeld, wanLent float64
	for _, p := range r.regions {
		wanHeld += lm(p).at(now)
		wanLent += cm(p).at(now)
	}
	// The brokers' split: the region's target, but never more than its
	// static share plus what other regions lend it now.
	mine := target[me]
	static := v.static[me]
	regionTotal := math.Max(0, math.Min(mine, static+wanHeld-wanLent))
	base := static / float64(c.cfg.Brokers)
	grants := map[*cPeer]float64{}
	if fb := r.fresh; len(fb) > 0 {
		bstatic := make([]float64, len(fb))
		bdemand := make([]float64, len(fb))
		for i, b := range fb {
			bstatic[i] = base
			bdemand[i], _ = brokerRates(b.hist[name], k)
		}
		// Brokers not heard from lately hold their static share; only the
		// reporting ones are split.
		silent := math.Max(0, float64(c.cfg.Brokers-len(fb)))
		share := math.Max(0, regionTotal-silent*base)
		tau := Split(share, bstatic, bdemand, nil, c.cfg.MinShare)
		wants := make([]float64, len(fb))
		dust := 1e-9 * base // float rounding, not a lease
		for i, b := range fb {
			e := r.entry(b, name)
			e.Rate[k] = meshRate
			if tau[i] < base-dust {
				wants[i] = base - tau[i]
			} else if tau[i] > base+dust {
				grants[b] = tau[i] - base
			}
		}
		// A broker that lent more than it is asked for now gets the rest
		// back at once (its leases outlive the want): as far as the
		// commitments made allow.
		rel := c.release(r, fb, wants, lm, cm)
		for i, b := range fb {
			lm(b).clip(rel[i], time.Time{})
			r.entry(b, name).Want[k] = rel[i]
		}
	}
	// Leases to other regions whose target is above their static share,
	// from this region's spare.
	spare := math.Max(0, static-mine)
	var excess float64
	for i := range target {
		if i != me && v.demand[i] >= 0 {
			excess += math.Max(0, target[i]-v.static[i])
		}
	}
	toRegions := map[*cPeer]float64{}
	for i, reg := range v.names {
		p := r.active[reg]
		if i == me || p == nil || v.demand[i] < 0 || excess <= 0 {
			continue
		}
		if x := math.Max(0, target[i]-v.static[i]); x > 0 && spare > 0 {
			toRegions[p] = spare * x / excess
		}
	}
	// A commitment to a region lasts until it expires, whatever the
	// demand does since: the new leases are scaled so that, with the
	// commitments they do not replace, they fit in the spare (else the
	// region would lend more than its spare and starve itself).
	scale := fitScale(r.regions, toRegions, spare, func(p *cPeer) float64 { return cm(p).at(now) })
	for p, g := range toRegions {
		grants[p] = g * scale
	}
	for _, p := range r.regions {
		if c.fresh(p, now) {
			e := r.entry(p, name)
			e.Demand[k], e.Rate[k] = v.demand[me], v.rate[me]
			e.Allowance[k] = math.Max(0, static+wanHeld-wanLent)
		}
	}
	c.grant(r, name, k, grants, lm, cm)
}

// release is how much of their leases the fresh brokers fb keep lent
// (each at least wants[i]): the least that, counted in place of their
// leases held now, still covers every commitment still valid at every
// moment. A release is all or a share of each broker's excess alike (a
// binary search on the share).
func (c *Coordinator) release(r *round, fb []*cPeer, wants []float64, lm, cm func(*cPeer) *leases) []float64 {
	now := r.now
	out := make([]float64, len(fb))
	var ts []time.Time
	ts = append(ts, now)
	for _, p := range r.brokers {
		ts = lm(p).untils(now, now.Add(c.cfg.LeaseTTL*4), ts)
	}
	for _, p := range r.regions {
		ts = lm(p).untils(now, now.Add(c.cfg.LeaseTTL*4), ts)
	}
	isFresh := map[*cPeer]int{}
	for i, b := range fb {
		isFresh[b] = i
	}
	covered := func(share float64) bool {
		for _, t := range ts {
			var held, comm float64
			for _, p := range r.brokers {
				h := lm(p).validAt(t)
				if i, ok := isFresh[p]; ok && h > wants[i] {
					h = wants[i] + share*(h-wants[i])
				}
				held += h
				comm += cm(p).validAt(t)
			}
			for _, p := range r.regions {
				held += lm(p).validAt(t)
				comm += cm(p).validAt(t)
			}
			if comm > held*(1+1e-9)+1e-9 {
				return false
			}
		}
		return true
	}
	share := 0.0
	if !covered(0) {
		lo, hi := 0.0, 1.0
		for range 30 {
			if mid := (lo + hi) / 2; covered(mid) {
				hi = mid
			} else {
				lo = mid
			}
		}
		share = hi
	}
	for i, b := range fb {
		h := lm(b).at(now)
		out[i] = wants[i]
		if h > wants[i] {
			out[i] = wants[i] + share*(h-wants[i])
		}
	}
	return out
}

// fitScale is the largest s in [0, 1] with Σ max(old(p), s × g[p]) ≤
// budget over peers (a binary search: the sum grows with s), 0 if even
// the old commitments exceed it.
func fitScale(peers []*cPeer, g map[*cPeer]float64, budget float64, old func(*cPeer) float64) float64 {
	sum := func(s float64) float64 {
		var t float64
		for _, p := range peers {
			t += math.Max(old(p), s*g[p])
		}
		return t
	}
	if sum(1) <= budget*(1+1e-9) {
		return 1
	}
	if sum(0) > budget {
		return 0
	}
	lo, hi := 0.0, 1.0
	for range 40 {
		mid := (lo + hi) / 2
		if sum(mid) <= budget {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// grant sends this round's leases, peer by peer (brokers, then regions,
// by name), each as long as its backing allows, at most LeaseTTL/2: at
// every moment from now on, the commitments (per peer the largest lease
// still valid, old or new) must be covered by the leases held (per
// lender the largest still valid). When what is held for the next
// minGrant does not cover every grant, all are scaled down alike; a
// grant that still cannot last minGrant is cut to what is held for it.
// Held leases only ever arrive, so commitments made in earlier rounds
// stay covered.
func (c *Coordinator) grant(r *round, name string, k Kind, grants map[*cPeer]float64, lm, cm func(*cPeer) *leases) {
	now := r.now
	backers := append(append([]*cPeer(nil), r.brokers...), r.regions...)
	var want float64
	for _, p := range backers { // in order: the same sums every run
		want += grants[p]
	}
	if want <= 0 {
		return
	}
	// The moments where what is held falls: now and every held expiry.
	ts := []time.Time{now}
	for _, p := range backers {
		ts = lm(p).untils(now, now.Add(c.cfg.LeaseTTL*4), ts)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	held := make([]float64, len(ts))
	for i, t := range ts {
		for _, p := range backers {
			held[i] += lm(p).validAt(t)
		}
	}
	// Per peer, its commitment at each moment; their sum.
	contrib := make([][]float64, len(backers))
	total := make([]float64, len(ts))
	for j, p := range backers {
		contrib[j] = make([]float64, len(ts))
		for i, t := range ts {
			contrib[j][i] = cm(p).validAt(t)
			total[i] += contrib[j][i]
		}
	}
	longest := now.Add(c.cfg.LeaseTTL / 2)
	shortest := now.Add(minGrant)
	// firstFail is the first moment at which p's lease of g would leave
	// the commitments uncovered (longest if none before it).
	firstFail := func(j int, g float64) time.Time {
		for i, t := range ts {
			if !t.Before(longest) {
				break
			}
			// (Sums of the same amounts in another order differ in their
			// last bits: a relative 1e-9 is not a shortfall.)
			if total[i]-contrib[j][i]+math.Max(contrib[j][i], g) > held[i]*(1+1e-9)+1e-9 {
				return t
			}
		}
		return longest
	}
	// When not all can be held for minGrant, every grant is scaled alike
	// (no peer starves for another's sake).
	fits := func(scale float64) bool {
		for i, t := range ts {
			if !t.Before(shortest) {
				break
			}
			var sum float64
			for j, p := range backers {
				sum += math.Max(contrib[j][i], scale*grants[p])
			}
			if sum > held[i]*(1+1e-9)+1e-9 {
				return false
			}
		}
		return true
	}
	scale := 1.0
	if !fits(1) {
		lo, hi := 0.0, 1.0
		for range 30 {
			if mid := (lo + hi) / 2; fits(mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		scale = lo
	}
	for j, p := range backers {
		g := grants[p] * scale
		if g <= 1e-9 {
			continue
		}
		end := firstFail(j, g)
		if end.Before(shortest) {
			// Cut to what is held for minGrant.
			g = math.Inf(1)
			for i, t := range ts {
				if !t.Before(shortest) {
					break
				}
				g = math.Min(g, held[i]-(total[i]-contrib[j][i]))
			}
			if g <= 1e-9 {
				continue
			}
			end = firstFail(j, g)
			if end.Before(shortest) {
				continue
			}
		}
		cm(p).add(g, end)
		for i, t := range ts {
			if t.Before(end) && g > contrib[j][i] {
				total[i] += g - contrib[j][i]
				contrib[j][i] = g
			}
		}
		e := r.entry(p, name)
		e.Lend[k], e.LendFor[k] = g, int64(end.Sub(now))
	}
}
