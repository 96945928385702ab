package quotanet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/tenancy/quota"
)

// ErrNoCoordinator: no quota coordinator of the region has been heard
// from lately, or it did not answer in time.
var ErrNoCoordinator = errors.New("quotanet: no quota coordinator in the region")

// ErrClosed: the Agent or Coordinator is closed (or never started).
var ErrClosed = errors.New("quotanet: closed")

// inboxSize bounds the messages waiting for a driver's goroutine; more
// are dropped (and counted): the core loses nothing by a lost message
// but that round's leases.
const inboxSize = 256

// Agent is one broker's quota driver: it owns the broker's quota.Broker
// (admission by token buckets, counts and caps, leases with the region's
// coordinator), reports to the coordinator every Interval and applies
// what it sends. It implements broker.Quotas and jetstream.Quotas; a
// refusal is a *quota.Refusal.
type Agent struct {
	cfg   Config
	b     *quota.Broker
	clock Clock

	mu      sync.Mutex
	limits  map[string]quota.Limits
	refused map[string]*[quota.NumKinds]uint64
	held    map[string]*[quota.NumKinds]uint64

	// term is the newest coordinator term heard from; heard (Clock,
	// Unix ns) when it was last heard from.
	term  atomic.Uint64
	heard atomic.Int64

	bus     Bus
	inbox   chan []byte // coordinator messages and announcements
	dropped atomic.Uint64
	reqMu   sync.Mutex
	reqs    map[uint64]chan []byte
	nextReq uint64

	started  atomic.Bool
	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
	unsubs   []func()
}

// NewAgent is a broker's Agent with no tenants; it admits everything
// until SetTenants gives it limits. Errors: cfg's (Config.Validate).
func NewAgent(cfg Config) (*Agent, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Agent{
		cfg:     cfg,
		clock:   cfg.Clock,
		b:       quota.NewBroker(quota.BrokerConfig{ID: cfg.BrokerID, LeaseTTL: cfg.LeaseTTL}),
		limits:  map[string]quota.Limits{},
		refused: map[string]*[quota.NumKinds]uint64{},
		held:    map[string]*[quota.NumKinds]uint64{},
		inbox:   make(chan []byte, inboxSize),
		reqs:    map[uint64]chan []byte{},
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}, nil
}

// SetTenants sets every tenant's limits (tenants absent are dropped):
// each gets this broker's static share, quota.BrokerBase(limits, region,
// len(Regions), Brokers). Safe at any time; it takes effect at once.
func (a *Agent) SetTenants(limits map[string]quota.Limits) {
	now := a.clock()
	a.mu.Lock()
	defer a.mu.Unlock()
	for t := range a.limits {
		if _, ok := limits[t]; !ok {
			a.b.DropTenant(t)
			delete(a.limits, t)
		}
	}
	for t, l := range limits {
		a.b.SetTenant(t, l, quota.BrokerBase(l, a.cfg.Region, len(a.cfg.Regions), a.cfg.Brokers), now)
		a.limits[t] = l
	}
}

// AdmitPublish implements broker.Quotas and jetstream.Quotas: one
// publish of size bytes at its origin. A refusal is a *quota.Refusal.
func (a *Agent) AdmitPublish(tenant string, size int) error {
	if r := a.b.AdmitClock(tenant, size, a.clock); r != nil {
		a.count(a.refused, tenant, r.Kind)
		return r
	}
	return nil
}

// Connect implements broker.Quotas: one connection of tenant, within
// this broker's cap.
func (a *Agent) Connect(tenant string) error {
	if r := a.b.Acquire(tenant, quota.Connections, a.clock()); r != nil {
		a.count(a.refused, tenant, r.Kind)
		return r
	}
	return nil
}

// Disconnect implements broker.Quotas.
func (a *Agent) Disconnect(tenant string) { a.b.Release(tenant, quota.Connections) }

// Check implements jetstream.Quotas.
func (a *Agent) Check(tenant string, k quota.Kind, n float64) error {
	if r := a.b.Check(tenant, k, n, a.clock()); r != nil {
		a.count(a.refused, tenant, r.Kind)
		return r
	}
	return nil
}

// SetUse implements jetstream.Quotas.
func (a *Agent) SetUse(tenant string, k quota.Kind, v float64) { a.b.SetUse(tenant, k, v) }

// RecordHold counts one publish of tenant held back by quota k (a
// producer_request_hold policy), for the holds metric.
func (a *Agent) RecordHold(tenant string, k quota.Kind) { a.count(a.held, tenant, k) }

func (a *Agent) count(m map[string]*[quota.NumKinds]uint64, tenant string, k quota.Kind) {
	if k >= quota.NumKinds {
		return
	}
	a.mu.Lock()
	c := m[tenant]
	if c == nil {
		c = &[quota.NumKinds]uint64{}
		m[tenant] = c
	}
	c[k]++
	a.mu.Unlock()
}

// Stat is one limited quota of one tenant at this broker.
type Stat struct {
	Tenant string
	Kind   quota.Kind
	// Allowance is this broker's allowance now (rates, units/s; 0 for
	// counts).
	Allowance float64
	// Refusals and Holds count refusals and holds since the Agent
	// started.
	Refusals, Holds uint64
}

// Stats lists every limited quota of every tenant, sorted by tenant then
// quota.
func (a *Agent) Stats() []Stat {
	now := a.clock()
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Stat
	for t, l := range a.limits {
		for k := range quota.NumKinds {
			if !l.Limited(k) {
				continue
			}
			s := Stat{Tenant: t, Kind: k}
			if k.Rate() {
				s.Allowance, _ = a.b.Allowance(t, k, now)
			}
			if c := a.refused[t]; c != nil {
				s.Refusals = c[k]
			}
			if c := a.held[t]; c != nil {
				s.Holds = c[k]
			}
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tenant != out[j].Tenant {
			return out[i].Tenant < out[j].Tenant
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

// Allowance is tenant's allowance of rate k at this broker now (units/s)
// and whether k is limited.
func (a *Agent) Allowance(tenant string, k quota.Kind) (float64, bool) {
	return a.b.Allowance(tenant, k, a.clock())
}

// Term is the newest coordinator term this broker has heard from (0:
// none yet).
func (a *Agent) Term() uint64 { return a.term.Load() }

// Start subscribes the broker's quota subjects on bus and starts
// reporting. Call once.
func (a *Agent) Start(bus Bus) error {
	if bus == nil {
		return errors.New("quotanet: Agent.Start: nil bus")
	}
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("quotanet: Agent.Start called twice")
	}
	a.bus = bus
	enqueue := func(_, _, _, payload []byte) {
		select {
		case a.inbox <- bytes.Clone(payload):
		default:
			a.dropped.Add(1)
		}
	}
	r, id := a.cfg.Region, a.cfg.BrokerID
	for _, s := range []struct {
		subject string
		fn      func(subject, reply, hdr, payload []byte)
	}{
		{brokerSubject(r, id), enqueue},
		{leaderSubject(r), enqueue},
		{replyPrefix(r, id) + "*", a.answer},
	} {
		unsub, err := bus.SubscribeInternal(s.subject, s.fn)
		if err != nil {
			a.unsubscribe()
			close(a.done)
			return fmt.Errorf("quotanet: subscribe %s: %w", s.subject, err)
		}
		a.unsubs = append(a.unsubs, unsub)
	}
	go a.run()
	return nil
}

func (a *Agent) unsubscribe() {
	for _, u := range a.unsubs {
		u()
	}
	a.unsubs = nil
}

// run is the Agent's goroutine: reports every Interval, applies the
// coordinator's messages as they come.
func (a *Agent) run() {
	defer close(a.done)
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case b := <-a.inbox:
			a.receive(b)
		case <-t.C:
			a.report(a.b.Report(a.clock()))
		}
	}
}

// receive applies a coordinator's message or announcement. A message of
// a term older than the newest heard is dropped while that one is heard
// from (within LeaseTTL): the core keys its coordinators by sender, and a
// region's coordinators of two terms share one (see the package doc).
// Once the newest is silent, any term is taken (an etcd restored from a
// backup counts revisions again from lower).
func (a *Agent) receive(b []byte) {
	m, err := decodeInbound(fromCoordinator, a.cfg.Region, a.cfg.Regions, b)
	if err != nil {
		a.cfg.Logger.Debug("quota: dropped a coordinator message", "err", err)
		return
	}
	now := a.clock()
	cur := a.term.Load()
	switch {
	case m.Term < cur && a.coordinatorHeard():
		return
	case m.Term != cur:
		a.term.Store(m.Term)
		a.heard.Store(now.UnixNano())
		// A new coordinator learns of this broker from its hello.
		a.report([]*quota.Msg{a.b.Hello(now)})
	default:
		a.heard.Store(now.UnixNano())
	}
	if len(m.Tenants) > 0 || m.Echo != 0 {
		a.b.Receive(m, now)
	}
}

// report sends msgs (the broker's reports, at most one per coordinator
// it knows) to the newest coordinator; with none, a hello when a
// coordinator has announced itself lately.
func (a *Agent) report(msgs []*quota.Msg) {
	term := a.term.Load()
	if term == 0 {
		return
	}
	if len(msgs) == 0 {
		if !a.coordinatorHeard() {
			return
		}
		msgs = []*quota.Msg{a.b.Hello(a.clock())}
	}
	for _, m := range msgs {
		// A report names its coordinator's term (ToTerm); a hello goes
		// to the newest.
		t := m.ToTerm
		if t == 0 {
			m.To, m.ToTerm, t = "region/"+a.cfg.Region, term, term
		}
		a.bus.PublishInternal([]byte(coordSubject(a.cfg.Region, t)), nil, nil, m.Encode())
	}
}

// coordinatorHeard says whether the newest coordinator was heard from
// within LeaseTTL.
func (a *Agent) coordinatorHeard() bool {
	h := a.heard.Load()
	return h != 0 && a.clock().Sub(time.Unix(0, h)) <= a.cfg.LeaseTTL
}

// Close hands the broker's connections over (quota.Broker.HandOver: its
// connection counts reported as zero, so that the clients that reconnect
// to other brokers are not counted twice) and stops the Agent; call it
// before the broker closes its connections. Idempotent; it waits for
// the Agent's goroutine. Admission keeps working after Close, on what
// the broker held.
func (a *Agent) Close(ctx context.Context) error {
	if !a.started.Load() {
		return nil
	}
	a.stopOnce.Do(func() {
		close(a.stop)
		select {
		case <-a.done:
		case <-ctx.Done(): // hand over anyway: Broker and Bus are safe for concurrent use
		}
		a.report(a.b.HandOver(a.clock()))
		a.unsubscribe()
	})
	select {
	case <-a.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("quotanet: close agent: %w", ctx.Err())
	}
}

// DefaultUsageTimeout bounds TenantUsage when its context has no
// deadline.
const DefaultUsageTimeout = 2 * time.Second

// TenantUsage asks the region's coordinator for tenant's usage (a NATS
// request on $STRATA.QUOTA.<region>.usage): per quota, the limit, the
// mesh-wide use and each region's use and share. A tenant without quotas
// has none listed. Errors: ErrNoCoordinator when no coordinator has been
// heard from within LeaseTTL or none answered before ctx's deadline (or
// DefaultUsageTimeout); ErrCoordinator wrapping its refusal (a bad tenant
// name); ErrClosed.
func (a *Agent) TenantUsage(ctx context.Context, tenant string) (quota.Usage, error) {
	if _, err := parseUsageRequest([]byte(tenant)); err != nil {
		return quota.Usage{}, err
	}
	if !a.started.Load() {
		return quota.Usage{}, ErrClosed
	}
	select {
	case <-a.stop:
		return quota.Usage{}, ErrClosed
	default:
	}
	if !a.coordinatorHeard() {
		return quota.Usage{}, fmt.Errorf("%w: region %s: none has announced itself within %v (is the election still running?)",
			ErrNoCoordinator, a.cfg.Region, a.cfg.LeaseTTL)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultUsageTimeout)
		defer cancel()
	}
	ch := make(chan []byte, 1)
	a.reqMu.Lock()
	a.nextReq++
	n := a.nextReq
	a.reqs[n] = ch
	a.reqMu.Unlock()
	defer func() {
		a.reqMu.Lock()
		delete(a.reqs, n)
		a.reqMu.Unlock()
	}()
	a.bus.PublishInternal([]byte(usageSubject(a.cfg.Region)), []byte(replySubject(a.cfg.Region, a.cfg.BrokerID, n)), nil, []byte(tenant))
	select {
	case b := <-ch:
		return decodeUsageAnswer(tenant, b)
	case <-ctx.Done():
		return quota.Usage{}, fmt.Errorf("%w: region %s: the coordinator (term %d) did not answer: %v",
			ErrNoCoordinator, a.cfg.Region, a.term.Load(), ctx.Err())
	}
}

// answer hands a usage answer to the request its reply subject names
// (the first answer wins; two coordinators may answer across a change).
func (a *Agent) answer(subject, _, _, payload []byte) {
	n, ok := parseReplySubject(string(subject), replyPrefix(a.cfg.Region, a.cfg.BrokerID))
	if !ok {
		return
	}
	a.reqMu.Lock()
	ch := a.reqs[n]
	a.reqMu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- bytes.Clone(payload):
	default:
	}
}
