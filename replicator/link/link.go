package link

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// ErrNotConnected: the link has no connection to the remote region now.
var ErrNotConnected = errors.New("link: not connected to the remote region")

// Defaults of Config.
const (
	DefaultRedial     = 3 * time.Second
	DefaultCheck      = 250 * time.Millisecond
	DefaultAnswerBuf  = 4096
	inboxPrefix       = "_STRATA_REPL."
	connectTimeout    = 2 * time.Second
	reconnectWait     = 250 * time.Millisecond
	reconnectBufBytes = -1 // publishes fail while reconnecting: the sender backs off
	// A link whose packets go nowhere (a cut between two regions) must
	// fail fast rather than block a sender in a write: a write blocked
	// for flushTimeout drops the connection, and pings every
	// pingInterval (two unanswered) find a silent one. Then publishes
	// fail at once (ErrNotConnected) and the sender backs off.
	flushTimeout = 5 * time.Second
	pingInterval = 2 * time.Second
)

// Config configures a Link.
type Config struct {
	// Remote is the region the link reaches. Required.
	Remote string
	// Name is the connection's name as the remote sees it (e.g.
	// "strata-replicator us-east/b1").
	Name string
	// Brokers returns the NATS URLs of the remote region's live brokers
	// (the Serf WAN pool's members tagged region=Remote, alive). Required.
	Brokers func() []string
	// Redial is how long the link may stay disconnected before it is
	// dropped and made again from a fresh Brokers list. Default 3 s.
	Redial time.Duration
	// Check is how often the link's state is reviewed. Default 250 ms.
	Check time.Duration
	// Options are added to the connection's (after the link's own): how
	// it logs in to the remote region (with NATS accounts on, a user of
	// the mesh's system account: nats.UserJWT).
	Options []nats.Option
	// TLS, when set, is the client config the link dials with: the CA the
	// remote brokers' certificates are checked against, and this node's
	// certificate for brokers that require one. Nil: what the remote's
	// INFO asks for, with the system's roots.
	TLS    *tls.Config
	Logger *slog.Logger
}

// Link is one broker's connection to one remote region.
type Link struct {
	cfg   Config
	inbox string // "_STRATA_REPL.<nuid>."

	mu       sync.Mutex
	nc       *nats.Conn
	down     time.Time // when the link was last seen disconnected (zero: up)
	senders  map[uint64]chan []byte
	nextID   uint64
	closed   bool
	stop     chan struct{}
	done     chan struct{}
	dials    atomic.Uint64
	dropped  atomic.Uint64
	lastDial atomic.Value // string: the error of the last failed dial
}

// New starts a link to cfg.Remote; it connects in the background.
// Errors: a missing Remote or Brokers.
func New(cfg Config) (*Link, error) {
	if cfg.Remote == "" || cfg.Brokers == nil {
		return nil, errors.New("link: Config.Remote and Config.Brokers are required")
	}
	if cfg.Redial <= 0 {
		cfg.Redial = DefaultRedial
	}
	if cfg.Check <= 0 {
		cfg.Check = DefaultCheck
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Link{cfg: cfg, inbox: inboxPrefix + strings.TrimPrefix(nats.NewInbox(), "_INBOX.") + ".", senders: map[uint64]chan []byte{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.keep()
	return l, nil
}

// Register gives a sender life its reply prefix and the channel its
// answers (reply payloads) arrive on; a batch's reply subject is
// prefix + its ID. unregister drops the channel.
func (l *Link) Register() (prefix string, answers <-chan []byte, unregister func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nextID++
	id := l.nextID
	ch := make(chan []byte, DefaultAnswerBuf)
	l.senders[id] = ch
	return l.inbox + strconv.FormatUint(id, 10) + ".", ch, func() {
		l.mu.Lock()
		delete(l.senders, id)
		l.mu.Unlock()
	}
}

// Publish sends data on subject with reply subject reply (a request
// whose answer comes back through Register's channel). It does not wait
// for the network. Errors: ErrNotConnected while the link is down,
// nats.go's errors otherwise.
func (l *Link) Publish(subject, reply string, data []byte) error {
	l.mu.Lock()
	nc := l.nc
	l.mu.Unlock()
	if nc == nil || !nc.IsConnected() {
		return ErrNotConnected
	}
	return nc.PublishMsg(&nats.Msg{Subject: subject, Reply: reply, Data: data})
}

// Status is what the link reports for status pages.
type Status struct {
	Remote    string `json:"remote"`
	Connected bool   `json:"connected"`
	// URL is the remote broker connected to ("" while down).
	URL string `json:"url,omitempty"`
	// Dials counts connections made; Dropped counts answers dropped
	// because a sender did not keep up.
	Dials   uint64 `json:"dials"`
	Dropped uint64 `json:"dropped_answers,omitempty"`
	// LastError is the last failed dial's error, while down.
	LastError string `json:"last_error,omitempty"`
}

// Status reports the link's state.
func (l *Link) Status() Status {
	l.mu.Lock()
	nc := l.nc
	l.mu.Unlock()
	st := Status{Remote: l.cfg.Remote, Dials: l.dials.Load(), Dropped: l.dropped.Load()}
	if nc != nil && nc.IsConnected() {
		st.Connected, st.URL = true, nc.ConnectedUrlRedacted()
	} else if e, ok := l.lastDial.Load().(string); ok {
		st.LastError = e
	}
	return st
}

// Close closes the connection and stops the link.
func (l *Link) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.done
		return
	}
	l.closed = true
	close(l.stop)
	l.mu.Unlock()
	<-l.done
}

// keep makes the connection and makes it again when it stays down.
func (l *Link) keep() {
	defer close(l.done)
	t := time.NewTicker(l.cfg.Check)
	defer t.Stop()
	for {
		l.review()
		select {
		case <-l.stop:
			l.mu.Lock()
			nc := l.nc
			l.nc = nil
			l.mu.Unlock()
			if nc != nil {
				nc.Close()
			}
			return
		case <-t.C:
		}
	}
}

// review dials when there is no connection, and drops one that has been
// down for Redial.
func (l *Link) review() {
	l.mu.Lock()
	nc := l.nc
	if nc != nil && !nc.IsConnected() {
		if l.down.IsZero() {
			l.down = time.Now()
		}
		if time.Since(l.down) >= l.cfg.Redial || nc.IsClosed() {
			l.nc = nil
			l.mu.Unlock()
			l.cfg.Logger.Info("replication link down: dialing again", "remote", l.cfg.Remote)
			nc.Close()
			return
		}
		l.mu.Unlock()
		return
	}
	if nc != nil {
		l.down = time.Time{}
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	nc, err := l.dial()
	if err != nil {
		l.lastDial.Store(err.Error())
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		nc.Close()
		return
	}
	l.nc, l.down = nc, time.Time{}
	l.mu.Unlock()
}

// dial connects to the remote region's live brokers and subscribes the
// inbox.
func (l *Link) dial() (*nats.Conn, error) {
	urls := l.cfg.Brokers()
	if len(urls) == 0 {
		return nil, fmt.Errorf("link: no live broker of region %s in the WAN pool", l.cfg.Remote)
	}
	opts := []nats.Option{
		nats.Name(l.cfg.Name),
		nats.Timeout(connectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.ReconnectBufSize(reconnectBufBytes),
		nats.NoEcho(),
		nats.FlusherTimeout(flushTimeout),
		nats.PingInterval(pingInterval),
		nats.MaxPingsOutstanding(2),
	}
	if l.cfg.TLS != nil {
		opts = append(opts, nats.Secure(l.cfg.TLS))
	}
	opts = append(opts, l.cfg.Options...)
	nc, err := nats.Connect(strings.Join(urls, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("link: connect to region %s (%s): %w", l.cfg.Remote, strings.Join(urls, ","), err)
	}
	if _, err := nc.Subscribe(l.inbox+">", l.onAnswer); err != nil {
		nc.Close()
		return nil, fmt.Errorf("link: subscribe %s>: %w", l.inbox, err)
	}
	if err := nc.Flush(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("link: flush to region %s: %w", l.cfg.Remote, err)
	}
	l.dials.Add(1)
	l.cfg.Logger.Info("replication link up", "remote", l.cfg.Remote, "url", nc.ConnectedUrlRedacted())
	return nc, nil
}

// onAnswer hands a reply to the sender whose prefix it carries.
func (l *Link) onAnswer(m *nats.Msg) {
	rest := strings.TrimPrefix(m.Subject, l.inbox)
	idTok, _, _ := strings.Cut(rest, ".")
	id, err := strconv.ParseUint(idTok, 10, 64)
	if err != nil {
		return
	}
	l.mu.Lock()
	ch := l.senders[id]
	l.mu.Unlock()
	if ch == nil {
		return // a sender that has gone: its successor resends
	}
	select {
	case ch <- m.Data:
	default:
		l.dropped.Add(1)
	}
}
