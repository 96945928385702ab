package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// NATSVersion is the NATS server version brokers advertise in INFO. Clients
// switch features on by it (nats.go uses the newer consumer-create API and
// the pinned-client priority policy only from 2.9/2.11 on), so it names the
// NATS behaviour Strata speaks, not Strata's own release (which INFO carries
// as "strata_version").
const NATSVersion = "2.11.0"

// Defaults of Config.
const (
	DefaultMaxPayload     = 1 << 20 // bytes; nats-server's default
	DefaultMaxControlLine = 4096    // bytes; NATS protocol §1.1
	DefaultPingInterval   = 2 * time.Minute
	DefaultFirstPing      = 2 * time.Second
	DefaultMaxPingsOut    = 2
	DefaultMaxPending     = 64 << 20 // bytes per connection; nats-server's max_pending
	DefaultMaxSubs        = 1 << 16
	// DefaultMaxOutboundTotal is Config.MaxOutboundTotal's default, in
	// bytes, when MaxPending is at most half of it (else 2×MaxPending).
	DefaultMaxOutboundTotal = 128 << 20
	DefaultWriteDeadline    = 10 * time.Second
	DefaultAuthTimeout      = 2 * time.Second
	DefaultRoutePing        = 5 * time.Second
)

// Config configures a Server. Zero fields take the defaults above;
// DefaultConfig returns them filled in.
type Config struct {
	// ServerName names this broker in INFO ("server_name") and on the
	// region's internal link; brokers of one region need distinct names
	// (region wiring uses the Serf name "<region>.<id>"). Required.
	ServerName string
	// Region and Mesh are the broker's region and mesh. Routes are only
	// accepted from brokers of the same mesh and region: core traffic
	// never crosses regions.
	Region, Mesh string
	// ListenAddr is the host:port NATS clients connect to ("127.0.0.1:0"
	// binds a free port; Addr reports it). Required.
	ListenAddr string
	// RouteAddr is the host:port of the internal link other brokers of
	// the region dial; empty runs without one (a single-broker region or a
	// test). RouteAddr reports the bound address.
	RouteAddr string
	// Peers, when set, tells the broker which other brokers of the region
	// exist and where their internal link listens; the broker keeps a
	// route to each (region wiring backs it with the Serf LAN pool).
	Peers PeerSource
	// MaxPayload is the largest header+payload a client may publish, in
	// bytes (INFO max_payload). Larger declared sizes get
	// -ERR 'Maximum Payload Violation' and a close. Default 1 MiB.
	MaxPayload int
	// MaxControlLine is the longest control line, in bytes. Default 4096.
	MaxControlLine int
	// PingInterval is how often the broker pings an idle client; after
	// MaxPingsOut unanswered pings it sends -ERR 'Stale Connection' and
	// closes. Default 2 min and 2 (nats-server's defaults).
	PingInterval time.Duration
	// FirstPing is the delay before the first server PING (at most
	// PingInterval). Default 2 s, like the reference.
	FirstPing   time.Duration
	MaxPingsOut int
	// MaxPending bounds the bytes queued for one connection and not yet
	// written to its socket. A client that falls further behind is a slow
	// consumer: it gets -ERR 'Slow Consumer' and is closed, so one slow
	// reader never grows the broker's memory without bound. Publishers
	// feeding a connection that is more than half full are held back
	// briefly first. Default 64 MiB.
	MaxPending int
	// MaxSubscriptions bounds the subscriptions of one connection (a user
	// JWT's limit may lower it); one more gets -ERR 'Maximum Subscriptions
	// Exceeded' and is not made. Default 65536; -1: no limit.
	MaxSubscriptions int
	// MaxOutboundTotal bounds the memory, in bytes, the broker holds for
	// bytes queued to all its connections (clients and routes) together:
	// queued data, writes in progress, and blocks kept idle for reuse
	// (idle ones above a sixteenth of it, at most 8 MiB, are released
	// within seconds). When more than half is in use, client publishers
	// that queue to any connection are held back up to 20 ms per read; when
	// that has lasted 100 ms, or a delivery finds the budget spent, the
	// client connection with the largest backlog is closed with -ERR 'Slow
	// Consumer' (counted in Stats().SlowConsumers). Routes count but are
	// never closed for it (they are bounded by 4×MaxPending each). A
	// delivery goes past the bound only when no client connection is left
	// to close. Trade-off: a larger budget lets more readers fall further
	// behind before anyone is cut; the broker's heap may grow by about this
	// much under slow consumers. Default 128 MiB, or 2×MaxPending if that
	// is larger; it must be at least MaxPending.
	MaxOutboundTotal int
	// WriteDeadline bounds one socket write; a client that does not read
	// for this long is closed. Default 10 s.
	WriteDeadline time.Duration
	// Auth, when set, requires every client to authenticate in CONNECT
	// (INFO auth_required). Nil accepts every client.
	Auth Authenticator
	// AuthTimeout is how long a client may take to send CONNECT when Auth
	// is set (then -ERR 'Authentication Timeout'). Default 2 s.
	AuthTimeout time.Duration
	// RoutePing is the ping interval on the internal link; a route that
	// misses 3 pings is closed and redialled. Default 5 s.
	RoutePing time.Duration
	// Hook, when set, sees every client publish before it is routed (the
	// JetStream layer). Nil routes everything as core NATS.
	Hook PublishHook
	// Quotas, when set, is the tenant quota gate (ARCHITECTURE §5): core
	// publishes are charged to their tenant and refused over quota
	// (-ERR 'Permissions Violation for Publish to "<subject>": <refusal>',
	// the connection stays open), and with Auth a tenant's connections are
	// counted and refused over quota at CONNECT (-ERR 'maximum
	// connections exceeded: <refusal>', then closed). See quota_gate.go.
	// JetStream publishes are the Hook's to charge. Nil: no quotas.
	Quotas Quotas
	// OnDrain, when set, is called once by Close after the broker stopped
	// accepting connections and gave back every connection's quota
	// (Quotas.Disconnect), before it closes any client connection, with
	// Close's ctx; Close waits for it. Region wiring hands the tenants'
	// connection counts over there (quota.Broker.HandOver) so that the
	// clients reconnecting to other brokers are not counted twice. Nil:
	// nothing.
	OnDrain func(ctx context.Context)
	// TLS, when set, serves NATS clients over TLS (INFO tls_required; a
	// plaintext client is refused) and secures the internal link (see
	// TLSConfig in tls.go). Nil: both plaintext.
	TLS *TLSConfig
	// Guests are the broker's failover listeners (guests.go): one per
	// other region, where that region's clients connect when they lost
	// their own. Empty: none.
	Guests []GuestListener
	// AdmitGuest, when set, decides whether a connection to the failover
	// listener of home may stay (false: it is closed before INFO, so the
	// client tries the next URL of its list). Nil admits every guest.
	AdmitGuest func(home string) bool
	// StrataVersion is reported in INFO as "strata_version".
	StrataVersion string
	// Logger receives the broker's logs; nil discards them.
	Logger *slog.Logger
}

// DefaultConfig returns a Config with every default filled in; callers set
// ServerName and ListenAddr.
func DefaultConfig() Config {
	return Config{}.withDefaults()
}

func (c Config) withDefaults() Config {
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	set(&c.MaxPayload, DefaultMaxPayload)
	set(&c.MaxControlLine, DefaultMaxControlLine)
	set(&c.MaxPingsOut, DefaultMaxPingsOut)
	set(&c.MaxPending, DefaultMaxPending)
	set(&c.MaxSubscriptions, DefaultMaxSubs)
	set(&c.MaxOutboundTotal, max(DefaultMaxOutboundTotal, 2*c.MaxPending))
	setD(&c.PingInterval, DefaultPingInterval)
	setD(&c.FirstPing, DefaultFirstPing)
	setD(&c.WriteDeadline, DefaultWriteDeadline)
	setD(&c.AuthTimeout, DefaultAuthTimeout)
	setD(&c.RoutePing, DefaultRoutePing)
	if c.FirstPing > c.PingInterval {
		c.FirstPing = c.PingInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate returns every problem with c (after defaults).
func (c Config) Validate() error {
	var errs []error
	if c.ServerName == "" {
		errs = append(errs, errors.New("broker: Config.ServerName is required"))
	}
	if c.ListenAddr == "" {
		errs = append(errs, errors.New("broker: Config.ListenAddr is required"))
	}
	if c.MaxPayload < 0 || c.MaxPayload > 64<<20 {
		errs = append(errs, fmt.Errorf("broker: MaxPayload %d is outside 1..64 MiB", c.MaxPayload))
	}
	if c.MaxControlLine < 0 || (c.MaxControlLine > 0 && c.MaxControlLine < 256) {
		errs = append(errs, fmt.Errorf("broker: MaxControlLine %d is below 256 bytes", c.MaxControlLine))
	}
	if c.MaxPending < 0 || (c.MaxPending > 0 && c.MaxPending < c.MaxPayload) {
		errs = append(errs, fmt.Errorf("broker: MaxPending %d is below MaxPayload %d", c.MaxPending, c.MaxPayload))
	}
	if c.MaxOutboundTotal < 0 || (c.MaxOutboundTotal > 0 && c.MaxOutboundTotal < c.MaxPending) {
		errs = append(errs, fmt.Errorf("broker: MaxOutboundTotal %d is below MaxPending %d", c.MaxOutboundTotal, c.MaxPending))
	}
	for name, d := range map[string]time.Duration{"PingInterval": c.PingInterval, "FirstPing": c.FirstPing,
		"WriteDeadline": c.WriteDeadline, "AuthTimeout": c.AuthTimeout, "RoutePing": c.RoutePing} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("broker: %s %v is negative", name, d))
		}
	}
	if c.MaxPingsOut < 0 {
		errs = append(errs, fmt.Errorf("broker: MaxPingsOut %d is negative", c.MaxPingsOut))
	}
	if err := c.TLS.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Peers != nil && c.RouteAddr == "" {
		errs = append(errs, errors.New("broker: Peers needs a RouteAddr"))
	}
	return errors.Join(errs...)
}

// Peer is another broker of the region, as a PeerSource reports it.
type Peer struct {
	// Name is the peer's Config.ServerName.
	Name string
	// RouteAddr is the host:port of its internal link.
	RouteAddr string
}

// PeerSource reports the region's other live brokers. Region wiring backs
// it with the Serf LAN pool (members with role=broker and a "route" tag).
type PeerSource interface {
	// Peers returns the live brokers of the region; it may include this
	// broker itself (it is skipped by name).
	Peers() []Peer
	// Changed receives a value after the set may have changed (coalesced;
	// the broker also re-reads Peers every few seconds).
	Changed() <-chan struct{}
}
