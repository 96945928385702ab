package broker

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// TLS on the broker's two listeners.
//
// NATS clients: the NATS protocol sends INFO in plaintext, and a client
// that reads tls_required in it starts the TLS handshake right after (NATS
// protocol §1.2). startClient wraps the accepted connection in a
// tlsAfterInfo: its first Write (the INFO line, from the client's writer
// goroutine) goes out in plaintext, then the same Write runs the server
// handshake, and every byte after that goes through TLS. Reads wait for
// the handshake. A client that answers INFO with anything but a TLS
// ClientHello (a plaintext CONNECT) gets -ERR 'Secure Connection - TLS
// Required' in plaintext and is closed, so the rest of the broker only
// ever sees TLS connections.
//
// The internal link between a region's brokers is TLS from its first byte,
// with certificates both ways (mutual TLS): the route listener is a
// tls.Listener and dialRoute wraps its connection with tls.Client.

// TLSConfig turns TLS on for a broker (Config.TLS).
type TLSConfig struct {
	// Clients is the NATS listener's server config (required when TLS is
	// set). Its ClientAuth decides whether NATS clients present
	// certificates; INFO says tls_verify when they must.
	Clients *tls.Config
	// RouteServer and RouteClient secure the internal link: the route
	// listener's server config (it should require and verify client
	// certificates) and the config dialRoute uses (the CA and this
	// broker's certificate). Both or neither; neither leaves the internal
	// link plaintext.
	RouteServer, RouteClient *tls.Config
	// HandshakeTimeout bounds a NATS client's TLS handshake after INFO.
	// Default 2 s.
	HandshakeTimeout time.Duration
}

// errTextTLSRequired is what a plaintext client to a TLS listener gets.
const errTextTLSRequired = "Secure Connection - TLS Required"

// errPlaintext is the handshake error of a client that did not start TLS.
var errPlaintext = errors.New("broker: client did not start TLS after INFO (plaintext client on a TLS listener)")

const defaultTLSHandshakeTimeout = 2 * time.Second

// plaintextDrain is how long a refused plaintext client's input is read
// after the -ERR, so that the close does not reset the connection.
const plaintextDrain = 500 * time.Millisecond

func (t *TLSConfig) validate() error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.Clients == nil {
		errs = append(errs, errors.New("broker: Config.TLS.Clients is required"))
	}
	if (t.RouteServer == nil) != (t.RouteClient == nil) {
		errs = append(errs, errors.New("broker: Config.TLS.RouteServer and RouteClient go together"))
	}
	if t.HandshakeTimeout < 0 {
		errs = append(errs, fmt.Errorf("broker: Config.TLS.HandshakeTimeout %v is negative", t.HandshakeTimeout))
	}
	return errors.Join(errs...)
}

// tlsInfo is what INFO says of TLS: tls_required, and tls_verify when
// clients must present a certificate.
func (s *Server) tlsInfo() (required, verify bool) {
	t := s.cfg.TLS
	if t == nil {
		return false, false
	}
	return true, t.Clients.ClientAuth == tls.RequireAndVerifyClientCert || t.Clients.ClientAuth == tls.RequireAnyClientCert
}

// wrapClientConn is the connection startClient serves: conn itself
// without TLS, else a tlsAfterInfo around it.
func (s *Server) wrapClientConn(conn net.Conn) net.Conn {
	t := s.cfg.TLS
	if t == nil {
		return conn
	}
	timeout := t.HandshakeTimeout
	if timeout == 0 {
		timeout = defaultTLSHandshakeTimeout
	}
	return &tlsAfterInfo{Conn: conn, cfg: t.Clients, timeout: timeout, ready: make(chan struct{}), srv: s}
}

// wrapRouteListener makes the route listener a TLS one when the internal
// link is secured.
func (s *Server) wrapRouteListener(ln net.Listener) net.Listener {
	if t := s.cfg.TLS; t != nil && t.RouteServer != nil {
		return tls.NewListener(ln, t.RouteServer)
	}
	return ln
}

// wrapRouteDial wraps a dialled route connection in TLS (the handshake
// runs on the first write, under dialRoute's deadline).
func (s *Server) wrapRouteDial(conn net.Conn, addr string) net.Conn {
	t := s.cfg.TLS
	if t == nil || t.RouteClient == nil {
		return conn
	}
	c := t.RouteClient.Clone()
	if c.ServerName == "" {
		c.ServerName, _, _ = net.SplitHostPort(addr)
	}
	return tls.Client(conn, c)
}

// tlsAfterInfo is a client connection whose first line out is plaintext
// (INFO) and everything after it TLS. See the comment at the top.
type tlsAfterInfo struct {
	net.Conn // the TCP connection
	cfg      *tls.Config
	timeout  time.Duration
	srv      *Server

	once  sync.Once
	ready chan struct{} // closed when the handshake ended (tc or err set)
	tc    *tls.Conn     // set before ready is closed
	err   error         // set before ready is closed
}

// Write sends p. The first call writes p up to its first CRLF (the INFO
// line) in plaintext and then runs the handshake; the rest of p, and every
// later write, goes through TLS. Only the client's writer goroutine writes.
func (c *tlsAfterInfo) Write(p []byte) (int, error) {
	written := 0
	c.once.Do(func() {
		cut := len(p) // not a line: cannot happen, INFO comes first
		if end := bytes.Index(p, []byte("\r\n")); end >= 0 {
			cut = end + 2
		}
		n, err := c.Conn.Write(p[:cut])
		written = n
		if err == nil {
			err = c.handshake()
		}
		c.finish(err)
	})
	if c.err != nil {
		return written, c.err
	}
	if written == len(p) {
		return written, nil
	}
	n, err := c.tc.Write(p[written:])
	return written + n, err
}

// handshake refuses a plaintext client, else runs the server handshake.
func (c *tlsAfterInfo) handshake() error {
	_ = c.Conn.SetDeadline(time.Now().Add(c.timeout))
	first := make([]byte, 1)
	if _, err := c.Conn.Read(first); err != nil {
		return fmt.Errorf("broker: TLS handshake: %w", err)
	}
	if first[0] != 0x16 { // a TLS record of type handshake starts every ClientHello
		_, _ = c.Conn.Write([]byte("-ERR '" + errTextTLSRequired + "'\r\n"))
		// Closing with the client's CONNECT unread would reset the
		// connection and could lose the -ERR: end our side, then read
		// what the client sent (briefly) before the close.
		if tcp, ok := c.Conn.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
		_ = c.Conn.SetReadDeadline(time.Now().Add(plaintextDrain))
		_, _ = io.Copy(io.Discard, io.LimitReader(c.Conn, 64<<10))
		return errPlaintext
	}
	tc := tls.Server(&replayConn{Conn: c.Conn, first: first}, c.cfg)
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("broker: TLS handshake: %w", err)
	}
	_ = c.Conn.SetDeadline(time.Time{})
	c.tc = tc
	return nil
}

func (c *tlsAfterInfo) finish(err error) {
	if err != nil {
		c.err = err
		if errors.Is(err, net.ErrClosed) {
			close(c.ready)
			return
		}
		c.srv.logger.Info("NATS client refused: TLS handshake failed", "remote", c.Conn.RemoteAddr().String(), "err", err)
		c.Conn.Close()
	}
	close(c.ready)
}

// Read waits for the handshake, then reads through TLS.
func (c *tlsAfterInfo) Read(p []byte) (int, error) {
	<-c.ready
	if c.err != nil {
		return 0, c.err
	}
	return c.tc.Read(p)
}

// Close closes the TCP connection, which also ends a handshake in
// progress. It sends no TLS close_notify: that write could wait on a
// client that stopped reading (a slow consumer), and NATS does not need
// it.
func (c *tlsAfterInfo) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.finish(net.ErrClosed) }) // before any write: Read must not wait
	return err
}

// replayConn gives back the byte read to tell TLS from plaintext.
type replayConn struct {
	net.Conn
	first []byte
}

func (r *replayConn) Read(p []byte) (int, error) {
	if len(r.first) > 0 && len(p) > 0 {
		n := copy(p, r.first)
		r.first = r.first[n:]
		return n, nil
	}
	return r.Conn.Read(p)
}
