package broker

import (
	"bytes"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/broker/natsproto"
)

// client is one NATS client connection. Its reader goroutine parses and
// executes ops in order (so a PONG goes out only after every earlier op
// took effect, NATS protocol §1.9); its outbound writer goroutine writes.
type client struct {
	srv    *Server
	cid    uint64
	conn   net.Conn
	out    *outbound
	parser *natsproto.Parser
	remote string
	// home is, for a guest (a connection to a failover listener), the
	// region whose clients that listener serves; "" for the region's own.
	home string

	// Set by CONNECT, read by other goroutines delivering to this client.
	echo         atomic.Bool
	headers      atomic.Bool
	noResponders bool        // reader goroutine only
	verbose      bool        // reader goroutine only
	connected    bool        // reader goroutine only: CONNECT accepted
	handshook    atomic.Bool // CONNECT accepted: later INFO updates may be sent
	name         string

	// Set by CONNECT (before any SUB or PUB is accepted), then read-only.
	// ident is who the connection logged in as; acctPrefix is its
	// account's subject space ("" for the system account: see
	// AccountSubject); perms its compiled permissions (nil: none);
	// connInfo what it presented, for Reauthorize.
	ident      Identity
	acctPrefix []byte
	perms      *perms
	nonce      string
	connInfo   ConnectInfo
	maxSubs    int
	maxPayload int
	subjBuf    []byte // reader goroutine's scratch: the publish subject in its account space
	// subsLimitLogged: the subscription limit was logged (reader only).
	subsLimitLogged bool
	expTimer        *time.Timer

	mu   sync.Mutex
	subs map[string]*subscription // by sid

	pingsOut  atomic.Int32
	pingTimer *time.Timer
	authTimer *time.Timer

	// prod is the reader goroutine's delivery scratch.
	prod producer

	// Quotas (quota_gate.go): the connection quota held; the reader's
	// tenant-name cache and its rate limit of quota -ERRs.
	cq              connQuota
	tenantNames     map[string]string
	quotaErrAt      time.Time
	quotaErrsUnsent int

	teardownOnce sync.Once
}

// subscription is one SUB of a client.
type subscription struct {
	client  *client
	subject string
	queue   string
	sid     string
	sidB    []byte
	max     atomic.Int64 // 0 = unlimited; auto-unsubscribe after this many deliveries in total
	count   atomic.Int64 // deliveries so far
	removed atomic.Bool
	// strip is the account prefix of the subscriber's subject space: taken
	// off delivered subjects (the client sees its own subjects).
	strip []byte
	// deny, when set, filters deliveries through the subscriber's sub
	// deny list (the subscription overlaps a denied subject).
	deny *perms
	// internal, when set, makes this a subscription of the broker itself
	// (SubscribeInternal): deliveries call it instead of writing to a
	// client, and client is nil.
	internal InternalHandler
}

// readLoop is the client's reader goroutine.
func (c *client) readLoop() {
	defer c.teardown()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.conn.Read(buf)
		if n > 0 {
			perr := c.parser.Parse(buf[:n], c)
			c.prod.flush()
			if perr != nil {
				c.protocolError(perr)
				return
			}
			if n == len(buf) && len(buf) < 256<<10 {
				buf = make([]byte, 2*len(buf))
			}
		}
		if err != nil {
			return
		}
	}
}

// closeErr is returned by handler methods to end the connection after
// sending an -ERR with text ("" closes silently).
type closeErr struct {
	text string
	err  error
}

func (e *closeErr) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return e.text
}

// protocolError sends the -ERR the error calls for, then closes.
func (c *client) protocolError(err error) {
	var ce *closeErr
	text := ""
	if errors.As(err, &ce) {
		text = ce.text
	} else {
		text = natsproto.ErrText(err)
	}
	c.srv.logger.Debug("closing client", "cid", c.cid, "remote", c.remote, "err", err)
	c.closeWithErr(text)
}

// closeWithErr queues -ERR 'text' (when text is not empty) and closes the
// connection once it is written.
func (c *client) closeWithErr(text string) {
	var b []byte
	if text != "" {
		b = natsproto.AppendErr(nil, text)
	}
	c.out.closeAfter(b)
}

// teardown removes the client's subscriptions and stops its timers; it
// runs once, when the reader exits.
func (c *client) teardown() {
	c.teardownOnce.Do(func() {
		c.out.closeAfter(nil)
		if c.srv.cfg.Quotas != nil {
			c.releaseConnQuota()
		}
		if c.pingTimer != nil {
			c.pingTimer.Stop()
		}
		if c.authTimer != nil {
			c.authTimer.Stop()
		}
		if c.expTimer != nil {
			c.expTimer.Stop()
		}
		c.mu.Lock()
		subs := c.subs
		c.subs = nil
		c.mu.Unlock()
		for _, s := range subs {
			c.srv.removeSub(s)
		}
		c.srv.removeClient(c)
	})
}

// send queues raw protocol bytes to this client and kicks its writer.
func (c *client) send(b []byte) {
	switch c.out.enqueue(b) {
	case enqSlow:
		c.slowConsumer()
	default:
		c.out.kick()
	}
}

func (c *client) slowConsumer() {
	if !c.out.abort(natsproto.AppendErr(nil, errTextSlowConsumer)) {
		return // already closing
	}
	c.srv.slowConsumers.Add(1)
	c.srv.logger.Warn("slow consumer: closing client", "cid", c.cid, "remote", c.remote, "name", c.name)
}

// validPublishSubject accepts what the reference delivers: non-empty
// tokens (wildcard characters in a published subject are literal tokens,
// which only wildcard subscriptions match).
func validPublishSubject(s []byte) bool {
	if len(s) == 0 || s[0] == '.' || s[len(s)-1] == '.' {
		return false
	}
	return !bytes.Contains(s, []byte(".."))
}

var natsHeaderPrefix = []byte("NATS/1.0")

var (
	opOK   = []byte("+OK\r\n")
	opPing = []byte("PING\r\n")
	opPong = []byte("PONG\r\n")
)

func (c *client) ok() {
	if c.verbose {
		c.send(opOK)
	}
}

// requireConnect refuses ops before CONNECT when auth is on.
func (c *client) requireConnect() error {
	if !c.connected && c.srv.cfg.Auth != nil {
		return &closeErr{text: errTextConnectRequired}
	}
	return nil
}

// Connect implements natsproto.Handler (NATS protocol: CONNECT). With an
// Authenticator, the first CONNECT decides who the connection is; a
// refusal is -ERR 'Authorization Violation' and a close.
func (c *client) Connect(arg []byte) error {
	o, errText, err := parseConnect(arg)
	if err != nil {
		return &closeErr{text: errText, err: err}
	}
	if a := c.srv.cfg.Auth; a != nil {
		if c.connected {
			return nil // a second CONNECT changes nothing
		}
		ci := ConnectInfo{User: o.User, Pass: o.Pass, Token: o.Token, JWT: o.JWT, Sig: o.Sig, NKey: o.NKey,
			Nonce: c.nonce, Name: o.Name, RemoteAddr: c.remote}
		gen := c.srv.authGen.Load()
		id, err := a.Authenticate(ci)
		if err != nil {
			c.srv.authFailures.Add(1)
			c.srv.logger.Info("authentication failed", "remote", c.remote, "user", o.User, "name", o.Name, "err", err)
			return &closeErr{text: errTextAuth, err: err}
		}
		if c.authTimer != nil {
			c.authTimer.Stop()
		}
		c.setIdentity(ci, id)
		if c.srv.authGen.Load() != gen {
			// A Reauthorize ran while this login was checked (after its
			// snapshot of the logged-in connections, or with the
			// Authenticator's view from before the change): check again,
			// now that the connection is where the next one looks.
			if _, err := a.Authenticate(ci); err != nil {
				c.srv.authFailures.Add(1)
				c.srv.logger.Info("authentication failed on a re-check during a change", "remote", c.remote, "name", o.Name, "err", err)
				return &closeErr{text: errTextAuth, err: err}
			}
		}
		if err := c.takeConnQuota(); err != nil {
			return err
		}
	}
	c.connected = true
	c.handshook.Store(true)
	c.verbose = o.verbose()
	c.noResponders = o.NoResponders
	c.echo.Store(o.echo())
	c.headers.Store(o.Headers)
	c.parser.SetHeaders(o.Headers)
	c.name = o.Name
	c.ok()
	return nil
}

// setIdentity applies an accepted login: the account's subject space, the
// permissions, the user's limits and the credentials' expiry.
func (c *client) setIdentity(ci ConnectInfo, id Identity) {
	c.connInfo = ci
	c.ident = id
	c.acctPrefix = accountPrefix(id.Account)
	c.perms = compilePerms(id.Perms)
	if id.MaxSubs > 0 && (c.maxSubs == 0 || id.MaxSubs < c.maxSubs) {
		c.maxSubs = id.MaxSubs
	}
	c.maxPayload = 0
	if id.MaxPayload > 0 && id.MaxPayload < c.srv.cfg.MaxPayload {
		c.maxPayload = id.MaxPayload
	}
	if !id.Expires.IsZero() {
		c.expTimer = time.AfterFunc(time.Until(id.Expires), func() {
			c.srv.logger.Info("credentials expired: closing client", "cid", c.cid, "remote", c.remote, "user", id.User)
			c.closeWithErr(errTextAuthExpired)
		})
	}
	c.srv.mu.Lock()
	c.srv.authed[c.cid] = c
	c.srv.mu.Unlock()
}

// permViolation tells the client (without closing it, as the reference
// does) that an op was refused by its permissions or its account's bounds.
func (c *client) permViolation(what string, subject []byte) {
	c.srv.permViolations.Add(1)
	c.send(natsproto.AppendErr(nil, "Permissions Violation for "+what+" to \""+string(subject)+"\""))
}

// Info implements natsproto.Handler; a client's INFO is ignored, as the
// reference server does.
func (c *client) Info([]byte) error { return nil }

// Msg implements natsproto.Handler (NATS protocol: PUB, HPUB). A
// connection of a tenant publishes in its account's subject space, within
// its permissions.
func (c *client) Msg(m *natsproto.Msg) error {
	if err := c.requireConnect(); err != nil {
		return err
	}
	if m.Header != nil && !bytes.HasPrefix(m.Header, natsHeaderPrefix) {
		return &closeErr{text: errTextUnknownOp, err: errors.New("HPUB header block does not start with NATS/1.0")}
	}
	if c.maxPayload > 0 && len(m.Header)+len(m.Payload) > c.maxPayload {
		return &closeErr{text: errTextMaxPayload, err: errors.New("publish over the user's payload limit")}
	}
	c.ok()
	if !validPublishSubject(m.Subject) {
		// Empty tokens: nothing can match; dropped and counted.
		c.srv.droppedPubs.Add(1)
		return nil
	}
	if c.perms != nil && !c.perms.canPublish(string(m.Subject), time.Now()) {
		c.permViolation("Publish", m.Subject)
		return nil
	}
	c.srv.inMsgs.Add(1)
	c.srv.inBytes.Add(int64(len(m.Header) + len(m.Payload)))
	if h := c.srv.cfg.Hook; h != nil {
		switch h.ClientPublish(ClientInfo{ID: c.cid, Name: c.name, Account: c.ident.Account}, m.Subject, m.Reply, m.Header, m.Payload) {
		case HookConsumed:
			return nil
		case HookDenied:
			c.permViolation("Publish", m.Subject)
			return nil
		case HookOverQuota:
			if c.srv.cfg.Quotas == nil || c.admitCore(m) {
				c.publishInAccount(m)
			}
			return nil
		case HookStored:
			nr := c.noResponders
			c.noResponders = false
			c.publishInAccount(m)
			c.noResponders = nr
			return nil
		}
	}
	if c.srv.cfg.Quotas != nil && !c.admitCore(m) {
		return nil // refused by its tenant's quota (quota_gate.go)
	}
	c.publishInAccount(m)
	return nil
}

// publishInAccount routes m in the connection's account space.
func (c *client) publishInAccount(m *natsproto.Msg) {
	if len(c.acctPrefix) == 0 {
		c.srv.publish(c, m)
		return
	}
	c.subjBuf = append(append(c.subjBuf[:0], c.acctPrefix...), m.Subject...)
	orig := m.Subject
	m.Subject = c.subjBuf
	c.srv.publish(c, m)
	m.Subject = orig
}

// Sub implements natsproto.Handler (NATS protocol: SUB). A connection of
// a tenant subscribes in its account's subject space, within its
// permissions and the broker's (or its user's) subscription limit.
func (c *client) Sub(subject, queue, sid []byte) error {
	if err := c.requireConnect(); err != nil {
		return err
	}
	if !natsproto.ValidSubscribeSubject(subject) || (queue != nil && !natsproto.ValidQueueName(queue)) {
		return &closeErr{text: errTextInvalidSubject}
	}
	if c.perms != nil && !c.perms.canSubscribe(string(subject)) {
		c.permViolation("Subscription", subject)
		return nil
	}
	s := &subscription{client: c, subject: string(c.acctPrefix) + string(subject), queue: string(queue), sid: string(sid), strip: c.acctPrefix}
	s.sidB = []byte(s.sid)
	if c.perms != nil && c.perms.overlapsDeny(string(subject)) {
		s.deny = c.perms
	}
	c.mu.Lock()
	if c.subs == nil { // torn down
		c.mu.Unlock()
		return nil
	}
	if _, dup := c.subs[s.sid]; dup {
		// nats-server ignores a SUB that reuses a live sid.
		c.mu.Unlock()
		c.ok()
		return nil
	}
	if c.maxSubs > 0 && len(c.subs) >= c.maxSubs {
		c.mu.Unlock()
		if !c.subsLimitLogged {
			c.subsLimitLogged = true // once per connection: a client may retry thousands of times
			c.srv.logger.Info("subscription limit reached", "cid", c.cid, "remote", c.remote, "limit", c.maxSubs)
		}
		c.send(natsproto.AppendErr(nil, errTextMaxSubs))
		return nil
	}
	c.subs[s.sid] = s
	c.mu.Unlock()
	if err := c.srv.addSub(s); err != nil {
		c.mu.Lock()
		delete(c.subs, s.sid)
		c.mu.Unlock()
		return &closeErr{text: errTextInvalidSubject, err: err}
	}
	c.ok()
	return nil
}

// Unsub implements natsproto.Handler (NATS protocol: UNSUB [max]).
func (c *client) Unsub(sid []byte, max int64) error {
	if err := c.requireConnect(); err != nil {
		return err
	}
	c.mu.Lock()
	s := c.subs[string(sid)]
	c.mu.Unlock()
	if s != nil {
		if max > 0 && s.count.Load() < max {
			s.max.Store(max)
		} else {
			c.unsubscribe(s)
		}
	}
	c.ok()
	return nil
}

// unsubscribe removes s from the client and the server (once).
func (c *client) unsubscribe(s *subscription) {
	if s.removed.Swap(true) {
		return
	}
	c.mu.Lock()
	if c.subs != nil && c.subs[s.sid] == s {
		delete(c.subs, s.sid)
	}
	c.mu.Unlock()
	c.srv.removeSub(s)
}

// RouteSub, RouteUnsub implement natsproto.Handler; clients do not send them.
func (c *client) RouteSub(_, _ []byte) error   { return &closeErr{text: errTextUnknownOp} }
func (c *client) RouteUnsub(_, _ []byte) error { return &closeErr{text: errTextUnknownOp} }

// Ping implements natsproto.Handler: PONG, in order after earlier ops.
func (c *client) Ping() error {
	if err := c.requireConnect(); err != nil {
		return err
	}
	c.send(opPong)
	return nil
}

// Pong implements natsproto.Handler: answers our PING.
func (c *client) Pong() error {
	c.pingsOut.Store(0)
	return nil
}

// Err and OK implement natsproto.Handler; a client's -ERR/+OK is ignored.
func (c *client) Err([]byte) error { return nil }
func (c *client) OK() error        { return nil }

// pingTick is the server-side ping timer (NATS protocol §1.9): PING, and
// close with -ERR 'Stale Connection' after MaxPingsOut misses.
func (c *client) pingTick() {
	if c.out.isClosed() {
		return
	}
	if int(c.pingsOut.Load()) >= c.srv.cfg.MaxPingsOut {
		c.srv.staleConns.Add(1)
		c.srv.logger.Info("stale connection: closing client", "cid", c.cid, "remote", c.remote)
		c.closeWithErr(errTextStale)
		return
	}
	c.pingsOut.Add(1)
	c.send(opPing)
	c.pingTimer.Reset(c.srv.cfg.PingInterval)
}

// deliver queues one MSG/HMSG for s, honouring its auto-unsubscribe count,
// and records the connection in the producer's touched list. The producer
// is whoever runs the delivery (a client's or a route's reader); touched
// and stalled are its scratch lists. It reports whether it queued.
func (s *subscription) deliver(p *producer, subject, reply, hdr, payload []byte) bool {
	if s.removed.Load() {
		return false
	}
	n := s.count.Add(1)
	if max := s.max.Load(); max > 0 {
		if n > max {
			return false
		}
		if n == max {
			defer s.client.unsubscribe(s)
		}
	}
	if s.internal != nil {
		s.internal(subject, reply, hdr, payload)
		return true
	}
	if len(s.strip) > 0 && bytes.HasPrefix(subject, s.strip) {
		subject = subject[len(s.strip):]
	}
	if s.deny != nil && s.deny.deniesDelivery(subject) {
		return false
	}
	c := s.client
	if c.perms != nil && c.perms.resp != nil && len(reply) > 0 {
		c.perms.grantReply(reply, time.Now())
	}
	if !c.headers.Load() {
		hdr = nil
	}
	r := c.out.appendMsg(subject, s.sidB, reply, hdr, payload)
	if r == enqClosed {
		return false
	}
	c.srv.outMsgs.Add(1)
	if r == enqSlow {
		c.slowConsumer()
		return false
	}
	p.queued(c.out, r)
	return true
}

// sidString is for logs and tests.
func (s *subscription) String() string {
	if s.client == nil {
		return s.subject + " (internal)"
	}
	return s.subject + " sid=" + s.sid + " cid=" + strconv.FormatUint(s.client.cid, 10)
}
