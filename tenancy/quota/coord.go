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
	// Term is the coordinator's election term (a new term is a new party).
	Term uint64
	// Brokers is the number of brokers in the region (the topology's):
	// a broker's static share is the region's ÷ Brokers.
	Brokers int
	// LeaseTTL bounds the leases the coordinator grants (default
	// DefaultLeaseTTL): a grant lasts at most LeaseTTL/2, and never
	// longer than the leases that back it.
	LeaseTTL time.Duration
	// Stale is how long a peer may go unheard before it counts as
	// unreachable (default 2 × DefaultInterval + LeaseTTL/4).
	Stale time.Duration
	// MinShare is the fraction of its static share every reachable region
	// and broker keeps however the demand is split (default
	// DefaultMinShare).
	MinShare float64
}

func (c *CoordConfig) fill() {
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.Stale <= 0 {
		c.Stale = 2*DefaultInterval + c.LeaseTTL/4
	}
	if c.MinShare <= 0 {
		c.MinShare = DefaultMinShare
	}
	if c.Brokers <= 0 {
		c.Brokers = 1
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
	peers   map[string]*cPeer // "broker/<id>" and "region/<name>"
	started time.Time
}

type cPeer struct {
	from   string
	region string // for region peers
	term   uint64
	sent   int64     // its last Sent, to echo
	seen   time.Time // my clock
	first  time.Time // when first heard (my clock)
	last   map[string]*Entry
	hist   map[string][]sample // brokers: recent cumulative counts
	lentMe map[string]*[NumKinds]leases
	comm   map[string]*[NumKinds]leases
	// refusedAt is when the broker's refusals of a count last grew.
	refused map[string]*[NumKinds]float64
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
	return &Coordinator{cfg: cfg, tenants: map[string]Limits{}, peers: map[string]*cPeer{}, started: now}
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

func staticShare(l Limits, region string, k Kind, regions int) float64 {
	s := l.Mesh[k] / float64(regions)
	if c := l.regionCap(region, k); c > 0 {
		s = math.Min(s, c)
	}
	return s
}

// Receive takes a message from a broker of this region or from another
// region's coordinator.
func (c *Coordinator) Receive(m *Msg, now time.Time) {
	p := c.peers[m.From]
	if p != nil && m.Term != p.term && m.Term > 0 {
		// A new coordinator of that region: a new party. Its old
		// incarnation's leases lapse on their own.
		p = nil
	}
	if p == nil {
		p = &cPeer{from: m.From, term: m.Term, first: now, last: map[string]*Entry{}, hist: map[string][]sample{},
			lentMe: map[string]*[NumKinds]leases{}, comm: map[string]*[NumKinds]leases{}, refused: map[string]*[NumKinds]float64{}}
		if r, ok := strings.CutPrefix(m.From, "region/"); ok {
			p.region = r
		}
		c.peers[m.From] = p
	}
	if m.Sent < p.sent {
		return
	}
	p.sent, p.seen = m.Sent, now
	echo := fromNanos(m.Echo)
	for name, e := range m.Tenants {
		p.last[name] = e
		if p.region == "" {
			h := append(p.hist[name], sample{at: m.Sent, offered: e.Offered, admitted: e.Admitted})
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
		for _, k := range []Kind{PublishRate, PublishBytes} {
			if e.Lend[k] > 0 && !echo.IsZero() {
				lm[k].add(e.Lend[k], echo.Add(time.Duration(e.LendFor[k])))
			}
		}
	}
}

// fresh says whether p was heard from recently.
func (c *Coordinator) fresh(p *cPeer, now time.Time) bool { return now.Sub(p.seen) <= c.cfg.Stale }

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
	sort.Slice(ps, func(i, j int) bool { return ps[i].from < ps[j].from })
	return ps
}

// Tick runs one round at now: drops peers gone for a lease TTL, splits
// every tenant's limits, and returns the messages to send, one per fresh
// broker and per fresh region peer.
func (c *Coordinator) Tick(now time.Time) []*Msg {
	for from, p := range c.peers {
		if now.Sub(p.seen) > c.cfg.LeaseTTL+c.cfg.Stale {
			delete(c.peers, from)
		}
	}
	brokers := c.sortedPeers(false)
	regions := c.sortedPeers(true)
	out := map[string]*Msg{}
	msg := func(p *cPeer) *Msg {
		m := out[p.from]
		if m == nil {
			m = &Msg{From: c.From(), Term: c.cfg.Term, Sent: nanos(now), Echo: p.sent, Tenants: map[string]*Entry{}}
			out[p.from] = m
		}
		return m
	}
	entry := func(p *cPeer, tenant string) *Entry {
		m := msg(p)
		e := m.Tenants[tenant]
		if e == nil {
			e = &Entry{}
			m.Tenants[tenant] = e
		}
		return e
	}
	for _, p := range brokers {
		if c.fresh(p, now) {
			msg(p)
		}
	}
	for _, p := range regions {
		if c.fresh(p, now) {
			msg(p)
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
				c.tickRate(name, l, k, now, brokers, regions, entry)
			} else {
				c.tickCount(name, l, k, now, brokers, regions, entry)
			}
		}
	}
	res := make([]*Msg, 0, len(out))
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		res = append(res, out[k])
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

func (c *Coordinator) view(name string, l Limits, k Kind, now time.Time, brokers, regions []*cPeer) regionView {
	n := len(c.cfg.Regions)
	v := regionView{names: c.cfg.Regions, static: make([]float64, n), demand: make([]float64, n), caps: make([]float64, n), rate: make([]float64, n), me: -1}
	byRegion := map[string]*cPeer{}
	for _, p := range regions {
		byRegion[p.region] = p
	}
	for i, r := range c.cfg.Regions {
		v.static[i] = staticShare(l, r, k, n)
		v.caps[i] = l.regionCap(r, k)
		if r == c.cfg.Region {
			v.me = i
			var d, a float64
			for _, b := range brokers {
				if !c.fresh(b, now) {
					continue
				}
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
		p := byRegion[r]
		if p == nil || !c.fresh(p, now) || c.relearning(p, now) {
			v.demand[i] = -1
			if p != nil && p.last[name] != nil {
				v.rate[i] = p.last[name].Rate[k]
				if !k.Rate() {
					v.rate[i] = p.last[name].Use[k]
				}
			}
			continue
		}
		if e := p.last[name]; e != nil {
			v.demand[i], v.rate[i] = e.Demand[k], e.Rate[k]
			if !k.Rate() {
				v.rate[i] = e.Use[k]
			}
		}
	}
	return v
}

// relearning says whether peer region p rejoined too recently for its
// demand to be acted on: it must have been heard from for two intervals
// (ARCHITECTURE §5: a region that rejoins relearns demand before
// granting).
func (c *Coordinator) relearning(p *cPeer, now time.Time) bool {
	return now.Sub(p.first) < 2*DefaultInterval
}

func (c *Coordinator) tickRate(name string, l Limits, k Kind, now time.Time, brokers, regions []*cPeer, entry func(*cPeer, string) *Entry) {
	v := c.view(name, l, k, now, brokers, regions)
	target := Split(l.Mesh[k], v.static, v.demand, v.caps, c.cfg.MinShare)
	me := v.me
	if me < 0 {
		return
	}
	var meshRate float64
	for _, r := range v.rate {
		meshRate += r
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
	for _, p := range regions {
		wanHeld += lm(p).at(now)
		wanLent += cm(p).at(now)
	}
	// The brokers' split: the region's target, but never more than its
	// static share plus what other regions lend it now.
	mine := target[me]
	static := v.static[me]
	regionTotal := math.Min(mine, static+wanHeld-wanLent)
	if regionTotal < 0 {
		regionTotal = 0
	}
	var fb []*cPeer
	for _, b := range brokers {
		if c.fresh(b, now) {
			fb = append(fb, b)
		}
	}
	base := static / float64(c.cfg.Brokers)
	grants := map[*cPeer]float64{}
	if len(fb) > 0 {
		bstatic := make([]float64, len(fb))
		bdemand := make([]float64, len(fb))
		for i, b := range fb {
			bstatic[i] = base
			bdemand[i], _ = brokerRates(b.hist[name], k)
		}
		// Brokers that never reported hold their static share; only the
		// reporting ones are split.
		silent := float64(c.cfg.Brokers - len(fb))
		if silent < 0 {
			silent = 0
		}
		share := math.Max(0, regionTotal-silent*base)
		tau := Split(share, bstatic, bdemand, nil, c.cfg.MinShare)
		for i, b := range fb {
			e := entry(b, name)
			e.Rate[k] = meshRate
			if tau[i] < base {
				e.Want[k] = base - tau[i]
			} else if tau[i] > base {
				grants[b] = tau[i] - base
			}
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
	byRegion := map[string]*cPeer{}
	for _, p := range regions {
		byRegion[p.region] = p
	}
	for i, r := range v.names {
		p := byRegion[r]
		if i == me || p == nil || v.demand[i] < 0 || excess <= 0 {
			continue
		}
		if x := math.Max(0, target[i]-v.static[i]); x > 0 && spare > 0 {
			grants[p] = spare * x / excess
		}
	}
	for _, p := range regions {
		if c.fresh(p, now) {
			e := entry(p, name)
			e.Demand[k], e.Rate[k] = v.demand[me], v.rate[me]
			e.Allowance[k] = math.Max(0, static+wanHeld-wanLent)
		}
	}
	c.grant(name, k, now, grants, lm, cm, entry)
}

// grant sends this round's leases: each peer's grant, scaled down so
// that every commitment (the largest lease still valid per peer) is
// backed by held leases for as long as it lasts, and lasting as long as
// the backing allows, at most LeaseTTL/2.
func (c *Coordinator) grant(name string, k Kind, now time.Time, grants map[*cPeer]float64,
	lm, cm func(*cPeer) *leases, entry func(*cPeer, string) *Entry) {
	backers := append(c.sortedPeers(false), c.sortedPeers(true)...)
	heldThrough := func(e time.Time) float64 {
		var h float64
		for _, p := range backers {
			h += lm(p).through(e)
		}
		return h
	}
	// Every peer with a commitment still valid counts, granted this
	// round or not (a broker that went quiet included).
	required := func(scale float64) float64 {
		var r float64
		for _, p := range backers {
			r += math.Max(cm(p).at(now), grants[p]*scale)
		}
		return r
	}
	var want float64
	for _, g := range grants {
		want += g
	}
	if want <= 0 {
		return
	}
	longest := now.Add(c.cfg.LeaseTTL / 2)
	ends := []time.Time{longest}
	for _, p := range backers {
		ends = lm(p).untils(now.Add(minGrant), longest, ends)
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].After(ends[j]) })
	need := required(1)
	end := time.Time{}
	for _, e := range ends {
		if heldThrough(e) >= need {
			end = e
			break
		}
	}
	scale := 1.0
	if end.IsZero() {
		// Not enough held for any lease worth granting: scale the grants
		// down to what is held for the shortest one.
		end = now.Add(minGrant)
		h := heldThrough(end)
		base := required(0)
		if h <= base {
			return
		}
		scale = (h - base) / want // leases above the old commitments
		for scale > 0 && required(scale) > h {
			scale *= 0.99
		}
	}
	for p, g := range grants {
		amt := g * scale
		if amt <= 0 {
			continue
		}
		cm(p).add(amt, end)
		e := entry(p, name)
		e.Lend[k], e.LendFor[k] = amt, int64(end.Sub(now))
	}
}
