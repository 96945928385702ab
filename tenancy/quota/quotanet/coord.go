package quotanet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/tenancy/quota"
)

// Coordinator is one broker's candidacy for its region's quota
// coordinator: it campaigns in the region's etcd (election
// "quota/coordinator") and, while it leads, runs a quota.Coordinator of
// term = the leadership's revision: it receives the region's brokers'
// reports and the other regions' coordinators' messages, Ticks every
// Interval, sends what the core returns, announces itself to the
// region's brokers, and answers usage requests. Losing the leadership
// (its etcd lease) stops the core at once; the next term starts fresh.
type Coordinator struct {
	cfg   Config
	clock Clock

	limits atomic.Pointer[map[string]quota.Limits]
	term   atomic.Uint64 // while leading; 0 otherwise
	usage  atomic.Pointer[[]quota.Usage]

	dropped  atomic.Uint64 // inbound messages dropped: inbox full
	bad      atomic.Uint64 // inbound messages refused by decodeInbound
	unrouted atomic.Uint64 // core messages whose receiver could not be told

	bus     Bus
	ctx     context.Context
	cancel  context.CancelFunc
	started atomic.Bool
	crashed atomic.Bool // tests: stop without giving up the candidacy
	done    chan struct{}
	once    sync.Once
}

// NewCoordinator is a broker's coordinator candidacy, not yet
// campaigning. Errors: cfg's (Config.Validate), or no Config.Store.
func NewCoordinator(cfg Config) (*Coordinator, error) {
	cfg = cfg.withDefaults()
	err := cfg.Validate()
	if cfg.Store == nil {
		err = errors.Join(err, errors.New("quotanet: Config.Store is required by a Coordinator (its election)"))
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{cfg: cfg, clock: cfg.Clock, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	empty := map[string]quota.Limits{}
	c.limits.Store(&empty)
	return c, nil
}

// SetTenants sets every tenant's limits for the coordinator (applied at
// its next Tick, within one Interval). The map is not modified
// afterwards by the caller.
func (c *Coordinator) SetTenants(limits map[string]quota.Limits) { c.limits.Store(&limits) }

// Term is the term this broker coordinates in, 0 when it does not lead.
func (c *Coordinator) Term() uint64 { return c.term.Load() }

// Usage is every tenant's usage as of the last Tick while this broker
// leads (nil otherwise), sorted by tenant.
func (c *Coordinator) Usage() []quota.Usage {
	if p := c.usage.Load(); p != nil {
		return *p
	}
	return nil
}

// Start campaigns (in the background) and, on winning, coordinates over
// bus. Call once.
func (c *Coordinator) Start(bus Bus) error {
	if bus == nil {
		return errors.New("quotanet: Coordinator.Start: nil bus")
	}
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("quotanet: Coordinator.Start called twice")
	}
	c.bus = bus
	go c.run()
	return nil
}

// Close stops coordinating and withdraws the candidacy (its etcd lease
// is revoked, so another broker leads at once). Idempotent; it waits for
// the goroutine.
func (c *Coordinator) Close(ctx context.Context) error {
	c.once.Do(c.cancel)
	if !c.started.Load() {
		return nil
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("quotanet: close coordinator: %w", ctx.Err())
	}
}

// run campaigns until Close: a lost lease is replaced by a new one, a
// failed campaign retried with backoff (0.2 s doubling to 2 s).
func (c *Coordinator) run() {
	defer close(c.done)
	backoff := 200 * time.Millisecond
	wait := func() bool {
		select {
		case <-c.ctx.Done():
			return false
		case <-time.After(backoff):
			backoff = min(2*backoff, 2*time.Second)
			return true
		}
	}
	for c.ctx.Err() == nil {
		lease, err := c.cfg.Store.GrantLease(c.ctx, c.cfg.ElectionTTL)
		if err != nil {
			if c.ctx.Err() == nil {
				c.cfg.Logger.Warn("quota coordinator: grant election lease", "err", err)
			}
			if !wait() {
				return
			}
			continue
		}
		c.campaign(lease, wait)
		if c.crashed.Load() {
			lease.Orphan()
			return
		}
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := lease.Revoke(rctx); err != nil && c.ctx.Err() == nil {
			c.cfg.Logger.Debug("quota coordinator: revoke election lease", "err", err)
		}
		cancel()
	}
}

// campaign campaigns with lease and leads while it wins, until the lease
// is lost or Close.
func (c *Coordinator) campaign(lease *meta.Lease, wait func() bool) {
	for c.ctx.Err() == nil {
		l, err := c.cfg.Store.Campaign(c.ctx, election, c.cfg.BrokerID, lease)
		if errors.Is(err, meta.ErrLeaseLost) {
			return
		}
		if err != nil {
			if c.ctx.Err() == nil {
				c.cfg.Logger.Warn("quota coordinator: campaign", "err", err)
			}
			if !wait() {
				return
			}
			continue
		}
		c.lead(l)
		select {
		case <-lease.Done():
			return
		default:
		}
		if c.ctx.Err() == nil {
			// Still holding the lease but no longer leading: resign and
			// campaign again.
			_ = l.Resign(c.ctx)
		}
	}
}

// inbound is a message for the coordinator's goroutine.
type inbound struct {
	o       origin
	hello   bool   // fromRegion on wan.0: leases stripped
	reply   []byte // usage requests
	usage   bool
	payload []byte
}

// lead runs the core of term l.Rev() until the leadership ends or Close.
func (c *Coordinator) lead(l *meta.Leadership) {
	term := uint64(l.Rev())
	r := c.cfg.Region
	core := quota.NewCoordinator(quota.CoordConfig{
		Region: r, Regions: c.cfg.Regions, Term: term, Brokers: c.cfg.Brokers,
		LeaseTTL: c.cfg.LeaseTTL, Stale: c.stale(),
	}, c.clock())
	inbox := make(chan inbound, inboxSize)
	put := func(in inbound) {
		select {
		case inbox <- in:
		default:
			c.dropped.Add(1)
		}
	}
	var unsubs []func()
	defer func() {
		for _, u := range unsubs {
			u()
		}
		c.term.Store(0)
		c.usage.Store(nil)
	}()
	for _, s := range []struct {
		subject string
		in      inbound
	}{
		{coordSubject(r, term), inbound{o: fromBroker}},
		{wanSubject(r, term), inbound{o: fromRegion}},
		{wanSubject(r, 0), inbound{o: fromRegion, hello: true}},
		{usageSubject(r), inbound{usage: true}},
	} {
		in := s.in
		unsub, err := c.bus.SubscribeInternal(s.subject, func(_, reply, _, payload []byte) {
			m := in
			m.payload, m.reply = bytes.Clone(payload), bytes.Clone(reply)
			put(m)
		})
		if err != nil {
			c.cfg.Logger.Error("quota coordinator: subscribe", "subject", s.subject, "err", err)
			_ = l.Resign(c.ctx)
			return
		}
		unsubs = append(unsubs, unsub)
	}
	c.term.Store(term)
	c.cfg.Logger.Info("quota coordinator elected", "term", term)
	lc := &leader{c: c, core: core, term: term, peers: map[string]*peerSent{}}
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	lc.tick()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-l.Done():
			c.cfg.Logger.Warn("quota coordinator: leadership lost (election lease ended)", "term", term)
			return
		case in := <-inbox:
			lc.handle(in)
		case <-t.C:
			lc.tick()
		}
	}
}

// stale is the core's Stale: how long a peer may go unheard before it
// counts as unreachable (quota.CoordConfig's default, at this Interval).
func (c *Coordinator) stale() time.Duration { return 2*c.cfg.Interval + c.cfg.LeaseTTL/4 }

// leader is one term's state, owned by lead's goroutine.
type leader struct {
	c       *Coordinator
	core    *quota.Coordinator
	term    uint64
	applied *map[string]quota.Limits
	peers   map[string]*peerSent
}

// peerSent is what the driver remembers of a peer: a region peer's
// newest term (to drop an older coordinator's messages while the newer
// is heard from) and when it was last heard.
type peerSent struct {
	term uint64
	at   time.Time
}

func (lc *leader) handle(in inbound) {
	c := lc.c
	now := c.clock()
	if in.usage {
		lc.answerUsage(in, now)
		return
	}
	m, err := decodeInbound(in.o, c.cfg.Region, c.cfg.Regions, in.payload)
	if err != nil {
		c.bad.Add(1)
		c.cfg.Logger.Debug("quota coordinator: dropped a message", "err", err)
		return
	}
	p := lc.peers[m.From]
	if p == nil {
		p = &peerSent{term: m.Term}
		lc.peers[m.From] = p
	}
	if in.o == fromRegion {
		if m.Term < p.term && now.Sub(p.at) <= c.stale() {
			return // an older coordinator of that region, still running briefly
		}
		if m.Term != p.term {
			*p = peerSent{term: m.Term}
		}
	}
	if in.hello {
		m = &quota.Msg{From: m.From, Term: m.Term, Sent: m.Sent}
	}
	p.at = now
	lc.core.Receive(m, now)
}

func (lc *leader) answerUsage(in inbound, now time.Time) {
	if len(in.reply) == 0 {
		return
	}
	tenant, err := parseUsageRequest(in.payload)
	var ans []byte
	if err != nil {
		ans = encodeUsageAnswer(nil, err)
	} else {
		u, ok := lc.core.Usage(tenant, now)
		if !ok {
			u = quota.Usage{Tenant: tenant, Quotas: []quota.QuotaUsage{}}
		}
		ans = encodeUsageAnswer(&u, nil)
	}
	lc.c.bus.PublishInternal(in.reply, nil, nil, ans)
}

// tick applies changed limits, runs the core's round and sends its
// messages, announces this coordinator to the region's brokers and
// (a hello) to every region it sent nothing to, and keeps the usage.
func (lc *leader) tick() {
	c := lc.c
	now := c.clock()
	if lp := c.limits.Load(); lp != lc.applied {
		if lc.applied != nil {
			for t := range *lc.applied {
				if _, ok := (*lp)[t]; !ok {
					lc.core.SetTenant(t, quota.Limits{})
				}
			}
		}
		for t, l := range *lp {
			lc.core.SetTenant(t, l)
		}
		lc.applied = lp
	}
	for from, p := range lc.peers {
		if now.Sub(p.at) > c.cfg.LeaseTTL+2*c.stale() {
			delete(lc.peers, from)
		}
	}
	r := c.cfg.Region
	sent := map[string]bool{}
	for _, m := range lc.core.Tick(now) {
		// The core names each message's receiver (To; ToTerm for another
		// region's coordinator).
		if id, ok := strings.CutPrefix(m.To, "broker/"); ok {
			c.bus.PublishInternal([]byte(brokerSubject(r, id)), nil, nil, m.Encode())
			continue
		}
		remote, ok := strings.CutPrefix(m.To, "region/")
		if !ok || remote == r {
			c.unrouted.Add(1)
			continue
		}
		if c.cfg.WAN != nil {
			sent[remote] = true
			_ = c.cfg.WAN(remote, wanSubject(remote, m.ToTerm), m.Encode())
		}
	}
	hello := (&quota.Msg{From: lc.core.From(), Term: lc.term, Sent: now.UnixNano()}).Encode()
	c.bus.PublishInternal([]byte(leaderSubject(r)), nil, nil, hello)
	if c.cfg.WAN != nil {
		for _, remote := range c.cfg.Regions {
			if remote != r && !sent[remote] {
				_ = c.cfg.WAN(remote, wanSubject(remote, 0), hello)
			}
		}
	}
	tenants := lc.core.Tenants()
	usage := make([]quota.Usage, 0, len(tenants))
	for _, t := range tenants {
		if u, ok := lc.core.Usage(t, now); ok {
			usage = append(usage, u)
		}
	}
	c.usage.Store(&usage)
}
