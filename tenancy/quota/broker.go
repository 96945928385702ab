package quota

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/stratamesh/strata/internal/tokenbucket"
)

// BrokerConfig configures a broker's quota state.
type BrokerConfig struct {
	// ID names the broker ("broker/<ID>" on the wire).
	ID string
	// LeaseTTL is how long the broker's leases to its coordinator last
	// from the report that carries them (default DefaultLeaseTTL). A
	// broker cut off from its coordinator is back at its static share
	// LeaseTTL after its last report at most.
	LeaseTTL time.Duration
	// Depth is the token buckets' burst, as time at the current allowance
	// (default DefaultDepth): the ε of the package doc.
	Depth time.Duration
}

// Defaults (see the package doc for what they bound).
const (
	DefaultInterval = 250 * time.Millisecond
	DefaultLeaseTTL = 3 * time.Second
	DefaultDepth    = 50 * time.Millisecond
	DefaultMinShare = 0.05
)

func (c *BrokerConfig) fill() {
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.Depth <= 0 {
		c.Depth = DefaultDepth
	}
}

// Broker is one broker's quota state: token buckets admitting its
// tenants' publishes at their allowance, its count of their connections
// and the caps its coordinator set, and the leases it holds from and
// gives to its coordinator. Safe for concurrent use; time is passed in.
type Broker struct {
	cfg BrokerConfig

	mu      sync.Mutex
	tenants map[string]*bTenant
	coords  map[string]*bCoord // by From: normally one, two across a coordinator change
}

type bTenant struct {
	limits Limits
	// base is this broker's static share per kind: the region's static
	// share divided by the region's brokers (rates: units/s; counts:
	// the cap used without a coordinator).
	base     [NumKinds]float64
	buckets  [NumKinds]*tokenbucket.Bucket
	offered  [NumKinds]float64
	admitted [NumKinds]float64
	use      [NumKinds]float64
	refused  [NumKinds]float64
	// mesh is the mesh-wide rate (rates) or use (counts) the coordinator
	// last reported, for refusals.
	mesh [NumKinds]float64
}

// bCoord is what the broker holds from and gives to one coordinator.
type bCoord struct {
	term uint64
	sent int64     // its last Sent (to echo)
	seen time.Time // when its last message arrived
	per  map[string]*bCoordTenant
}

type bCoordTenant struct {
	borrowed [NumKinds]leases // leases from the coordinator
	lent     [NumKinds]leases // leases to the coordinator
	want     [NumKinds]float64
	cap      [NumKinds]float64
	hasCap   [NumKinds]bool
}

// NewBroker is a broker's quota state with no tenants.
func NewBroker(cfg BrokerConfig) *Broker {
	cfg.fill()
	return &Broker{cfg: cfg, tenants: map[string]*bTenant{}, coords: map[string]*bCoord{}}
}

// SetTenant sets tenant's limits and this broker's static share of each
// (base, per kind: the region's static share ÷ the region's brokers).
// A tenant with no limit left is dropped.
func (b *Broker) SetTenant(tenant string, limits Limits, base [NumKinds]float64, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	limited := false
	for k := range NumKinds {
		limited = limited || limits.Limited(k)
	}
	if !limited {
		delete(b.tenants, tenant)
		return
	}
	t := b.tenants[tenant]
	if t == nil {
		t = &bTenant{}
		b.tenants[tenant] = t
	}
	t.limits, t.base = limits, base
	for _, k := range []Kind{PublishRate, PublishBytes} {
		if limits.Limited(k) && t.buckets[k] == nil {
			t.buckets[k] = tokenbucket.New(0, b.cfg.Depth, now)
		}
		if !limits.Limited(k) {
			t.buckets[k] = nil
		}
	}
}

// DropTenant forgets tenant (deleted).
func (b *Broker) DropTenant(tenant string) {
	b.mu.Lock()
	delete(b.tenants, tenant)
	b.mu.Unlock()
}

// allowance is t's rate allowance for k at now: its static share, less
// what it lends, plus what it borrows, from every coordinator.
func (b *Broker) allowance(name string, t *bTenant, k Kind, now time.Time) float64 {
	a := t.base[k]
	for _, c := range b.coords {
		if ct := c.per[name]; ct != nil {
			a += ct.borrowed[k].at(now) - ct.lent[k].at(now)
		}
	}
	return math.Max(0, a)
}

// Admit charges one publish of size bytes by tenant (at its origin: the
// caller never charges a replicated copy) against its publish quotas. It
// returns nil when admitted, or the refusal naming the quota.
func (b *Broker) Admit(tenant string, size int, now time.Time) *Refusal {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tenants[tenant]
	if t == nil {
		return nil
	}
	units := [NumKinds]float64{PublishRate: 1, PublishBytes: float64(size)}
	var refused *Refusal
	for _, k := range []Kind{PublishRate, PublishBytes} {
		bk := t.buckets[k]
		if bk == nil {
			continue
		}
		t.offered[k] += units[k]
		bk.SetRate(b.allowance(tenant, t, k, now), now)
		if refused == nil && !bk.Allows(now) {
			refused = &Refusal{Tenant: tenant, Kind: k, Limit: t.limits.Mesh[k], Use: t.mesh[k], Allowance: bk.Rate()}
		}
	}
	if refused != nil {
		return refused
	}
	for _, k := range []Kind{PublishRate, PublishBytes} {
		if bk := t.buckets[k]; bk != nil {
			bk.Take(units[k], now)
			t.admitted[k] += units[k]
		}
	}
	return nil
}

// capOf is the most t's count k may reach on this broker at now: the cap
// from the newest coordinator heard from within the lease TTL, else the
// static share.
func (b *Broker) capOf(name string, t *bTenant, k Kind, now time.Time) float64 {
	var best *bCoord
	for _, c := range b.coords {
		ct := c.per[name]
		if ct == nil || !ct.hasCap[k] || now.Sub(c.seen) > b.cfg.LeaseTTL {
			continue
		}
		if best == nil || c.term > best.term {
			best = c
		}
	}
	if best == nil {
		return math.Floor(t.base[k])
	}
	return best.per[name].cap[k]
}

// Acquire takes one unit of count k (a connection) for tenant if its cap
// allows, else returns the refusal. Release gives it back.
func (b *Broker) Acquire(tenant string, k Kind, now time.Time) *Refusal {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tenants[tenant]
	if t == nil || !t.limits.Limited(k) {
		return nil
	}
	if c := b.capOf(tenant, t, k, now); t.use[k]+1 > c {
		t.refused[k]++
		return &Refusal{Tenant: tenant, Kind: k, Limit: t.limits.Mesh[k], Use: math.Max(t.mesh[k], t.use[k])}
	}
	t.use[k]++
	return nil
}

// Release gives back one unit of count k taken by Acquire.
func (b *Broker) Release(tenant string, k Kind) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.tenants[tenant]; t != nil && t.use[k] > 0 {
		t.use[k]--
	}
}

// SetUse sets count k's current value on this broker for tenant (topics
// and consumers it owns, bytes its topics store), for counts the broker
// does not take one by one.
func (b *Broker) SetUse(tenant string, k Kind, v float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.tenants[tenant]; t != nil {
		t.use[k] = v
	}
}

// Check says whether tenant's count k may grow by n (a topic or consumer
// to create; storage to add), without taking it: nil, or the refusal.
// Storage is checked against the mesh-wide use, the others against this
// broker's cap.
func (b *Broker) Check(tenant string, k Kind, n float64, now time.Time) *Refusal {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tenants[tenant]
	if t == nil || !t.limits.Limited(k) {
		return nil
	}
	if k == Storage {
		if t.mesh[k] >= t.limits.Mesh[k] {
			t.refused[k]++
			return &Refusal{Tenant: tenant, Kind: k, Limit: t.limits.Mesh[k], Use: t.mesh[k]}
		}
		return nil
	}
	if t.use[k]+n > b.capOf(tenant, t, k, now) {
		t.refused[k]++
		return &Refusal{Tenant: tenant, Kind: k, Limit: t.limits.Mesh[k], Use: math.Max(t.mesh[k], t.use[k])}
	}
	return nil
}

// HandOver sets every connection count to zero and reports it (a
// draining broker, before it closes its connections, so that the
// clients that reconnect elsewhere are not counted twice). The caller
// sends the returned messages at once.
func (b *Broker) HandOver(now time.Time) []*Msg {
	b.mu.Lock()
	for _, t := range b.tenants {
		t.use[Connections] = 0
	}
	b.mu.Unlock()
	return b.Report(now)
}

// Report is the broker's message to each coordinator heard from within
// the lease TTL (none before the first): its cumulative publish counts,
// its counts, its allowances, and the leases its coordinator asked for
// (at most its static share in all), reserved from now for LeaseTTL.
func (b *Broker) Report(now time.Time) []*Msg {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*Msg
	for from, c := range b.coords {
		if now.Sub(c.seen) > b.cfg.LeaseTTL {
			delete(b.coords, from)
		}
	}
	coords := make([]string, 0, len(b.coords))
	for from := range b.coords {
		coords = append(coords, from)
	}
	// The newest term first: it gets the leases it asks for before an
	// old coordinator that has not stepped down yet.
	sort.Slice(coords, func(i, j int) bool { return b.coords[coords[i]].term > b.coords[coords[j]].term })
	lentNow := map[string]*[NumKinds]float64{}
	for _, from := range coords {
		c := b.coords[from]
		m := &Msg{From: "broker/" + b.cfg.ID, Sent: nanos(now), Echo: c.sent, Tenants: map[string]*Entry{}}
		for name, t := range b.tenants {
			e := &Entry{Offered: t.offered, Admitted: t.admitted, Use: t.use, Refused: t.refused}
			for _, k := range []Kind{PublishRate, PublishBytes} {
				if t.buckets[k] != nil {
					e.Allowance[k] = b.allowance(name, t, k, now)
				}
			}
			if ct := c.per[name]; ct != nil {
				ln := lentNow[name]
				if ln == nil {
					ln = &[NumKinds]float64{}
					lentNow[name] = ln
				}
				for _, k := range []Kind{PublishRate, PublishBytes} {
					if ct.want[k] <= 0 || t.buckets[k] == nil {
						continue
					}
					// Leases to other coordinators still running count
					// against the same static share.
					var others float64
					for _, o := range b.coords {
						if o != c && o.per[name] != nil {
							others += o.per[name].lent[k].at(now)
						}
					}
					give := math.Max(0, math.Min(ct.want[k], t.base[k]-others-ln[k]))
					if give > 0 {
						ct.lent[k].add(give, now.Add(b.cfg.LeaseTTL))
						ln[k] += give
						e.Lend[k], e.LendFor[k] = give, int64(b.cfg.LeaseTTL)
					}
				}
			}
			m.Tenants[name] = e
		}
		out = append(out, m)
	}
	return out
}

// Hello is the broker's first message to a coordinator it has not heard
// from (from a coordinator's announcement), so that the coordinator
// learns it: a report with no leases.
func (b *Broker) Hello(now time.Time) *Msg {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := &Msg{From: "broker/" + b.cfg.ID, Sent: nanos(now), Tenants: map[string]*Entry{}}
	for name, t := range b.tenants {
		m.Tenants[name] = &Entry{Offered: t.offered, Admitted: t.admitted, Use: t.use, Refused: t.refused}
	}
	return m
}

// Receive takes a coordinator's message: the leases it grants (valid
// until this broker's echoed send + LendFor), what it asks this broker
// to lend, the caps on its counts and the mesh-wide figures.
func (b *Broker) Receive(m *Msg, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.coords[m.From]
	if c == nil {
		c = &bCoord{per: map[string]*bCoordTenant{}}
		b.coords[m.From] = c
	}
	if m.Sent < c.sent {
		return // reordered: an older message
	}
	c.term, c.sent, c.seen = m.Term, m.Sent, now
	echo := fromNanos(m.Echo)
	for name, e := range m.Tenants {
		t := b.tenants[name]
		if t == nil {
			continue
		}
		ct := c.per[name]
		if ct == nil {
			ct = &bCoordTenant{}
			c.per[name] = ct
		}
		for k := range NumKinds {
			if k.Rate() {
				ct.want[k] = e.Want[k]
				if e.Lend[k] > 0 && !echo.IsZero() {
					ct.borrowed[k].add(e.Lend[k], echo.Add(time.Duration(e.LendFor[k])))
				}
				t.mesh[k] = e.Rate[k]
				continue
			}
			ct.cap[k], ct.hasCap[k] = e.Cap[k], true
			t.mesh[k] = e.Use[k]
		}
	}
}

// Allowance is tenant's current allowance for rate k on this broker
// (units/s), and whether k is limited.
func (b *Broker) Allowance(tenant string, k Kind, now time.Time) (float64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tenants[tenant]
	if t == nil || t.buckets[k] == nil {
		return 0, false
	}
	return b.allowance(tenant, t, k, now), true
}
