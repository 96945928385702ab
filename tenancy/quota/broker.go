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
	// held counts what Acquire took per tenant, limited or not (the
	// connections open before a tenant got a quota count once it has
	// one); entries at zero are dropped.
	held map[string]*[NumKinds]float64
	// coords are the coordinators heard from within the lease TTL, by
	// name and term: normally one, two across a coordinator change (each
	// incarnation is a party of its own, with its own clock to echo).
	coords map[coordKey]*bCoord
	// terms is the highest term heard from each coordinator name: caps
	// from a lower one are ignored from then on (the newer coordinator
	// counts this broker's caps from its reports and no others).
	terms map[string]uint64
}

// coordKey names one incarnation of a region's coordinator.
type coordKey struct {
	from string
	term uint64
}

type bTenant struct {
	limits Limits
	// base is this broker's static share per kind: the region's static
	// share divided by the region's brokers (rates: units/s; counts:
	// the cap used before a coordinator sets one).
	base     [NumKinds]float64
	buckets  [NumKinds]*tokenbucket.Bucket
	offered  [NumKinds]float64
	admitted [NumKinds]float64
	use      [NumKinds]float64
	refused  [NumKinds]float64
	// mesh is the mesh-wide rate (rates) or use (counts) the coordinator
	// last reported, for refusals; reported is this broker's use in its
	// last report (the mesh figure is at most that recent).
	mesh     [NumKinds]float64
	reported [NumKinds]float64
	// synced is when buckets[k]'s rate was last brought up to date: the
	// allowance changes when a lease expires, with no call to say so, so
	// the bucket is refilled at each rate in turn (sync).
	synced [NumKinds]time.Time
	// next is the first lease expiry after synced (zero: none): until
	// then the bucket's rate is the allowance and Admit need not look.
	next [NumKinds]time.Time
	// cap is count k's cap: the newest one set by the coordinator of the
	// highest term (capTerm, capSent: its term and Sent), kept after that
	// coordinator goes quiet (the coordinators count it until a newer cap
	// replaces it); hasCap false: none yet, floor(base) applies.
	cap     [NumKinds]float64
	capTerm [NumKinds]uint64
	capSent [NumKinds]int64
	hasCap  [NumKinds]bool
}

// bCoord is what the broker holds from and gives to one coordinator.
type bCoord struct {
	sent int64     // its last Sent (to echo)
	seen time.Time // when its last message arrived
	per  map[string]*bCoordTenant
}

type bCoordTenant struct {
	borrowed [NumKinds]leases // leases from the coordinator
	lent     [NumKinds]leases // leases to the coordinator
	want     [NumKinds]float64
}

// NewBroker is a broker's quota state with no tenants.
func NewBroker(cfg BrokerConfig) *Broker {
	cfg.fill()
	return &Broker{cfg: cfg, tenants: map[string]*bTenant{}, held: map[string]*[NumKinds]float64{}, coords: map[coordKey]*bCoord{}, terms: map[string]uint64{}}
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
		if h := b.held[tenant]; h != nil {
			t.use[Connections] = h[Connections]
		}
		b.tenants[tenant] = t
	}
	t.limits, t.base = limits, base
	for _, k := range rateKinds {
		if limits.Limited(k) && t.buckets[k] == nil {
			t.buckets[k] = tokenbucket.New(0, b.cfg.Depth, now)
			t.synced[k] = now
		}
		if !limits.Limited(k) {
			t.buckets[k] = nil
		}
		b.sync(tenant, t, k, now)
	}
}

// DropTenant forgets tenant (deleted).
func (b *Broker) DropTenant(tenant string) {
	b.mu.Lock()
	delete(b.tenants, tenant)
	b.mu.Unlock()
}

// rateKinds are the leased kinds.
var rateKinds = [...]Kind{PublishRate, PublishBytes}

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

// nextChange is the first lease expiry of t's rate k in (after, upto]:
// where its allowance changes with no call to say so.
func (b *Broker) nextChange(name string, k Kind, after, upto time.Time) (time.Time, bool) {
	var next time.Time
	ok := false
	scan := func(l leases) {
		for _, h := range l {
			if h.until.After(after) && !h.until.After(upto) && (!ok || h.until.Before(next)) {
				next, ok = h.until, true
			}
		}
	}
	for _, c := range b.coords {
		if ct := c.per[name]; ct != nil {
			scan(ct.borrowed[k])
			scan(ct.lent[k])
		}
	}
	return next, ok
}

// sync brings t's bucket for k to now at the allowance in force at each
// moment since it was last synced: a bucket refills at the rate set last,
// so without the steps a lease that expired since the last publish would
// be paid for at the old rate (over the window bound when the allowance
// fell).
func (b *Broker) sync(name string, t *bTenant, k Kind, now time.Time) {
	bk := t.buckets[k]
	if bk == nil {
		return
	}
	for {
		next, ok := b.nextChange(name, k, t.synced[k], now)
		if !ok {
			break
		}
		bk.SetRate(b.allowance(name, t, k, next), next)
		t.synced[k] = next
	}
	bk.SetRate(b.allowance(name, t, k, now), now)
	if now.After(t.synced[k]) {
		t.synced[k] = now
	}
	t.next[k], _ = b.nextChange(name, k, t.synced[k], farFuture)
}

// farFuture is later than any lease.
var farFuture = time.Unix(1<<62, 0)

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
	return b.admit(tenant, t, size, now)
}

// AdmitClock is Admit at clock's time, read only when tenant has limits
// here: a publish of a tenant without quotas costs a map lookup and no
// clock read (~40-60 ns on a virtual machine), on the data path.
func (b *Broker) AdmitClock(tenant string, size int, clock func() time.Time) *Refusal {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tenants[tenant]
	if t == nil {
		return nil
	}
	return b.admit(tenant, t, size, clock())
}

// admit is Admit for tracked tenant t; b.mu is held.
func (b *Broker) admit(tenant string, t *bTenant, size int, now time.Time) *Refusal {
	units := [NumKinds]float64{PublishRate: 1, PublishBytes: float64(size)}
	var refused *Refusal
	for _, k := range rateKinds {
		bk := t.buckets[k]
		if bk == nil {
			continue
		}
		t.offered[k] += units[k]
		if n := t.next[k]; !n.IsZero() && !now.Before(n) {
			b.sync(tenant, t, k, now) // a lease expired since
		}
		if refused == nil && !bk.Allows(now) {
			refused = &Refusal{Tenant: tenant, Kind: k, Limit: t.limits.Mesh[k], Use: t.mesh[k], Allowance: bk.Rate()}
		}
	}
	if refused != nil {
		return refused
	}
	for _, k := range rateKinds {
		if bk := t.buckets[k]; bk != nil {
			bk.Take(units[k], now)
			t.admitted[k] += units[k]
		}
	}
	return nil
}

// capOf is the most t's count k may reach on this broker: the newest cap
// from the coordinator of the highest term, else the static share.
func (b *Broker) capOf(t *bTenant, k Kind) float64 {
	if t.hasCap[k] {
		return t.cap[k]
	}
	return math.Floor(t.base[k])
}

// Acquire takes one unit of count k (a connection) for tenant if its cap
// allows, else returns the refusal. Release gives it back.
func (b *Broker) Acquire(tenant string, k Kind, now time.Time) *Refusal {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tenants[tenant]
	if t != nil && t.limits.Limited(k) {
		if c := b.capOf(t, k); t.use[k]+1 > c {
			t.refused[k]++
			return &Refusal{Tenant: tenant, Kind: k, Limit: t.limits.Mesh[k], Use: meshCount(t, k)}
		}
	}
	h := b.held[tenant]
	if h == nil {
		h = &[NumKinds]float64{}
		b.held[tenant] = h
	}
	h[k]++
	if t != nil {
		t.use[k] = h[k]
	}
	return nil
}

// meshCount is the mesh-wide use of count k as this broker can tell it:
// the coordinator's last figure, with this broker's own change since its
// last report.
func meshCount(t *bTenant, k Kind) float64 {
	return math.Max(t.use[k], t.mesh[k]+t.use[k]-t.reported[k])
}

// Release gives back one unit of count k taken by Acquire.
func (b *Broker) Release(tenant string, k Kind) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.held[tenant]
	if h == nil || h[k] <= 0 {
		return
	}
	h[k]--
	if t := b.tenants[tenant]; t != nil {
		t.use[k] = h[k]
	}
	if *h == ([NumKinds]float64{}) {
		delete(b.held, tenant)
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
	if t.use[k]+n > b.capOf(t, k) {
		t.refused[k]++
		return &Refusal{Tenant: tenant, Kind: k, Limit: t.limits.Mesh[k], Use: meshCount(t, k)}
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
	for _, h := range b.held {
		h[Connections] = 0
	}
	b.mu.Unlock()
	return b.Report(now)
}

// entry is t's report: cumulative publish counts, counts, the caps it
// holds, its allowances at now.
func (b *Broker) entry(name string, t *bTenant, now time.Time) *Entry {
	e := &Entry{Offered: t.offered, Admitted: t.admitted, Use: t.use, Refused: t.refused}
	t.reported = t.use
	for k := range NumKinds {
		switch {
		case k.Rate() && t.buckets[k] != nil:
			e.Allowance[k] = b.allowance(name, t, k, now)
		case !k.Rate() && k != Storage && t.limits.Limited(k):
			e.Cap[k] = b.capOf(t, k)
		}
	}
	return e
}

// Report is the broker's message to each coordinator heard from within
// the lease TTL (none before the first; To names it): its cumulative
// publish counts, its counts and caps, its allowances, and the leases
// its coordinator asked for (at most its static share in all, over
// every coordinator), reserved until LeaseTTL after the coordinator's
// message it echoes arrived.
func (b *Broker) Report(now time.Time) []*Msg {
	b.mu.Lock()
	defer b.mu.Unlock()
	// Bring every bucket to now before the leases change.
	for name, t := range b.tenants {
		for _, k := range rateKinds {
			b.sync(name, t, k, now)
		}
	}
	for key, c := range b.coords {
		// A coordinator's leases are valid at it until its echoed Sent +
		// LeaseTTL at most, which is before c.seen + LeaseTTL here: past
		// that nothing of ours is held there, and it is forgotten.
		if now.Sub(c.seen) > b.cfg.LeaseTTL {
			delete(b.coords, key)
		}
	}
	keys := make([]coordKey, 0, len(b.coords))
	for key := range b.coords {
		keys = append(keys, key)
	}
	// The newest term first: it gets the leases it asks for before an
	// old coordinator that has not stepped down yet.
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].term != keys[j].term {
			return keys[i].term > keys[j].term
		}
		return keys[i].from < keys[j].from
	})
	out := make([]*Msg, 0, len(keys))
	lentNow := map[string]*[NumKinds]float64{}
	for _, key := range keys {
		c := b.coords[key]
		m := &Msg{From: "broker/" + b.cfg.ID, Sent: nanos(now), Echo: c.sent, To: key.from, ToTerm: key.term, Tenants: map[string]*Entry{}}
		for name, t := range b.tenants {
			e := b.entry(name, t, now)
			if ct := c.per[name]; ct != nil {
				ln := lentNow[name]
				if ln == nil {
					ln = &[NumKinds]float64{}
					lentNow[name] = ln
				}
				for _, k := range rateKinds {
					// A superseded coordinator gets no new leases: what it
					// holds lapses, and its successor asks for its own.
					if ct.want[k] <= 0 || t.buckets[k] == nil || key.term < b.terms[key.from] {
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
						// Valid at the coordinator until its echoed Sent +
						// LeaseTTL, on its clock: that Sent came before
						// c.seen, so the lease is reserved here until c.seen
						// + LeaseTTL, on this broker's clock.
						ct.lent[k].addMade(give, c.seen.Add(b.cfg.LeaseTTL), now)
						ln[k] += give
						e.Lend[k], e.LendFor[k] = give, int64(b.cfg.LeaseTTL)
					}
				}
			}
			m.Tenants[name] = e
		}
		out = append(out, m)
	}
	// What was lent is no longer this broker's from now.
	for name, t := range b.tenants {
		for _, k := range rateKinds {
			b.sync(name, t, k, now)
		}
	}
	return out
}

// Hello is the broker's first message to a coordinator it has not heard
// from (from a coordinator's announcement), so that the coordinator
// learns it: a report with no leases. The caller sets To.
func (b *Broker) Hello(now time.Time) *Msg {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := &Msg{From: "broker/" + b.cfg.ID, Sent: nanos(now), Tenants: map[string]*Entry{}}
	for name, t := range b.tenants {
		m.Tenants[name] = b.entry(name, t, now)
	}
	return m
}

// Receive takes a coordinator's message: the leases it grants (valid
// until this broker's echoed send + LendFor), what it asks this broker
// to lend, the caps on its counts and the mesh-wide figures.
func (b *Broker) Receive(m *Msg, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := coordKey{m.From, m.Term}
	c := b.coords[key]
	if c == nil {
		c = &bCoord{per: map[string]*bCoordTenant{}}
		b.coords[key] = c
	}
	if m.Sent < c.sent {
		return // reordered: an older message
	}
	c.sent, c.seen = m.Sent, now
	if m.Term > b.terms[m.From] {
		b.terms[m.From] = m.Term
	}
	newest := m.Term >= b.terms[m.From]
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
				if t.buckets[k] != nil {
					b.sync(name, t, k, now)
				}
				ct.want[k] = e.Want[k]
				if !echo.IsZero() {
					// A release: the coordinator counts the leases it had
					// (those of reports up to the echo) only up to Want.
					ct.lent[k].clip(e.Want[k], echo)
				}
				if e.Lend[k] > 0 && !echo.IsZero() {
					ct.borrowed[k].add(e.Lend[k], echo.Add(time.Duration(e.LendFor[k])))
				}
				t.mesh[k] = e.Rate[k]
				if t.buckets[k] != nil {
					b.sync(name, t, k, now)
				}
				continue
			}
			t.mesh[k] = e.Use[k]
			if k == Storage || !t.limits.Limited(k) || e.Caps&(1<<k) == 0 || !newest {
				continue
			}
			// The newest cap of the highest term wins; an older term's
			// is ignored once a newer one has set one.
			if !t.hasCap[k] || m.Term > t.capTerm[k] || (m.Term == t.capTerm[k] && m.Sent >= t.capSent[k]) {
				t.cap[k], t.capTerm[k], t.capSent[k], t.hasCap[k] = e.Cap[k], m.Term, m.Sent, true
			}
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

// Cap is tenant's cap on count k on this broker (the most its use may
// reach), and whether k is limited with a cap (storage has none).
func (b *Broker) Cap(tenant string, k Kind) (float64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.tenants[tenant]
	if t == nil || k.Rate() || k == Storage || !t.limits.Limited(k) {
		return 0, false
	}
	return b.capOf(t, k), true
}
