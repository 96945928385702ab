package broker

import (
	"bytes"
	"math/rand/v2"
	"time"

	"github.com/stratamesh/strata/broker/natsproto"
	"github.com/stratamesh/strata/broker/sublist"
)

// stallWait bounds how long a publisher is held back, per read, by one
// connection it feeds that is over half of MaxPending.
const stallWait = 20 * time.Millisecond

// producer is a reader goroutine's scratch for the deliveries of one read:
// the connections it queued to (kicked once at the end), the ones over
// half full (waited on briefly), the server's outbound budget when it was
// over half (waited on briefly too), and per-route queue choices.
type producer struct {
	touched []*outbound
	stalled []*outbound
	budget  *outBudget
	routeQs []routeQueues
}

// routeQueues is, for one publish, a route chosen to receive the message
// and the queue groups it was chosen for.
type routeQueues struct {
	r      *route
	plain  bool
	queues [][]byte
}

// queued records a delivery that queued to o with result r (not enqSlow
// or enqClosed): o is kicked at the end of the read, and the reader is
// held back there if o or the budget is over half full.
func (p *producer) queued(o *outbound, r enqueueResult) {
	if r == enqStall {
		p.stalled = append(p.stalled, o)
	}
	if o.budget.over() {
		p.budget = o.budget
	}
	p.touch(o)
}

func (p *producer) touch(o *outbound) {
	if n := len(p.touched); n > 0 && p.touched[n-1] == o {
		return
	}
	p.touched = append(p.touched, o)
}

// flush wakes every writer this read queued to, then holds the reader
// back while connections it fed, or the server's outbound budget, are over
// half full.
func (p *producer) flush() {
	for i, o := range p.touched {
		o.kick()
		p.touched[i] = nil
	}
	p.touched = p.touched[:0]
	for i, o := range p.stalled {
		o.waitDrained(stallWait)
		p.stalled[i] = nil
	}
	p.stalled = p.stalled[:0]
	if b := p.budget; b != nil {
		p.budget = nil
		b.hold(stallWait)
	}
}

// flushNoStall wakes the writers without waiting on full ones: a route's
// reader carries traffic for many clients and must never be held back by
// one slow client (that client is cut off at MaxPending instead).
func (p *producer) flushNoStall() {
	for i := range p.stalled {
		p.stalled[i] = nil
	}
	p.stalled = p.stalled[:0]
	p.budget = nil
	p.flush()
}

// routeEntry returns the routeQueues slot for r in p.routeQs, adding one.
func (p *producer) routeEntry(r *route) *routeQueues {
	for i := range p.routeQs {
		if p.routeQs[i].r == r {
			return &p.routeQs[i]
		}
	}
	p.routeQs = append(p.routeQs, routeQueues{r: r, queues: p.spareQueues()})
	return &p.routeQs[len(p.routeQs)-1]
}

func (p *producer) spareQueues() [][]byte {
	n := len(p.routeQs)
	if n < cap(p.routeQs) {
		return p.routeQs[:n+1][n].queues[:0]
	}
	return nil
}

// publish routes a client's message (NATS protocol: PUB/HPUB): to every
// matching plain subscription (not the publisher's own when it set
// echo:false), to exactly one member of each matching queue group in the
// region (local or behind a route), and to each peer broker with matching
// plain interest. A request nobody took gets a 503 (§1.8).
func (s *Server) publish(pub *client, m *natsproto.Msg) {
	s.publishTo(pub, m, false)
}

// publishTo is publish; once says that m.Subject is a one-off subject (a
// reply inbox), matched without filling the subject caches
// (sublist.MatchBytesOnce).
func (s *Server) publishTo(pub *client, m *natsproto.Msg, once bool) {
	p := &pub.prod
	echo := pub.echo.Load()
	var local *sublist.Result[*subscription]
	var remote *sublist.Result[*route]
	if once {
		local = s.subs.MatchBytesOnce(m.Subject)
		if s.nRoutes.Load() > 0 {
			remote = s.remote.MatchBytesOnce(m.Subject)
		}
	} else {
		local = s.subs.MatchBytes(m.Subject)
		if s.nRoutes.Load() > 0 {
			remote = s.remote.MatchBytes(m.Subject)
		}
	}
	delivered := false
	for _, sub := range local.Plain {
		if !echo && sub.client == pub {
			continue
		}
		if sub.deliver(p, m.Subject, m.Reply, m.Header, m.Payload) {
			delivered = true
		}
	}
	p.routeQs = p.routeQs[:0]
	if remote != nil {
		for _, r := range remote.Plain {
			p.routeEntry(r).plain = true
		}
	}
	// Queue groups: one member per group name, over the region.
	for gi := range local.Groups {
		g := &local.Groups[gi]
		var rm []*route
		if remote != nil {
			rm = groupMembers(remote, g.Name)
		}
		if s.pickQueue(p, pub, echo, g.Members, rm, g.Name, m) {
			delivered = true
		}
	}
	if remote != nil {
		for gi := range remote.Groups {
			g := &remote.Groups[gi]
			if hasGroup(local, g.Name) {
				continue
			}
			if s.pickQueue(p, pub, echo, nil, g.Members, g.Name, m) {
				delivered = true
			}
		}
	}
	for i := range p.routeQs {
		rq := &p.routeQs[i]
		if rq.r.forward(p, m, rq.queues) {
			delivered = true
		}
	}
	if !delivered && len(m.Reply) > 0 && pub.noResponders {
		s.noResponders(pub, m)
	}
}

// pickQueue delivers m to one member of queue group name: a random one of
// the local members (minus the publisher's own when echo is off) and the
// peer brokers with members. A chosen peer is recorded in p.routeQs.
func (s *Server) pickQueue(p *producer, pub *client, echo bool, local []*subscription, remote []*route, name string, m *natsproto.Msg) bool {
	for tries := 0; tries < 4; tries++ {
		n := len(local) + len(remote)
		if n == 0 {
			return false
		}
		i := rand.IntN(n)
		if i >= len(local) {
			rq := p.routeEntry(remote[i-len(local)])
			rq.queues = append(rq.queues, []byte(name))
			return true
		}
		sub := local[i]
		if (!echo && sub.client == pub) || sub.removed.Load() {
			local = without(local, i)
			continue
		}
		if sub.deliver(p, m.Subject, m.Reply, m.Header, m.Payload) {
			return true
		}
		local = without(local, i)
	}
	return false
}

// without returns subs without index i (a new slice: results are shared).
func without(subs []*subscription, i int) []*subscription {
	out := make([]*subscription, 0, len(subs)-1)
	out = append(out, subs[:i]...)
	return append(out, subs[i+1:]...)
}

func groupMembers(r *sublist.Result[*route], name string) []*route {
	for i := range r.Groups {
		if r.Groups[i].Name == name {
			return r.Groups[i].Members
		}
	}
	return nil
}

func hasGroup(r *sublist.Result[*subscription], name string) bool {
	for i := range r.Groups {
		if r.Groups[i].Name == name {
			return true
		}
	}
	return false
}

// noResponders answers a request nobody took with a header-only 503 to the
// publisher's own subscription on the reply subject (NATS protocol §1.8;
// the reference adds Nats-Subject).
func (s *Server) noResponders(pub *client, m *natsproto.Msg) {
	reply := m.Reply
	if len(pub.acctPrefix) > 0 {
		reply = append(append([]byte(nil), pub.acctPrefix...), reply...)
	}
	subject := m.Subject
	if len(pub.acctPrefix) > 0 && bytes.HasPrefix(subject, pub.acctPrefix) {
		subject = subject[len(pub.acctPrefix):]
	}
	r := s.subs.MatchBytes(reply)
	for _, sub := range r.Plain {
		if sub.client != pub {
			continue
		}
		hdr := natsproto.AppendStatusHeader(nil, 503, "", "Nats-Subject", string(subject))
		s.noResp.Add(1)
		sub.deliver(&pub.prod, m.Reply, nil, hdr, nil)
		return
	}
	for _, g := range r.Groups {
		for _, sub := range g.Members {
			if sub.client == pub {
				hdr := natsproto.AppendStatusHeader(nil, 503, "", "Nats-Subject", string(subject))
				s.noResp.Add(1)
				sub.deliver(&pub.prod, m.Reply, nil, hdr, nil)
				return
			}
		}
	}
}

// deliverRouted delivers a message a peer broker forwarded (RMSG): to every
// local plain subscription, and to one local member of each queue group
// the peer chose this broker for. It never forwards again: the region's
// brokers are fully meshed, so one hop reaches everyone.
func (s *Server) deliverRouted(p *producer, m *natsproto.Msg) {
	local := s.subs.MatchBytes(m.Subject)
	for _, sub := range local.Plain {
		sub.deliver(p, m.Subject, m.Reply, m.Header, m.Payload)
	}
	for _, q := range m.Queues {
		for gi := range local.Groups {
			g := &local.Groups[gi]
			if g.Name != string(q) {
				continue
			}
			members := g.Members
			for len(members) > 0 {
				i := rand.IntN(len(members))
				if members[i].deliver(p, m.Subject, m.Reply, m.Header, m.Payload) {
					break
				}
				members = without(members, i)
			}
		}
	}
}
