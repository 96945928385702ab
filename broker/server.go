package broker

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/broker/natsproto"
	"github.com/stratamesh/strata/broker/sublist"
)

// Server is one broker's NATS front door and its end of the region's
// internal link. Start it with Start; Close stops it.
type Server struct {
	cfg    Config
	id     string
	logger *slog.Logger

	ln       net.Listener
	routeLn  net.Listener
	guestLns []guestListener // failover listeners (guests.go)

	subs   *sublist.List[*subscription] // local clients' subscriptions
	remote *sublist.List[*route]        // interest other brokers announced

	mu        sync.Mutex
	clients   map[uint64]*client
	authed    map[uint64]*client  // clients that logged in (Reauthorize re-checks them)
	routes    map[string]*route   // by peer server name
	interest  map[interestKey]int // local subscriptions per (subject, queue): what peers are told
	nRoutes   atomic.Int32        // len(routes), read on the publish path
	dialing   map[string]bool     // peers being dialled
	kickPeers chan struct{}       // capacity 1: re-evaluate routes now
	closing   bool

	outBudget *outBudget // Config.MaxOutboundTotal, shared by every connection

	nextCID atomic.Uint64
	quit    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once

	// Counters (monotonic since start), exported by Stats.
	inMsgs, inBytes, outMsgs, droppedPubs atomic.Int64
	slowConsumers, staleConns, noResp     atomic.Int64
	authFailures, permViolations          atomic.Int64
	quotaRefusals, quotaErrsUnsent        atomic.Int64
	quotaConnRefusals                     atomic.Int64
	guestsRefused, guestsSentHome         atomic.Int64
	// authGen counts Reauthorize calls (begun): a login checked across
	// one is checked again (client.Connect).
	authGen atomic.Uint64
}

// interestKey is one (subject, queue) a broker has local subscriptions for.
type interestKey struct{ subject, queue string }

// Start binds the client listener (and the route listener when
// cfg.RouteAddr is set), starts accepting, and returns. It returns an error
// naming the address when a bind fails, or Validate's errors.
func Start(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:       cfg,
		id:        newServerID(),
		logger:    cfg.Logger.With("broker", cfg.ServerName),
		subs:      sublist.New[*subscription](),
		remote:    sublist.New[*route](),
		clients:   map[uint64]*client{},
		authed:    map[uint64]*client{},
		routes:    map[string]*route{},
		interest:  map[interestKey]int{},
		dialing:   map[string]bool{},
		kickPeers: make(chan struct{}, 1),
		quit:      make(chan struct{}),
		outBudget: newOutBudget(cfg.MaxOutboundTotal),
	}
	var err error
	if s.ln, err = net.Listen("tcp", cfg.ListenAddr); err != nil {
		return nil, fmt.Errorf("broker: listen for NATS clients on %s: %w", cfg.ListenAddr, err)
	}
	if cfg.RouteAddr != "" {
		if s.routeLn, err = net.Listen("tcp", cfg.RouteAddr); err != nil {
			s.ln.Close()
			return nil, fmt.Errorf("broker: listen for the internal link on %s: %w", cfg.RouteAddr, err)
		}
		s.routeLn = s.wrapRouteListener(s.routeLn) // TLS: broker/tls.go
		s.goRun(s.acceptRoutes)
	}
	if err := s.listenGuests(); err != nil {
		s.ln.Close()
		if s.routeLn != nil {
			s.routeLn.Close()
		}
		return nil, err
	}
	s.goRun(func() { s.acceptClients(s.ln, "") })
	if cfg.Peers != nil {
		s.goRun(s.watchPeers)
	}
	return s, nil
}

// newServerID is a random 22-character id, stable for the process.
func newServerID() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 22)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "N" + string(b[1:])
}

// Addr is the address NATS clients connect to (host:port).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// ClientURL is Addr as a nats:// URL.
func (s *Server) ClientURL() string { return "nats://" + s.Addr() }

// RouteAddr is the internal link's address, or "" without one.
func (s *Server) RouteAddr() string {
	if s.routeLn == nil {
		return ""
	}
	return s.routeLn.Addr().String()
}

// Name is the broker's ServerName.
func (s *Server) Name() string { return s.cfg.ServerName }

func (s *Server) goRun(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// Close stops accepting, closes every client and route connection and
// waits for the broker's goroutines, or until ctx ends. It is idempotent.
func (s *Server) Close(ctx context.Context) error {
	s.once.Do(func() {
		close(s.quit)
		s.mu.Lock()
		s.closing = true
		clients := make([]*client, 0, len(s.clients))
		for _, c := range s.clients {
			clients = append(clients, c)
		}
		routes := make([]*route, 0, len(s.routes))
		for _, r := range s.routes {
			routes = append(routes, r)
		}
		s.mu.Unlock()
		s.ln.Close()
		if s.routeLn != nil {
			s.routeLn.Close()
		}
		for _, g := range s.guestLns {
			g.ln.Close()
		}
		s.releaseAllConnQuotas(ctx, clients) // before any client is closed
		for _, c := range clients {
			c.out.closeAfter(nil)
			c.conn.Close()
		}
		for _, r := range routes {
			r.close("broker shutting down")
		}
	})
	done := make(chan struct{})
	go func() { s.wg.Wait(); s.outBudget.stop(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("broker: close: %w", ctx.Err())
	}
}

// acceptClients accepts on ln: the client listener (home "") or the
// failover listener of home.
func (s *Server) acceptClients(ln net.Listener, home string) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.logger.Warn("accept failed", "err", err)
			select {
			case <-s.quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if home != "" && !s.admitGuest(home) {
			s.guestsRefused.Add(1)
			conn.Close()
			continue
		}
		s.startClient(conn, home)
	}
}

// startClient sends INFO and starts the client's reader and writer.
func (s *Server) startClient(conn net.Conn, home string) {
	conn = s.wrapClientConn(conn) // TLS after INFO: broker/tls.go
	c := &client{
		srv:    s,
		cid:    s.nextCID.Add(1),
		conn:   conn,
		out:    newOutbound(conn, s.cfg.MaxPending, s.cfg.WriteDeadline, s.outBudget),
		remote: conn.RemoteAddr().String(),
		home:   home,
		subs:   map[string]*subscription{},
		// Before CONNECT the reference acts as if verbose and echo were on.
		verbose: true,
		parser: natsproto.NewParser(natsproto.Config{
			Kind: natsproto.KindClient, MaxControlLine: s.cfg.MaxControlLine, MaxPayload: s.cfg.MaxPayload,
		}),
	}
	c.echo.Store(true)
	c.maxSubs = max(s.cfg.MaxSubscriptions, 0)
	if na, ok := s.cfg.Auth.(NonceAuthenticator); ok && na.NeedsNonce() {
		c.nonce = newNonce()
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		conn.Close()
		return
	}
	s.clients[c.cid] = c
	s.mu.Unlock()

	c.out.onShed = c.slowConsumer
	c.out.onTimeout = func() {
		s.slowConsumers.Add(1)
		s.logger.Warn("slow consumer: a write to the client passed its deadline; closing it", "cid", c.cid, "remote", c.remote, "deadline", s.cfg.WriteDeadline)
	}
	c.send(s.infoLine(c))
	if s.cfg.Auth != nil {
		c.authTimer = time.AfterFunc(s.cfg.AuthTimeout, func() {
			c.closeWithErr(errTextAuthTimeout)
		})
	}
	c.pingTimer = time.AfterFunc(s.cfg.FirstPing, c.pingTick)
	s.goRun(c.out.run)
	s.goRun(c.readLoop)
}

// connectURLs lists the NATS addresses of this broker and the peers it has
// a route to, for INFO connect_urls: clients learn the region's other
// brokers and fail over to them (NATS protocol §1.2).
func (s *Server) connectURLs() []string {
	urls := []string{s.Addr()}
	s.mu.Lock()
	for _, r := range s.routes {
		if r.clientAddr != "" {
			urls = append(urls, r.clientAddr)
		}
	}
	s.mu.Unlock()
	slices.Sort(urls[1:])
	return urls
}

// broadcastInfo sends every connected client a fresh INFO when the
// region's brokers change, so their reconnect lists follow.
func (s *Server) broadcastInfo() {
	s.mu.Lock()
	clients := make([]*client, 0, len(s.clients))
	for _, c := range s.clients {
		clients = append(clients, c)
	}
	s.mu.Unlock()
	for _, c := range clients {
		if c.handshook.Load() {
			c.send(s.infoLine(c))
		}
	}
}

// infoLine renders the INFO for client c (NATS protocol §1.2).
func (s *Server) infoLine(c *client) []byte {
	host, port := hostPort(s.ln.Addr())
	if c.home != "" {
		host, port = hostPort(s.guestAddr(c.home))
	}
	clientIP, _, _ := net.SplitHostPort(c.remote)
	info := serverInfo{
		ServerID: s.id, ServerName: s.cfg.ServerName, Version: NATSVersion, Proto: 1,
		Go: runtime.Version(), Host: host, Port: port, Headers: true, MaxPayload: s.cfg.MaxPayload,
		ClientID: c.cid, ClientIP: clientIP, AuthRequired: s.cfg.Auth != nil, Nonce: c.nonce,
		Region: s.cfg.Region, StrataVersion: s.cfg.StrataVersion, JetStream: s.cfg.Hook != nil,
	}
	if s.routeLn != nil && c.home == "" {
		// Never to guests: a guest handed this region's own URLs would
		// reconnect to them and stay away from home (guests.go).
		info.ConnectURLs = s.connectURLs()
	}
	info.TLSRequired, info.TLSVerify = s.tlsInfo() // broker/tls.go
	b, _ := json.Marshal(info)
	return append(append([]byte("INFO "), b...), '\r', '\n')
}

func (s *Server) removeClient(c *client) {
	s.mu.Lock()
	delete(s.clients, c.cid)
	delete(s.authed, c.cid)
	s.mu.Unlock()
}

// Reauthorize checks every logged-in connection's credentials again with
// the Authenticator (call it when what it decides on changed: an account
// JWT re-signed with a revocation, an account removed). A connection now
// refused is sent -ERR 'Authorization Violation' and closed. It returns
// how many were closed.
func (s *Server) Reauthorize() int {
	a := s.cfg.Auth
	if a == nil {
		return 0
	}
	s.authGen.Add(1)
	s.mu.Lock()
	cs := make([]*client, 0, len(s.authed))
	for _, c := range s.authed {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	closed := 0
	for _, c := range cs {
		if _, err := a.Authenticate(c.connInfo); err != nil {
			s.logger.Info("credentials no longer accepted: closing client", "cid", c.cid, "remote", c.remote,
				"user", c.ident.User, "account", c.ident.Account, "err", err)
			c.closeWithErr(errTextAuthRevoked)
			closed++
		}
	}
	return closed
}

// addSub indexes a local subscription and, when it is the first for its
// (subject, queue), tells every peer broker (RS+).
func (s *Server) addSub(sub *subscription) error {
	if err := s.subs.Insert(sub.subject, sub.queue, sub); err != nil {
		return err
	}
	k := interestKey{sub.subject, sub.queue}
	s.mu.Lock()
	s.interest[k]++
	if s.interest[k] == 1 {
		for _, r := range s.routes {
			r.sendInterest(true, k)
		}
	}
	s.mu.Unlock()
	return nil
}

// removeSub drops a local subscription and, when it was the last for its
// (subject, queue), tells every peer broker (RS-).
func (s *Server) removeSub(sub *subscription) {
	sub.removed.Store(true)
	if err := s.subs.Remove(sub.subject, sub.queue, sub); err != nil {
		return // already removed
	}
	k := interestKey{sub.subject, sub.queue}
	s.mu.Lock()
	s.interest[k]--
	if s.interest[k] <= 0 {
		delete(s.interest, k)
		for _, r := range s.routes {
			r.sendInterest(false, k)
		}
	}
	s.mu.Unlock()
}

// Stats are a broker's counters since start.
type Stats struct {
	Clients, Routes, Subscriptions int
	InMsgs, InBytes, OutMsgs       int64
	// DroppedPubs counts publishes to subjects that are not valid literal
	// subjects (wildcards, empty tokens).
	DroppedPubs                     int64
	SlowConsumers, StaleConnections int64
	NoResponders                    int64
	// AuthFailures counts refused CONNECTs; PermViolations publishes and
	// subscriptions refused by a user's permissions or its account.
	AuthFailures, PermViolations int64
	// QuotaRefusals counts core publishes refused by their tenant's quota
	// (Config.Quotas); QuotaErrorsUnsent those of them whose client was
	// not sent an -ERR (at most one per connection per 100 ms);
	// QuotaConnRefusals connections refused at CONNECT.
	QuotaRefusals, QuotaErrorsUnsent, QuotaConnRefusals int64
}

// Stats returns the current counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	st := Stats{Clients: len(s.clients), Routes: len(s.routes)}
	s.mu.Unlock()
	st.Subscriptions = s.subs.Count()
	st.InMsgs, st.InBytes, st.OutMsgs = s.inMsgs.Load(), s.inBytes.Load(), s.outMsgs.Load()
	st.DroppedPubs = s.droppedPubs.Load()
	st.SlowConsumers, st.StaleConnections, st.NoResponders = s.slowConsumers.Load(), s.staleConns.Load(), s.noResp.Load()
	st.AuthFailures, st.PermViolations = s.authFailures.Load(), s.permViolations.Load()
	st.QuotaRefusals, st.QuotaErrorsUnsent = s.quotaRefusals.Load(), s.quotaErrsUnsent.Load()
	st.QuotaConnRefusals = s.quotaConnRefusals.Load()
	return st
}

// Routes returns the names of the peers this broker has a live route to.
func (s *Server) Routes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.routes))
	for n := range s.routes {
		names = append(names, n)
	}
	return names
}
