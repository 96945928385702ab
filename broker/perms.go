package broker

import (
	"strings"
	"sync"
	"time"
)

// Permissions narrow what a user may publish and subscribe to (a NATS user
// JWT's pub/sub allow and deny lists and its response permission). They
// apply inside the user's account: subjects of other accounts are out of
// reach whatever the lists say.
type Permissions struct {
	Pub, Sub SubjectRule
	// Resp, when set, lets the user publish to the reply subject of each
	// request it received (even where Pub would refuse it), at most
	// MaxMsgs times (0: once) within Expires (0: 2 min) of the delivery.
	Resp *ResponseRule
}

// SubjectRule is an allow and a deny list of subjects (wildcards allowed;
// a "subject queue" entry of a sub list is taken by its subject). An empty
// Allow allows everything Deny does not deny.
type SubjectRule struct {
	Allow, Deny []string
}

// ResponseRule is a response permission (NATS user JWT "resp").
type ResponseRule struct {
	MaxMsgs int
	Expires time.Duration
}

// Defaults of ResponseRule, as NATS uses them.
const (
	defaultRespMax     = 1
	defaultRespExpires = 2 * time.Minute
	pubCacheMax        = 1024
)

// perms is a connection's compiled Permissions: publish decisions are
// cached per subject (bounded), response grants are kept per reply
// subject. Safe for concurrent use (deliveries record grants from other
// goroutines).
type perms struct {
	pubAllow, pubDeny []string
	subAllow, subDeny []string
	resp              *ResponseRule

	mu       sync.Mutex
	pubCache map[string]bool
	replies  map[string]*respGrant
}

type respGrant struct {
	left    int
	expires time.Time
}

func compilePerms(p *Permissions) *perms {
	if p == nil {
		return nil
	}
	c := &perms{
		pubAllow: subjectsOf(p.Pub.Allow), pubDeny: subjectsOf(p.Pub.Deny),
		subAllow: subjectsOf(p.Sub.Allow), subDeny: subjectsOf(p.Sub.Deny),
		resp: p.Resp, pubCache: map[string]bool{},
	}
	if c.resp != nil {
		c.replies = map[string]*respGrant{}
	}
	return c
}

// subjectsOf drops the queue part of "subject queue" entries.
func subjectsOf(list []string) []string {
	out := make([]string, 0, len(list))
	for _, s := range list {
		s, _, _ = strings.Cut(strings.TrimSpace(s), " ")
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// canPublish reports whether subject (literal) may be published: allowed
// by the pub lists, or a reply subject the connection holds a response
// grant for (which it uses up).
func (p *perms) canPublish(subject string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ok, cached := p.pubCache[subject]
	if !cached {
		ok = (len(p.pubAllow) == 0 || matchesAny(subject, p.pubAllow)) && !matchesAny(subject, p.pubDeny)
		if len(p.pubCache) >= pubCacheMax {
			clear(p.pubCache)
		}
		p.pubCache[subject] = ok
	}
	if ok {
		return true
	}
	g := p.replies[subject]
	if g == nil {
		return false
	}
	if now.After(g.expires) {
		delete(p.replies, subject)
		return false
	}
	g.left--
	if g.left <= 0 {
		delete(p.replies, subject)
	}
	return true
}

// grantReply records that the connection received a request with reply
// subject reply (a response permission grant).
func (p *perms) grantReply(reply []byte, now time.Time) {
	if p.resp == nil || len(reply) == 0 {
		return
	}
	max, exp := p.resp.MaxMsgs, p.resp.Expires
	if max <= 0 {
		max = defaultRespMax
	}
	if exp <= 0 {
		exp = defaultRespExpires
	}
	p.mu.Lock()
	if len(p.replies) >= 4*pubCacheMax { // drop the expired before growing
		for k, g := range p.replies {
			if now.After(g.expires) {
				delete(p.replies, k)
			}
		}
	}
	p.replies[string(reply)] = &respGrant{left: max, expires: now.Add(exp)}
	p.mu.Unlock()
}

// canSubscribe reports whether subject (wildcards allowed) may be
// subscribed to: within an allowed subject, and not within a denied one.
// A subscription that merely overlaps a denied subject is accepted and
// the denied messages are filtered at delivery (deniesDelivery).
func (p *perms) canSubscribe(subject string) bool {
	if len(p.subAllow) > 0 {
		ok := false
		for _, a := range p.subAllow {
			if subsetOf(subject, a) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	for _, d := range p.subDeny {
		if subsetOf(subject, d) {
			return false
		}
	}
	return true
}

// overlapsDeny reports whether a subscription on subject could receive a
// subject the sub deny list denies.
func (p *perms) overlapsDeny(subject string) bool {
	for _, d := range p.subDeny {
		if overlaps(subject, d) {
			return true
		}
	}
	return false
}

// deniesDelivery reports whether a message on subject (literal) must not
// be delivered to a subscription of this connection.
func (p *perms) deniesDelivery(subject []byte) bool {
	return matchesAny(string(subject), p.subDeny)
}

func matchesAny(subject string, patterns []string) bool {
	for _, pat := range patterns {
		if subsetOf(subject, pat) {
			return true
		}
	}
	return false
}

// subsetOf reports whether every subject sub matches is matched by pat
// (NATS subject wildcards: "*" one token, ">" one or more trailing
// tokens). For a literal sub it is pat matching sub.
func subsetOf(sub, pat string) bool {
	for {
		st, srest, smore := strings.Cut(sub, ".")
		pt, prest, pmore := strings.Cut(pat, ".")
		switch {
		case pt == ">":
			return st != ""
		case st == ">":
			return false
		case pt == "*":
			if st == "" {
				return false
			}
		case st == "*":
			return false
		case st != pt:
			return false
		}
		if smore != pmore {
			return false
		}
		if !smore {
			return true
		}
		sub, pat = srest, prest
	}
}

// overlaps reports whether some literal subject matches both a and b.
func overlaps(a, b string) bool {
	for {
		at, arest, amore := strings.Cut(a, ".")
		bt, brest, bmore := strings.Cut(b, ".")
		switch {
		case at == ">" || bt == ">":
			return at != "" && bt != ""
		case at == "*" || bt == "*":
		case at != bt:
			return false
		}
		if amore != bmore {
			return false
		}
		if !amore {
			return true
		}
		a, b = arest, brest
	}
}
