package broker

import (
	"sync"

	"github.com/stratamesh/strata/broker/natsproto"
)

// PublishHook sees every client publish before the broker routes it: the
// JetStream layer (shared/specs/nats-wire.md §2.4) uses it to store
// messages on captured subjects and to answer $JS.API and $JS.ACK subjects.
// Messages that arrive from peer brokers (RMSG) never reach it.
type PublishHook interface {
	// ClientPublish decides what happens to one client publish (NATS
	// protocol: PUB/HPUB). It runs on the client's reader goroutine, so it
	// must not block; the byte slices are only valid during the call and
	// must be copied if kept. hdr is the raw header block or nil.
	ClientPublish(c ClientInfo, subject, reply, hdr, payload []byte) HookResult
}

// HookResult tells the broker what to do with a publish after its
// PublishHook saw it.
type HookResult uint8

const (
	// HookRoute routes the message as core NATS (local subscribers, peer
	// brokers, 503 for a request nobody took).
	HookRoute HookResult = iota
	// HookStored routes the message to core subscribers too, but never
	// answers 503: the hook took it and answers the reply subject itself
	// (a JetStream publish, whose PubAck is the reply).
	HookStored
	// HookConsumed does not route the message at all: the hook handled it
	// (a JetStream API request or an ack).
	HookConsumed
	// HookDenied refuses the publish: the client gets -ERR 'Permissions
	// Violation for Publish to "<subject>"' and the message goes nowhere
	// (a tenant publishing into another tenant's topic).
	HookDenied
	// HookOverQuota says the tenant's publish quota refused a publish
	// without a reply (a JetStream-captured subject published as core
	// NATS): the broker charges it as a core publish, which refuses it
	// again and tells the client as for any core publish over quota
	// (-ERR naming the quota, at most one per 100 ms). Should the second
	// charge admit it (a token came in between), it is routed as core
	// NATS, never stored.
	HookOverQuota
)

// accountSpacePrefix starts every subject of a tenant's subject space in
// the broker's interest graph: a connection of account "acme" that
// subscribes to "orders.>" holds "$A.acme.orders.>", and its publishes
// are matched as "$A.acme.<subject>". Tenants therefore never see each
// other's messages (NATS accounts: each is its own subject space), nor the
// system space where the broker's internal subjects live. Clients never
// see the prefix.
const accountSpacePrefix = "$A."

func accountPrefix(account string) []byte {
	if account == "" {
		return nil
	}
	return []byte(accountSpacePrefix + account + ".")
}

// AccountSubject is subject in account's subject space, as PublishInternal,
// DeliverLocal, HasLocalInterest and SubscribeInternal take it: the
// broker's own messages for a tenant's clients (JetStream replies and
// deliveries, replicated messages) go there. The system account ("") is
// subject itself. It returns a new slice.
func AccountSubject(account string, subject []byte) []byte {
	if account == "" {
		return append([]byte(nil), subject...)
	}
	b := make([]byte, 0, len(accountSpacePrefix)+len(account)+1+len(subject))
	b = append(append(append(b, accountSpacePrefix...), account...), '.')
	return append(b, subject...)
}

// ClientInfo identifies the connection a publish came from.
type ClientInfo struct {
	// ID is the connection id, unique within this broker process.
	ID uint64
	// Name is the client's CONNECT name ("" when none).
	Name string
	// Account is the tenant the connection authenticated as ("" with auth
	// off).
	Account string
}

// InternalHandler receives a message for an internal subscription. It runs
// on the goroutine of whoever published (a client's or a route's reader,
// or a PublishInternal caller), so it must not block; the byte slices are
// only valid during the call.
type InternalHandler func(subject, reply, hdr, payload []byte)

// SubscribeInternal subscribes fn to subject (wildcards allowed) as a
// subscription of the broker itself: it matches local and routed publishes
// like a client's, and peer brokers learn of it (RS+), so a message
// published anywhere in the region reaches it. The returned function
// unsubscribes. Errors: an invalid subject.
func (s *Server) SubscribeInternal(subject string, fn InternalHandler) (func(), error) {
	sub := &subscription{subject: subject, sid: "internal", internal: fn}
	sub.sidB = []byte(sub.sid)
	if err := s.addSub(sub); err != nil {
		return nil, err
	}
	return func() { s.removeSub(sub) }, nil
}

// internalPublisher is a reusable stand-in for a client on the internal
// publish path: its producer is the delivery scratch of one call.
var internalPublishers = sync.Pool{New: func() any {
	c := &client{}
	c.echo.Store(true)
	return c
}}

// PublishInternal publishes a message from the broker itself (NATS
// protocol semantics of PUB/HPUB from a client with echo on and no
// no-responders): to local subscribers, internal subscriptions and peer
// brokers with interest. It may wait briefly (up to 20 ms per call) when a
// receiving connection is over half full, like a client publish. Safe for
// concurrent use; the bytes are not retained.
func (s *Server) PublishInternal(subject, reply, hdr, payload []byte) {
	c := internalPublishers.Get().(*client)
	m := natsproto.Msg{Subject: subject, Reply: reply, Header: hdr, Payload: payload}
	s.publish(c, &m)
	c.prod.flush()
	internalPublishers.Put(c)
}

// Reply is a message to a one-off reply subject (a request's inbox), such
// as a JetStream PubAck.
type Reply struct {
	Subject, Payload []byte
}

// PublishReplies publishes each reply, in order, as PublishInternal would
// (no reply subject, no header), then wakes each receiving connection
// once for all of them rather than once per message, so a batch of
// answers leaves in few writes. Reply subjects are matched without
// filling the subject cache (each is used once; caching would only evict
// subjects worth keeping). Safe for concurrent use; the bytes are not
// retained.
func (s *Server) PublishReplies(rs []Reply) {
	if len(rs) == 0 {
		return
	}
	c := internalPublishers.Get().(*client)
	for i := range rs {
		m := natsproto.Msg{Subject: rs[i].Subject, Payload: rs[i].Payload}
		s.publishTo(c, &m, true)
	}
	c.prod.flush()
	internalPublishers.Put(c)
}

// DeliverLocal delivers a message to this broker's own client
// subscriptions matching inbox, showing subject (not inbox) on the MSG
// line: how a pull consumer's messages reach the requester's inbox with
// their original subject (nats-wire §2.5 "Delivery"). It reports whether
// any subscription took it. Queue subscriptions on inbox take it once per
// group. Safe for concurrent use.
func (s *Server) DeliverLocal(inbox, subject, reply, hdr, payload []byte) bool {
	c := internalPublishers.Get().(*client)
	p := &c.prod
	r := s.subs.MatchBytes(inbox)
	ok := false
	for _, sub := range r.Plain {
		if sub.deliver(p, subject, reply, hdr, payload) {
			ok = true
		}
	}
	for gi := range r.Groups {
		for _, sub := range r.Groups[gi].Members {
			if sub.deliver(p, subject, reply, hdr, payload) {
				ok = true
				break
			}
		}
	}
	p.flush()
	internalPublishers.Put(c)
	return ok
}

// HasLocalInterest reports whether a client of this broker subscribes to
// a subject matching subject (e.g. whether a requester's inbox is here).
func (s *Server) HasLocalInterest(subject []byte) bool {
	r := s.subs.MatchBytes(subject)
	for _, sub := range r.Plain {
		if sub.internal == nil {
			return true
		}
	}
	return len(r.Groups) > 0
}

// HasPeerInterest reports whether some peer broker of the region
// announced interest matching subject (so a PublishInternal on it
// reaches that broker): e.g. whether the route to a topic's owner is up.
func (s *Server) HasPeerInterest(subject []byte) bool {
	if s.nRoutes.Load() == 0 {
		return false
	}
	return s.remote.HasInterest(subject)
}
