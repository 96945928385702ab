package jetstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/broker"
	"github.com/stratamesh/strata/broker/bundle"
	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/broker/natsproto"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/replicator/link"
	"github.com/stratamesh/strata/tenancy"
)

// Service is one broker's JetStream layer. Create it with New, hand it to
// broker.Config.Hook, then Start it with the running broker.
type Service struct {
	cfg Config
	// dropFail counts down the decom-fail test hook (repl_decom.go).
	dropFail     *atomic.Int64
	dropHookOnce sync.Once
	srv          *broker.Server
	reg          *registry
	place        *placement

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// finalPersistHook is a test hook (export_decom_test.go): a stopping
	// replicator cursor calls it with the write of its last position.
	finalPersistHook atomic.Pointer[func(persist func())]

	leaseMu sync.Mutex
	lease   *meta.Lease
	leaseOK chan struct{} // closed while lease is valid; replaced when it is lost

	mu        sync.Mutex
	topics    map[tenancy.Name]*topic // topics this broker serves as owner
	owned     map[bundle.ID]*ownedBundle
	acquiring map[bundle.ID]bool
	voided    map[meta.LeaseID]bool // dead brokers' leases revoked
	parked    map[tenancy.Name]*parking
	// openFail holds, for a topic this broker owns but cannot open for
	// want of writable bookies, that error (topicLoop): publishes parked
	// for it are answered with it instead of timing out.
	openFail map[tenancy.Name]error
	fwdPulls map[string]forwardedPull // by reply subject
	closing  bool
	draining bool                    // handing bundles over before stopping
	shedding bool                    // a load-shedding handover is in progress
	settling map[bundle.ID]time.Time // bundles acquired for an admin unload, and when

	linksMu sync.Mutex
	links   map[string]*link.Link // replication links by remote region

	apiSem              chan struct{}
	apiTotal, apiErrors atomic.Uint64
	unsubs              []func()
	started             atomic.Bool
	policyKick          chan struct{} // PoliciesChanged → policyLoop
}

// New returns a Service for cfg; it does nothing until Start. Errors:
// missing or inconsistent configuration.
func New(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{
		cfg: cfg, reg: newRegistry(), place: newPlacement(),
		ctx: ctx, cancel: cancel,
		topics:     map[tenancy.Name]*topic{},
		owned:      map[bundle.ID]*ownedBundle{},
		acquiring:  map[bundle.ID]bool{},
		voided:     map[meta.LeaseID]bool{},
		settling:   map[bundle.ID]time.Time{},
		parked:     map[tenancy.Name]*parking{},
		openFail:   map[tenancy.Name]error{},
		fwdPulls:   map[string]forwardedPull{},
		links:      map[string]*link.Link{},
		apiSem:     make(chan struct{}, DefaultAPIConcurrency),
		leaseOK:    make(chan struct{}),
		policyKick: make(chan struct{}, 1),
	}, nil
}

// Start attaches the service to its running broker: it takes the
// broker's ownership lease and registers the broker under it, subscribes
// the internal subjects, loads and watches the topic registry and the
// bundle ownership keys, and starts placement (acquiring the bundles this
// broker should own). Errors: etcd unreachable within ctx.
func (s *Service) Start(ctx context.Context, srv *broker.Server) error {
	s.srv = srv
	if err := s.renewLease(ctx); err != nil {
		return err
	}
	for _, sub := range []struct {
		subj string
		fn   broker.InternalHandler
	}{
		{fwdPrefix + s.cfg.Name, s.onForward},
		{dlvPrefix + s.cfg.Name, s.onDelivery},
	} {
		unsub, err := srv.SubscribeInternal(sub.subj, sub.fn)
		if err != nil {
			return fmt.Errorf("jetstream: subscribe %s: %w", sub.subj, err)
		}
		s.unsubs = append(s.unsubs, unsub)
	}
	ownRev, err := s.place.load(ctx, s.cfg.Store)
	if err != nil {
		return fmt.Errorf("jetstream: load bundle ownership: %w", err)
	}
	topicRev, err := s.loadRegistry(ctx)
	if err != nil {
		return fmt.Errorf("jetstream: load topics: %w", err)
	}
	s.started.Store(true)
	s.goRun(func() { s.place.watch(s.ctx, s.cfg.Store, ownRev+1, s.cfg.Logger) })
	s.goRun(func() { s.watchRegistry(topicRev + 1) })
	s.goRun(s.keepLease)
	s.goRun(s.placeLoop)
	s.goRun(s.tombLoop)
	s.goRun(s.policyLoop)
	s.goRun(s.quotaUseLoop) // quota_use.go
	return nil
}

// Close stops serving (SIGTERM): the broker registers as draining and
// hands every bundle over (topics closed gracefully: pending adds
// confirmed, open ledgers closed, cursors persisted; owner keys deleted so
// other brokers take over at once), then revokes its lease and waits for
// every goroutine, within ctx.
func (s *Service) Close(ctx context.Context) error {
	if s.started.Load() {
		s.drain(ctx)
	}
	s.mu.Lock()
	s.closing = true
	topics := make([]*topic, 0, len(s.topics))
	for _, t := range s.topics {
		topics = append(topics, t)
	}
	s.mu.Unlock()
	for _, u := range s.unsubs {
		u()
	}
	var errs []error
	for _, t := range topics { // any that opened during the drain
		if err := t.shutdown(ctx, true); err != nil {
			errs = append(errs, err)
		}
	}
	s.cancel()
	s.closeLinks()
	s.leaseMu.Lock()
	lease := s.lease
	s.leaseMu.Unlock()
	if lease != nil {
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = lease.Revoke(rctx)
		cancel()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("jetstream: close: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}

func (s *Service) goRun(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// ClientPublish implements broker.PublishHook: $JS.API and $JS.ACK
// subjects are consumed here; a publish on a subject a stream captures is
// stored (and still routed to core subscribers); anything else is core
// NATS. It never blocks on I/O.
func (s *Service) ClientPublish(ci broker.ClientInfo, subject, reply, hdr, payload []byte) broker.HookResult {
	if !s.started.Load() || len(subject) == 0 {
		return broker.HookRoute
	}
	acct := ci.Account
	if len(reply) > 0 && acct != "" {
		// The reply is kept in the client's account space: every answer
		// and delivery to it (PublishInternal, DeliverLocal) reaches that
		// account's subscriptions only.
		reply = broker.AccountSubject(acct, reply)
	}
	if subject[0] == '$' {
		if acct != "" && (bytes.HasPrefix(subject, []byte("$STRATA.")) || bytes.HasPrefix(subject, []byte("$SR."))) {
			// The mesh's own subjects (replication, configuration, the
			// region's link): a tenant's credentials never act as a
			// replicator or a broker.
			return broker.HookDenied
		}
		if bytes.HasPrefix(subject, []byte("$STRATA.CONFIG.")) || bytes.HasPrefix(subject, []byte("$STRATA.QUOTA.")) {
			// Configuration sync and other regions' quota coordinators
			// (tenancy/quota/quotanet): the region's internal
			// subscriptions take them.
			return broker.HookRoute
		}
		if bytes.HasPrefix(subject, []byte("$STRATA.")) { // replication, subscription sync, replication state
			s.dispatch(message{origin: s.cfg.Name, subject: string(subject), reply: string(reply),
				hdr: bytes.Clone(hdr), data: bytes.Clone(payload)})
			return broker.HookConsumed
		}
		if !bytes.HasPrefix(subject, []byte("$JS.")) {
			return broker.HookRoute
		}
		if bytes.HasPrefix(subject, []byte("$JS.ACK.")) || isAPISubject(subject) {
			s.dispatch(message{origin: s.cfg.Name, account: acct, subject: string(subject), reply: string(reply),
				hdr: bytes.Clone(hdr), data: bytes.Clone(payload)})
			return broker.HookConsumed
		}
		return broker.HookRoute
	}
	if subject[0] == '_' {
		return broker.HookRoute // _INBOX and friends: never stored
	}
	if len(hdr) > 0 {
		// Strata-* headers are the mesh's own (ARCHITECTURE §4): a
		// message carrying one could pass for another region's copy, to
		// JetStream and to core subscribers alike. It goes nowhere; a
		// request gets the JetStream error.
		if k, ok := natsproto.HeaderKeyWithPrefix(hdr, reservedHeaderPrefix); ok {
			if len(reply) > 0 {
				s.respond(string(reply), pubAckError("", withDesc(jsapi.ErrBadRequest(),
					"header "+k+" is reserved: Strata-* headers are set by Strata on replicated copies, never by clients")))
			}
			s.cfg.Logger.Debug("refused a publish with a reserved header", "subject", string(subject), "header", k)
			return broker.HookConsumed
		}
	}
	if acct != "" {
		// nats-wire §4: the tenant is the subject's first token, and a
		// connection's must be its own — also when one of its streams
		// captured the subject before that tenant existed.
		if first, _, _ := bytes.Cut(subject, []byte(".")); string(first) != acct && s.cfg.Policies.Tenant(string(first)) {
			return broker.HookDenied
		}
	}
	st := s.capturing(acct, subject)
	if st == nil {
		var res broker.HookResult
		if st, res = s.uncaptured(acct, subject, reply); st == nil {
			return res
		}
	}
	// The publish rate is charged here, at the front door, before the
	// message is routed anywhere: a refused publish is neither stored nor
	// delivered to the subject's core subscribers (quota_gate.go).
	if res, refused := s.rateRefused(st, reply, len(hdr)+len(payload)); refused {
		return res
	}
	// A publish to a topic served here is stored (copied) before
	// dispatch returns; toOwner copies it first when it must wait.
	s.dispatch(message{origin: s.cfg.Name, account: acct, subject: string(subject), reply: string(reply),
		hdr: hdr, data: payload, stream: st, borrowed: true})
	return broker.HookStored
}

// isAPISubject reports whether subject is "$JS.API.…" or
// "$JS.<domain>.API.…".
func isAPISubject(subject []byte) bool {
	if bytes.HasPrefix(subject, []byte("$JS.API.")) {
		return true
	}
	rest := subject[len("$JS."):]
	i := bytes.IndexByte(rest, '.')
	return i > 0 && bytes.HasPrefix(rest[i:], []byte(".API."))
}

// message is a client message on its way to the owner of its topic.
type message struct {
	origin string // broker the client is connected to
	// account is the tenant account the client logged in as ("": the
	// system account, or auth off): stream names resolve in it only, and
	// reply is already in its subject space (broker.AccountSubject).
	account string
	hops    uint8
	subject string
	reply   string
	hdr     []byte
	data    []byte
	stream  *stream // for publishes: the capturing stream, when known
	// borrowed: hdr and data are the client connection's read buffer,
	// valid only until dispatch returns (toOwner copies them before
	// keeping the message).
	borrowed bool
	released bool // a held publish being released (backlog_hold.go)
}

// owned returns m with hdr and data copies of its own.
func (m message) owned() message {
	if m.borrowed {
		m.hdr, m.data, m.borrowed = bytes.Clone(m.hdr), bytes.Clone(m.data), false
	}
	return m
}

// onForward receives a client message another broker forwarded to this
// one as the owner of its topic.
func (s *Service) onForward(_, _, _, payload []byte) {
	e, err := unmarshalEnvelope(payload)
	if err != nil {
		s.cfg.Logger.Warn("dropping a malformed forwarded message", "err", err)
		return
	}
	m := message{origin: e.Origin, account: e.Account, hops: e.Hops, subject: e.Subject, reply: e.Reply, hdr: e.Header, data: e.Data}
	if !strings.HasPrefix(m.subject, "$") {
		if m.stream = s.capturing(m.account, []byte(m.subject)); m.stream == nil {
			// A topic created a moment ago, which this broker's registry
			// has not seen yet: wait for it (parked, in order), as for a
			// topic without a serving owner.
			if name, err := tenancy.ParseName(e.Topic); err == nil {
				s.toOwner(name, m, func(t *topic) { t.publish(m) })
			}
			return
		}
	}
	s.dispatch(m)
}

// onDelivery receives pull-consumer deliveries (a batch, or one) for
// clients of this broker and hands each to the client's inbox
// subscription.
func (s *Service) onDelivery(_, _, _, payload []byte) {
	es, err := splitDeliveries(payload)
	if err != nil {
		s.cfg.Logger.Warn("dropping a malformed delivery", "err", err)
		return
	}
	for _, e := range es {
		show := e.Show
		if show == "" {
			show = e.Subject
		}
		s.srv.DeliverLocal([]byte(e.Subject), []byte(show), []byte(e.Reply), e.Header, e.Data)
	}
}

// forward sends m, a message for topic name, to broker owner over the
// internal link.
func (s *Service) forward(name tenancy.Name, owner string, m message) {
	s.trackPull(name, owner, m)
	e := envelope{Hops: m.hops + 1, Origin: m.origin, Account: m.account, Subject: m.subject, Reply: m.reply, Header: m.hdr, Data: m.data}
	if m.stream != nil {
		e.Topic = name.String()
	}
	s.srv.PublishInternal([]byte(fwdPrefix+owner), nil, nil, e.marshal())
}

// deliver sends a consumer's delivery or status to the requester's inbox:
// locally when the requester is connected here, else to its broker.
func (s *Service) deliver(origin, inbox, show, reply string, hdr, data []byte) {
	if origin == "" || origin == s.cfg.Name {
		s.srv.DeliverLocal([]byte(inbox), []byte(show), []byte(reply), hdr, data)
		return
	}
	e := envelope{Origin: s.cfg.Name, Subject: inbox, Reply: reply, Show: show, Header: hdr, Data: data}
	s.srv.PublishInternal([]byte(dlvPrefix+origin), nil, nil, e.marshal())
}

// space is subject in tenant's subject space when tenants have accounts
// of their own (Config.AccountSpaces), else subject.
func (s *Service) space(tenant, subject string) []byte {
	if s.cfg.AccountSpaces {
		return broker.AccountSubject(tenant, []byte(subject))
	}
	return []byte(subject)
}

// respond publishes an API reply or PubAck to a client's reply subject
// (routed to whichever broker the client is on).
func (s *Service) respond(reply string, body []byte) {
	if reply == "" {
		return
	}
	s.srv.PublishInternal([]byte(reply), nil, nil, body)
}
