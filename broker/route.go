package broker

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/broker/natsproto"
)

// route is one end of the internal link to a peer broker of the region.
// The link speaks natsproto.KindRoute: RS+/RS- announce the interest of
// the sender's clients, RMSG carries a message with the queue groups the
// sender chose the receiver for, PING/PONG check liveness.
//
// Interest is announced per (subject, queue) once, when the sender's first
// local subscription for it appears (RS+), and withdrawn when its last one
// goes (RS-); a new route starts with a full announcement. Messages are
// at-most-once, like all core NATS traffic: a route that breaks loses what
// was queued on it.
type route struct {
	srv  *Server
	peer string // peer's ServerName
	// clientAddr is where the peer's NATS clients connect.
	clientAddr string
	conn       net.Conn
	out        *outbound
	parser     *natsproto.Parser
	prod       producer

	mu       sync.Mutex
	interest map[interestKey]struct{} // what the peer announced (mirrored in srv.remote)

	pingsOut  atomic.Int32
	pingTimer *time.Timer
	closeOnce sync.Once
	scratch   []byte
}

// routeHello is the CONNECT a route's dialer sends and the INFO the
// acceptor answers with.
type routeHello struct {
	Name   string `json:"name"`
	ID     string `json:"server_id"`
	Mesh   string `json:"mesh"`
	Region string `json:"region"`
	// ClientAddr is where the sender's NATS clients connect (host:port);
	// brokers list their peers' in INFO connect_urls.
	ClientAddr string `json:"client_addr,omitempty"`
}

func (s *Server) hello() routeHello {
	return routeHello{Name: s.cfg.ServerName, ID: s.id, Mesh: s.cfg.Mesh, Region: s.cfg.Region, ClientAddr: s.Addr()}
}

// acceptRoutes accepts peers' dials on the internal link.
func (s *Server) acceptRoutes() {
	for {
		conn, err := s.routeLn.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-s.quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		s.goRun(func() { s.acceptRoute(conn) })
	}
}

// handshakeTimeout bounds the route hello exchange.
const handshakeTimeout = 5 * time.Second

// acceptRoute reads the dialer's CONNECT, checks mesh and region, answers
// INFO, and runs the route.
func (s *Server) acceptRoute(conn net.Conn) {
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	br := bufio.NewReaderSize(conn, 4096)
	hello, err := readHello(br, "CONNECT")
	if err == nil && (hello.Mesh != s.cfg.Mesh || hello.Region != s.cfg.Region) {
		err = fmt.Errorf("peer %s is in %s/%s, not %s/%s", hello.Name, hello.Mesh, hello.Region, s.cfg.Mesh, s.cfg.Region)
		_, _ = conn.Write(natsproto.AppendErr(nil, errTextRouteRegion))
	}
	if err != nil {
		s.logger.Warn("route refused", "remote", conn.RemoteAddr().String(), "err", err)
		conn.Close()
		return
	}
	b, _ := json.Marshal(s.hello())
	if _, err := conn.Write(append(append([]byte("INFO "), b...), '\r', '\n')); err != nil {
		conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	s.runRoute(hello, conn, br)
}

// dialRoute connects to a peer's internal link and runs the route until
// it breaks.
func (s *Server) dialRoute(p Peer) error {
	conn, err := net.DialTimeout("tcp", p.RouteAddr, handshakeTimeout)
	if err != nil {
		return err
	}
	conn = s.wrapRouteDial(conn, p.RouteAddr) // TLS: broker/tls.go
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	b, _ := json.Marshal(s.hello())
	if _, err := conn.Write(append(append([]byte("CONNECT "), b...), '\r', '\n')); err != nil {
		conn.Close()
		return err
	}
	br := bufio.NewReaderSize(conn, 4096)
	hello, err := readHello(br, "INFO")
	if err != nil {
		conn.Close()
		return err
	}
	if hello.Name != p.Name {
		conn.Close()
		return fmt.Errorf("dialled %s at %s but %s answered", p.Name, p.RouteAddr, hello.Name)
	}
	_ = conn.SetDeadline(time.Time{})
	s.runRoute(hello, conn, br)
	return nil
}

// readHello reads one "<op> <json>" line of the route handshake.
func readHello(br *bufio.Reader, op string) (routeHello, error) {
	var h routeHello
	line, err := br.ReadSlice('\n')
	if err != nil {
		return h, fmt.Errorf("route handshake: %w", err)
	}
	if len(line) < len(op)+1 || string(line[:len(op)]) != op {
		return h, fmt.Errorf("route handshake: expected %s, got %.40q", op, line)
	}
	if err := json.Unmarshal(line[len(op):], &h); err != nil {
		return h, fmt.Errorf("route handshake: %w", err)
	}
	if h.Name == "" {
		return h, errors.New("route handshake: peer gave no name")
	}
	return h, nil
}

// runRoute registers the route (replacing an older one to the same peer),
// announces our interest, and reads until the connection ends.
func (s *Server) runRoute(hello routeHello, conn net.Conn, br *bufio.Reader) {
	peer := hello.Name
	r := &route{
		srv: s, peer: peer, conn: conn, clientAddr: hello.ClientAddr,
		out:      newOutbound(conn, 4*s.cfg.MaxPending, s.cfg.WriteDeadline, s.outBudget),
		parser:   natsproto.NewParser(natsproto.Config{Kind: natsproto.KindRoute, MaxControlLine: 64 << 10, MaxPayload: s.cfg.MaxPayload + routeOverhead, Headers: true}),
		interest: map[interestKey]struct{}{},
	}
	r.pingTimer = time.AfterFunc(s.cfg.RoutePing, r.pingTick) // before r is shared
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		r.pingTimer.Stop()
		conn.Close()
		return
	}
	old := s.routes[peer]
	s.routes[peer] = r
	s.nRoutes.Store(int32(len(s.routes)))
	for k := range s.interest {
		r.sendInterestLocked(true, k)
	}
	s.mu.Unlock()
	if old != nil {
		old.close("replaced by a new route")
	}
	r.out.kick()
	s.logger.Info("route up", "peer", peer, "remote", conn.RemoteAddr().String())
	s.broadcastInfo()

	done := make(chan struct{})
	go func() { r.out.run(); close(done) }()
	r.readLoop(br)
	r.close("connection ended")
	<-done
}

func (r *route) readLoop(br *bufio.Reader) {
	buf := make([]byte, 64<<10)
	// Bytes the handshake reader buffered beyond the hello line.
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		if err := r.parser.Parse(b, r); err != nil {
			r.srv.logger.Warn("route protocol error", "peer", r.peer, "err", err)
			return
		}
		r.prod.flushNoStall()
	}
	for {
		n, err := r.conn.Read(buf)
		if n > 0 {
			perr := r.parser.Parse(buf[:n], r)
			r.prod.flushNoStall()
			if perr != nil {
				r.srv.logger.Warn("route protocol error", "peer", r.peer, "err", perr)
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// close ends the route once: the peer's interest is forgotten and, if
// this is still the registered route to the peer, it is unregistered.
func (r *route) close(why string) {
	r.closeOnce.Do(func() {
		s := r.srv
		if r.pingTimer != nil {
			r.pingTimer.Stop()
		}
		r.out.closeAfter(nil)
		r.conn.Close()
		s.mu.Lock()
		if s.routes[r.peer] == r {
			delete(s.routes, r.peer)
			s.nRoutes.Store(int32(len(s.routes)))
		}
		s.mu.Unlock()
		r.mu.Lock()
		keys := r.interest
		r.interest = nil
		r.mu.Unlock()
		for k := range keys {
			_ = s.remote.Remove(k.subject, k.queue, r)
		}
		s.logger.Info("route down", "peer", r.peer, "why", why)
		s.peersChanged()
		s.broadcastInfo()
	})
}

// sendInterest queues RS+/RS- for k (callers hold s.mu, which orders
// announcements with the full announcement a new route starts with).
func (r *route) sendInterest(add bool, k interestKey) {
	r.sendInterestLocked(add, k)
	r.out.kick()
}

func (r *route) sendInterestLocked(add bool, k interestKey) {
	var q []byte
	if k.queue != "" {
		q = []byte(k.queue)
	}
	var b []byte
	if add {
		b = natsproto.AppendRouteSub(r.scratch[:0], []byte(k.subject), q)
	} else {
		b = natsproto.AppendRouteUnsub(r.scratch[:0], []byte(k.subject), q)
	}
	r.scratch = b
	if r.out.enqueue(b) == enqSlow {
		go r.close("slow route")
	}
}

// forward queues an RMSG for m with the queue groups chosen for this peer.
func (r *route) forward(p *producer, m *natsproto.Msg, queues [][]byte) bool {
	res := r.out.appendRMsg(m, queues)
	switch res {
	case enqClosed:
		return false
	case enqSlow:
		r.srv.logger.Warn("route over its buffer bound: closing it", "peer", r.peer)
		go r.close("slow route")
		return false
	}
	p.queued(r.out, res)
	return true
}

func (r *route) pingTick() {
	if r.out.isClosed() {
		return
	}
	if r.pingsOut.Load() >= 3 {
		r.close("missed pings")
		return
	}
	r.pingsOut.Add(1)
	if r.out.enqueue(opPing) != enqClosed {
		r.out.kick()
	}
	r.pingTimer.Reset(r.srv.cfg.RoutePing)
}

// natsproto.Handler for the route's inbound side.

func (r *route) Connect([]byte) error {
	return errors.New("unexpected CONNECT on an established route")
}
func (r *route) Info([]byte) error { return nil }
func (r *route) Msg(m *natsproto.Msg) error {
	r.srv.deliverRouted(&r.prod, m)
	return nil
}
func (r *route) Sub(_, _, _ []byte) error { return errors.New("SUB on a route") }
func (r *route) Unsub([]byte, int64) error {
	return errors.New("UNSUB on a route")
}

func (r *route) RouteSub(subject, queue []byte) error {
	k := interestKey{string(subject), string(queue)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.interest == nil {
		return nil
	}
	if _, ok := r.interest[k]; ok {
		return nil
	}
	if err := r.srv.remote.Insert(k.subject, k.queue, r); err != nil {
		return fmt.Errorf("RS+ %q: %w", subject, err)
	}
	r.interest[k] = struct{}{}
	return nil
}

func (r *route) RouteUnsub(subject, queue []byte) error {
	k := interestKey{string(subject), string(queue)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.interest[k]; !ok {
		return nil
	}
	delete(r.interest, k)
	_ = r.srv.remote.Remove(k.subject, k.queue, r)
	return nil
}

func (r *route) Ping() error {
	if r.out.enqueue(opPong) != enqClosed {
		r.out.kick()
	}
	return nil
}
func (r *route) Pong() error { r.pingsOut.Store(0); return nil }
func (r *route) Err(text []byte) error {
	return fmt.Errorf("peer sent -ERR %q", text)
}
func (r *route) OK() error { return nil }

// routeOverhead is how much larger than a client's largest message a
// route message may be: the JetStream layer wraps forwarded client
// messages and consumer deliveries (subject, reply, origin broker and a
// few length prefixes) for the owner of their topic.
const routeOverhead = 64 << 10
