package broker

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/stratamesh/strata/broker/natsproto"
)

// Enforcing Config.Quotas (ARCHITECTURE §5) on core NATS: publishes and
// connections. The gate decides; this file only asks it and tells the
// client.
//
// A core publish (one the PublishHook routes as core NATS, or every
// publish without a hook) is charged to its tenant at the broker the
// client is connected to: its connection's account with auth on (the
// system account is never charged), else the subject's first token
// (shared/specs/nats-wire.md §4). Subjects starting with '$' (the
// mesh's and JetStream's own) or "_INBOX" (replies) are never charged,
// nor are the broker's internal publishes or messages from peer brokers.
//
// A refused publish is dropped and the client is told
//
//	-ERR 'Permissions Violation for Publish to "<subject>": <refusal>'
//
// The prefix is on purpose: nats.go and the nats CLI keep the connection
// open on a permissions violation and hand it to the async error handler
// (nats.ErrPermissionViolation), while any other -ERR makes them close the
// connection — a publisher over its rate would otherwise reconnect in a
// loop. A connection is told at most once per quotaErrEvery; the refusals
// in between are dropped silently and counted (Stats.QuotaErrorsUnsent).
//
// With auth on, a login to a tenant account takes one of its connections
// (Quotas.Connect) once CONNECT is accepted; a refusal is
// -ERR 'maximum connections exceeded: <refusal>' (nats-server's text for
// its own limit) and a close. Each connection taken is given back
// (Quotas.Disconnect) exactly once: when the connection ends, or when
// Server.Close begins, before any socket is closed (then Config.OnDrain
// runs).

// quotaErrEvery is the least time between two quota -ERRs to one
// connection.
const quotaErrEvery = 100 * time.Millisecond

// errTextMaxConns starts the -ERR of a connection refused by its tenant's
// connection quota (nats-server's text for its max_connections).
const errTextMaxConns = "maximum connections exceeded"

// maxTenantNames bounds a connection's cache of tenant names (auth off:
// first tokens of its subjects); past it the cache starts again.
const maxTenantNames = 64

// connQuota is the connection quota a connection holds. Its lock orders
// Connect (reader goroutine) against the release (teardown or
// Server.Close), so a connection is never given back twice nor taken
// after it was given back.
type connQuota struct {
	mu     sync.Mutex
	tenant string
	held   bool
	ended  bool // released: no connection may be taken any more
}

// errQuotaClosing refuses a connection quota to a connection being closed.
var errQuotaClosing = errors.New("broker: connection closing")

// takeConnQuota takes one connection of c's tenant account (auth on;
// the system account takes none). A refusal is the closeErr CONNECT
// returns.
func (c *client) takeConnQuota() error {
	q := c.srv.cfg.Quotas
	tenant := c.ident.Account
	if q == nil || tenant == "" {
		return nil
	}
	c.cq.mu.Lock()
	defer c.cq.mu.Unlock()
	if c.cq.ended {
		return &closeErr{err: errQuotaClosing}
	}
	if c.cq.held {
		return nil
	}
	if err := q.Connect(tenant); err != nil {
		c.srv.quotaConnRefusals.Add(1)
		c.srv.logger.Info("connection refused by its tenant's quota", "cid", c.cid, "remote", c.remote, "tenant", tenant, "err", err)
		return &closeErr{text: errTextMaxConns + ": " + oneLine(err.Error()), err: err}
	}
	c.cq.tenant, c.cq.held = tenant, true
	return nil
}

// releaseConnQuota gives back the connection c took, if any; after it
// none can be taken. Idempotent.
func (c *client) releaseConnQuota() {
	c.cq.mu.Lock()
	defer c.cq.mu.Unlock()
	c.cq.ended = true
	if c.cq.held {
		c.cq.held = false
		c.srv.cfg.Quotas.Disconnect(c.cq.tenant)
	}
}

// admitCore charges one core publish to its tenant; false when the
// quota refused it (the client has been told, within the rate limit).
func (c *client) admitCore(m *natsproto.Msg) bool {
	tenant, ok := c.publishTenant(m.Subject)
	if !ok {
		return true
	}
	err := c.srv.cfg.Quotas.AdmitPublish(tenant, len(m.Header)+len(m.Payload))
	if err == nil {
		return true
	}
	c.srv.quotaRefusals.Add(1)
	now := time.Now()
	if !c.quotaErrAt.IsZero() && now.Sub(c.quotaErrAt) < quotaErrEvery {
		c.quotaErrsUnsent++
		c.srv.quotaErrsUnsent.Add(1)
		return false
	}
	if c.quotaErrsUnsent > 0 {
		c.srv.logger.Debug("publishes refused by quota without an -ERR each", "cid", c.cid, "tenant", tenant, "count", c.quotaErrsUnsent)
		c.quotaErrsUnsent = 0
	}
	c.quotaErrAt = now
	c.send(natsproto.AppendErr(nil, "Permissions Violation for Publish to \""+string(m.Subject)+"\": "+oneLine(err.Error())))
	return false
}

var inboxPrefix = []byte("_INBOX")

// publishTenant is the tenant a core publish on subject is charged to,
// and whether it is charged at all. The name comes from a per-connection
// cache, so that the common case allocates nothing.
//
// With auth on, every publish of a tenant's connection is charged to its
// account, whatever the subject ($KV.…, _INBOX.… and the rest are in the
// account's own space and cost the mesh the same); the system account's
// never. With auth off, the tenant is the subject's first token, so
// subjects starting with '$' or _INBOX belong to no tenant.
func (c *client) publishTenant(subject []byte) (string, bool) {
	if c.srv.cfg.Auth != nil {
		return c.ident.Account, c.ident.Account != "" && len(subject) > 0
	}
	if len(subject) == 0 || subject[0] == '$' || bytes.HasPrefix(subject, inboxPrefix) {
		return "", false
	}
	first := subject
	if i := bytes.IndexByte(subject, '.'); i >= 0 {
		first = subject[:i]
	}
	if name, ok := c.tenantNames[string(first)]; ok {
		return name, true
	}
	if c.tenantNames == nil || len(c.tenantNames) >= maxTenantNames {
		c.tenantNames = make(map[string]string, 4)
	}
	name := string(first)
	c.tenantNames[name] = name
	return name, true
}

// oneLine keeps a refusal's text on one protocol line.
func oneLine(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	}
	return s
}

// releaseAllConnQuotas gives back every connection's quota (Server.Close,
// before the sockets close), then runs Config.OnDrain.
func (s *Server) releaseAllConnQuotas(ctx context.Context, clients []*client) {
	if s.cfg.Quotas != nil {
		for _, c := range clients {
			c.releaseConnQuota()
		}
	}
	if s.cfg.OnDrain != nil {
		s.cfg.OnDrain(ctx)
	}
}
