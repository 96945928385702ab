package jetstream

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/stratamesh/strata/broker"
	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/broker/natsproto"
	"github.com/stratamesh/strata/replicator/wire"
	"github.com/stratamesh/strata/tenancy"
)

// dispatch sends a client message to the handler of its kind: an ack, an
// API request, or a publish into a stream.
func (s *Service) dispatch(m message) {
	switch {
	case strings.HasPrefix(m.subject, jsapi.AckPrefix):
		s.dispatchAck(m)
	case strings.HasPrefix(m.subject, "$JS."):
		s.dispatchAPI(m)
	case strings.HasPrefix(m.subject, wire.SubjectPrefix):
		s.dispatchRepl(m)
	case strings.HasPrefix(m.subject, replAdminPrefix):
		s.dispatchReplAdmin(m)
	case strings.HasPrefix(m.subject, offloadAdminPrefix):
		s.dispatchOffloadAdmin(m)
	case strings.HasPrefix(m.subject, originsAdminPrefix):
		s.dispatchOriginsAdmin(m)
	case strings.HasPrefix(m.subject, hookAdminPrefix):
		s.dispatchHookAdmin(m)
	case strings.HasPrefix(m.subject, wire.SubSyncPrefix):
		s.dispatchSubSync(m)
	case strings.HasPrefix(m.subject, wire.TombstonePrefix):
		s.dispatchTombstone(m)
	default:
		if m.stream == nil {
			return
		}
		st := m.stream
		if t := s.servedHere(st.name); t != nil {
			t.publish(m) // stored (copied) before it returns: m may be borrowed
			return
		}
		m = m.owned() // forwarded or parked: kept past the caller's buffer
		s.toOwnerOr(st.name, m, func(t *topic) { t.publish(m) }, func(err error) {
			s.respond(m.reply, pubAckError(st.stream, jsapi.ErrStreamStoreFailed(err)))
		})
	}
}

// tenantOf is the tenant a connection's JetStream requests address: the
// account it logged in as; with auth off (or as the system account), the
// topology's defaults.jetstream tenant.
func (s *Service) tenantOf(m message) string {
	if m.account != "" {
		return m.account
	}
	return s.cfg.DefaultTenant
}

// lookupStream finds a stream by name for m's connection (nil: none,
// or the name is ambiguous; see resolveStream).
func (s *Service) lookupStream(m message, name string) *stream {
	st, _ := s.resolveStream(m, name)
	return st
}

// resolveStream finds a stream by name for m's connection. A qualified
// name "tenant:namespace:topic" (qualifiedStream) is that topic, exactly
// (for a tenant account, only its own tenant's). Any other name is looked
// up in m's tenant; a tenant account stops there. Failing that (auth off:
// every connection is the default JetStream tenant's), in the other
// tenants, where it must match one stream only: a name several tenants
// have is refused (the error lists them and their qualified names)
// rather than resolved to one of them at random. nil, nil: no such
// stream.
func (s *Service) resolveStream(m message, name string) (*stream, *jsapi.APIError) {
	if n, ok := parseQualifiedStream(name); ok {
		if m.account != "" && n.Tenant != m.account {
			return nil, nil // another tenant's topic does not exist for this one
		}
		return s.reg.topic(n), nil
	}
	tenant := s.tenantOf(m)
	if st := s.reg.lookup(tenant, name); st != nil {
		return st, nil
	}
	if m.account != "" {
		return nil, nil // a tenant's connection sees its own streams only
	}
	s.reg.mu.RLock()
	var found []*stream
	for t, byName := range s.reg.byStream {
		if st := byName[name]; st != nil && t != tenant {
			found = append(found, st)
		}
	}
	s.reg.mu.RUnlock()
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return found[0], nil
	}
	paths := make([]string, 0, len(found))
	quals := make([]string, 0, len(found))
	for _, st := range found {
		paths = append(paths, st.name.String())
		quals = append(quals, qualifiedStream(st))
	}
	sort.Strings(paths)
	sort.Strings(quals)
	return nil, withDesc(jsapi.ErrBadRequest(), "stream name "+name+" is ambiguous: "+strings.Join(paths, ", ")+
		" all have it; name the stream with its tenant: "+strings.Join(quals, " or "))
}

// qualifiedStream is the name that denotes st's topic, whatever its stream
// is called and whichever tenant asks: "tenant:namespace:topic" (no
// stream has two colons: topicForStream refuses them).
func qualifiedStream(st *stream) string {
	return st.name.Tenant + ":" + st.name.Namespace + ":" + st.name.Topic
}

// parseQualifiedStream reads a qualifiedStream name.
func parseQualifiedStream(name string) (n tenancy.Name, ok bool) {
	tenant, rest, _ := strings.Cut(name, ":")
	if !strings.Contains(rest, ":") || !tenancy.ValidToken(tenant) {
		return n, false
	}
	return topicForStream(tenant, "", rest, nil)
}

// apiName is the stream name st's consumers show (ack subjects, consumer
// info): its stream name in the default JetStream tenant, the qualified
// name elsewhere (the bare name may be ambiguous there, and an ack must
// reach the topic it came from). The broker's own requests always use the
// qualified name.
func (s *Service) apiName(st *stream) string {
	if st.name.Tenant == s.cfg.DefaultTenant {
		return st.stream
	}
	return qualifiedStream(st)
}

func (s *Service) dispatchAck(m message) {
	am, err := jsapi.ParseAckSubject(m.subject)
	if err != nil {
		return // not an ack we issued: ignored, as the reference does
	}
	st := s.lookupStream(m, am.Stream)
	if st == nil {
		return
	}
	s.toOwner(st.name, m, func(t *topic) { t.ack(m, am) })
}

func (s *Service) dispatchAPI(m message) {
	req, err := jsapi.ParseAPISubject(m.subject)
	if err != nil {
		if errors.Is(err, jsapi.ErrUnknownAPI) {
			// The reference serves more of the API than Strata does:
			// say so rather than let the client time out.
			s.replyError(m.reply, jsapi.KindUnknown, withDesc(jsapi.ErrBadRequest(),
				"strata does not support "+strings.TrimPrefix(m.subject, "$JS.")+" yet"))
		}
		return // a malformed subject: the reference does not answer it
	}
	s.apiTotal.Add(1)
	if v, ok := natsproto.HeaderGet(m.hdr, jsapi.HdrRequiredAPILevel); ok && !jsapi.RequiredAPILevelOK(string(v)) {
		s.replyError(m.reply, req.Kind, jsapi.ErrRequiredAPILevel())
		return
	}
	if !req.Kind.InSubset() {
		s.replyError(m.reply, req.Kind, withDesc(jsapi.ErrBadRequest(), "strata does not support "+req.Kind.String()+" yet"))
		return
	}
	switch req.Kind {
	case jsapi.KindAccountInfo, jsapi.KindStreamNames, jsapi.KindStreamList:
		s.goAPI(func() { s.apiRegion(req, m) })
		return
	}
	st, ambiguous := s.resolveStream(m, req.Stream)
	if ambiguous != nil {
		if req.Kind == jsapi.KindConsumerNext {
			if m.reply != "" {
				hdr := natsproto.AppendStatusHeader(nil, jsapi.StatusBadRequest, ambiguous.Description)
				s.deliver(m.origin, m.reply, m.reply, "", hdr, nil)
			}
			return
		}
		s.replyError(m.reply, req.Kind, ambiguous)
		return
	}
	if st == nil {
		if req.Kind == jsapi.KindStreamCreate {
			s.goAPI(func() { s.createStream(req, m) })
			return
		}
		// Perhaps a topic created a moment ago through another broker,
		// which this broker's registry watch has not delivered yet: ask
		// etcd before answering that it does not exist.
		s.goAPI(func() {
			if st := s.loadStream(m, req.Stream); st != nil {
				s.toOwner(st.name, m, func(t *topic) { t.api(req, m) })
				return
			}
			if req.Kind == jsapi.KindConsumerNext {
				s.noResponders(m)
				return
			}
			s.replyError(m.reply, req.Kind, jsapi.ErrStreamNotFound())
		})
		return
	}
	s.toOwner(st.name, m, func(t *topic) { t.api(req, m) })
}

// loadStream reads stream name's topic from etcd (a qualified name's
// topic, else m's tenant's: the default namespace unless the name is
// "ns:topic") and adds it to the registry; nil when there is no such
// topic or etcd does not answer.
func (s *Service) loadStream(m message, name string) *stream {
	n, qualified := parseQualifiedStream(name)
	if qualified && m.account != "" && n.Tenant != m.account {
		return nil
	}
	if !qualified {
		var ok bool
		n, ok = topicForStream(s.tenantOf(m), s.cfg.DefaultNamespace, name, nil)
		if !ok || n.Tenant == "" {
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
	defer cancel()
	tm, _, err := mledger.Load(ctx, s.cfg.Store, n)
	if err != nil {
		return nil
	}
	st := decodeStream(n, tm)
	if !qualified && st.stream != name {
		return nil
	}
	if s.reg.put(st) {
		s.topicAdded(n)
	}
	return s.reg.topic(n)
}

// noResponders answers a pull for a consumer or stream that does not
// exist as the reference does, which has no subscription there: with the
// no-responders status, "503" and Nats-Subject, sent to the inbox.
func (s *Service) noResponders(m message) {
	if m.reply == "" {
		return
	}
	hdr := natsproto.AppendStatusHeader(nil, jsapi.StatusNoResponders, "", jsapi.HdrSubject, m.subject)
	s.deliver(m.origin, m.reply, m.reply, "", hdr, nil)
}

// goAPI runs an API handler on its own goroutine, at most
// DefaultAPIConcurrency at once (beyond that the caller waits: API
// requests are rare next to publishes and acks).
func (s *Service) goAPI(f func()) {
	s.apiSem <- struct{}{}
	s.goRun(func() {
		defer func() { <-s.apiSem }()
		f()
	})
}

// servedHere returns topic name when this broker serves it and nothing
// is parked for it (so a message handled now keeps its order), else nil.
func (s *Service) servedHere(name tenancy.Name) *topic {
	s.mu.Lock()
	t, parked := s.topics[name], s.parked[name] != nil
	s.mu.Unlock()
	if parked || t == nil || !t.isReady() {
		return nil
	}
	return t
}

// toOwner hands m to the owner of topic name: to local if this broker
// serves it, over the internal link if another broker owns it, or into the
// topic's parking queue while no broker serves it (a takeover), keeping
// the order of what is parked.
func (s *Service) toOwner(name tenancy.Name, m message, local func(*topic)) {
	s.toOwnerOr(name, m, local, nil)
}

// toOwnerOr is toOwner for a message that refuse answers with an error
// (a JetStream publish with a reply) when it is parked for a topic this
// broker owns but cannot open (openFail) for longer than refuseParkedAfter.
func (s *Service) toOwnerOr(name tenancy.Name, m message, local func(*topic), refuse func(error)) {
	if m.reply == "" {
		refuse = nil
	}
	s.mu.Lock()
	if p := s.parked[name]; p != nil {
		p.add(m, local, refuse)
		s.mu.Unlock()
		return
	}
	t := s.topics[name]
	s.mu.Unlock()
	if t != nil && t.isReady() {
		local(t)
		return
	}
	if owner := s.ownerOf(name); owner != "" && owner != s.cfg.Name && t == nil && s.reachable(owner) {
		if m.hops >= maxHops {
			s.cfg.Logger.Warn("dropping a message forwarded too often", "topic", name.String(), "subject", m.subject)
			return
		}
		s.forward(name, owner, m)
		return
	}
	s.mu.Lock()
	p := s.parked[name]
	if p == nil {
		p = &parking{}
		s.parked[name] = p
		s.goRun(func() { s.drainParked(name, p) })
	}
	p.add(m, local, refuse)
	s.mu.Unlock()
}

// reachable reports whether the internal link to broker owner is up (it
// announced its forwarding subject), so a forward is not lost.
func (s *Service) reachable(owner string) bool {
	return s.srv.HasPeerInterest([]byte(fwdPrefix + owner))
}

// parking holds the messages of a topic that has no serving owner yet,
// in arrival order.
type parking struct {
	items []parked
}

type parked struct {
	m      message
	local  func(*topic)
	refuse func(error) // nil: dropped silently after ParkTimeout
	at     time.Time
}

func (p *parking) add(m message, local func(*topic), refuse func(error)) {
	p.items = append(p.items, parked{m: m, local: local, refuse: refuse, at: time.Now()})
}

// refuseParkedAfter is how long a publish waits parked for a topic this
// broker cannot open for want of bookies before it is answered with that
// error: long enough for a takeover's first attempt, well inside the
// clients' usual 5 s.
const refuseParkedAfter = time.Second

// drainParked waits for the topic to get a serving owner, then sends
// everything parked there in order; messages older than ParkTimeout are
// dropped (their clients time out and retry), and publishes parked longer
// than refuseParkedAfter for a topic this broker owns but cannot open for
// want of writable bookies are answered with that error (NATS JetStream
// answers a stream without quorum with an error too, not silence).
func (s *Service) drainParked(name tenancy.Name, p *parking) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		t := s.topics[name]
		owner := s.ownerOf(name)
		ready := t != nil && t.isReady()
		remote := t == nil && owner != "" && owner != s.cfg.Name && s.reachable(owner)
		if !ready && !remote {
			cut := 0
			for cut < len(p.items) && time.Since(p.items[cut].at) > s.cfg.ParkTimeout {
				cut++
			}
			p.items = p.items[cut:]
			if failure := s.openFail[name]; failure != nil {
				kept := p.items[:0]
				for _, it := range p.items {
					if it.refuse != nil && time.Since(it.at) > refuseParkedAfter {
						s.goRun(func() { it.refuse(failure) })
						continue
					}
					kept = append(kept, it)
				}
				p.items = kept
			}
			if len(p.items) == 0 {
				delete(s.parked, name)
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			continue
		}
		items := p.items
		delete(s.parked, name)
		s.mu.Unlock()
		for _, it := range items {
			if ready {
				it.local(t)
			} else {
				s.forward(name, owner, it.m)
			}
		}
		return
	}
}

// uncaptured decides about a publish no stream captures: a subject of a
// known tenant's namespace ("t.ns.topic…") auto-creates its topic (spec
// §4) and returns it; a JetStream publish (with a reply) into an unknown
// namespace of a known tenant gets an error naming it; a tenant account's
// publish on another tenant's subject is refused (HookDenied); anything
// else is core NATS. Creating a topic writes to etcd once, on the publisher's
// reader goroutine.
func (s *Service) uncaptured(account string, subject, reply []byte) (*stream, broker.HookResult) {
	// The first three tokens, without splitting the whole subject: this
	// runs for every core publish.
	first, rest, ok := bytes.Cut(subject, []byte("."))
	if !ok {
		return nil, broker.HookRoute
	}
	tenant := string(first)
	if !s.cfg.Policies.Tenant(tenant) {
		return nil, broker.HookRoute
	}
	second, rest, more := bytes.Cut(rest, []byte("."))
	toks := []string{tenant, string(second)}
	if more {
		third, _, _ := bytes.Cut(rest, []byte("."))
		toks = append(toks, string(third))
	}
	if account != "" && toks[0] != account {
		// nats-wire §4: the tenant is the subject's first token, and a
		// connection's must be its account.
		return nil, broker.HookDenied
	}
	if len(toks) < 3 {
		return nil, broker.HookRoute
	}
	ns, ok := s.namespace(toks[0], toks[1])
	if !ok {
		if len(reply) > 0 {
			s.respond(string(reply), pubAckError("", withDesc(jsapi.ErrStreamNotFound(),
				"namespace "+toks[0]+"/"+toks[1]+" does not exist: tenant "+toks[0]+" has no such namespace")))
			return nil, broker.HookConsumed
		}
		return nil, broker.HookRoute
	}
	if !ns.AutoCreateTopics || !tenancy.ValidToken(toks[2]) {
		return nil, broker.HookRoute
	}
	name := tenancy.Name{Tenant: toks[0], Namespace: toks[1], Topic: toks[2]}
	if ex := s.reg.topic(name); ex != nil {
		// The topic exists (e.g. a JetStream stream of that name) and does
		// not capture this subject: core NATS, as on every broker.
		return nil, broker.HookRoute
	}
	if res, refused := s.refuseAutoCreate(name.Tenant, reply); refused { // quota_gate.go
		return nil, res
	}
	st, err := s.autoCreate(name, ns)
	if err != nil {
		s.cfg.Logger.Warn("auto-creating a topic failed", "subject", string(subject), "err", err)
		if len(reply) > 0 {
			s.respond(string(reply), pubAckError("", jsapi.ErrStreamStoreFailed(err)))
			return nil, broker.HookStored
		}
		return nil, broker.HookRoute
	}
	if !capturesSubject(st, string(subject)) {
		return nil, broker.HookRoute
	}
	return st, broker.HookStored
}

// capturing is the stream that stores a publish of account on the
// literal subject, or nil. A tenant account's publishes go to its own
// streams only (registry.captures). With account spaces, the system
// account's publishes on a subject whose first token is a tenant go to
// that tenant's streams only (nats-wire §4: the subject's first token is
// its tenant): another tenant's stream on a wildcard ("*.ns.orders")
// never takes them. Otherwise, any tenant's stream capturing the subject.
func (s *Service) capturing(account string, subject []byte) *stream {
	if account == "" && s.cfg.AccountSpaces {
		first, _, _ := strings.Cut(string(subject), ".")
		if tenancy.ValidToken(first) && s.cfg.Policies.Tenant(first) {
			return s.reg.captures(first, subject)
		}
	}
	return s.reg.captures(account, subject)
}

// capturesSubject reports whether one of st's subjects matches subject.
func capturesSubject(st *stream, subject string) bool {
	for _, f := range st.config.Subjects {
		if subjectMatches(f, subject) {
			return true
		}
	}
	return false
}

// withDesc is e with a more specific description (same codes).
func withDesc(e *jsapi.APIError, desc string) *jsapi.APIError {
	c := *e
	c.Description = desc
	return &c
}
