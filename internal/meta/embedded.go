package meta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// ErrEmbeddedStopped is sent on Embedded.Err when the etcd server stops by
// itself (not through Close), for example after a fatal storage error or
// being removed from its cluster.
var ErrEmbeddedStopped = errors.New("meta: embedded etcd stopped unexpectedly")

// EmbeddedConfig configures a single-node etcd run inside this process.
type EmbeddedConfig struct {
	// Name is the etcd member name, e.g. "us-east-meta". Default
	// "strata-meta". It is recorded in the data directory: restart with the
	// same name.
	Name string
	// Dir is the data directory (WAL and bbolt database), e.g.
	// <data-dir>/<region>/meta. Required; created (0700) if missing.
	Dir string
	// Host is the listen host for client and peer URLs. Default "127.0.0.1".
	Host string
	// ClientPort is the client (gRPC) port; 0 picks a free port, read back
	// through ClientURL.
	ClientPort int
	// PeerPort is the raft peer port; 0 picks a free port.
	PeerPort int
	// Fast selects loopback tuning: heartbeat 10 ms and election timeout
	// 100 ms (etcd defaults: 100 ms / 1000 ms). It makes start-up ~10x
	// faster and lowers etcd's minimum lease TTL from 2 s to 1 s, at the
	// cost of spurious elections on a loaded machine with a multi-node
	// cluster (irrelevant for one node). Use it for tests and single-box runs.
	Fast bool
	// UnsafeNoFsync skips fsync of etcd's WAL and database. For tests only:
	// a machine crash loses acknowledged writes. A clean Close still
	// leaves the data readable by a restart on the same machine.
	UnsafeNoFsync bool
	// StartTimeout bounds StartEmbedded in addition to its context.
	// Default 30 s.
	StartTimeout time.Duration
	// CompactionRetention is how much MVCC history etcd keeps (periodic
	// auto-compaction). Watches resuming from a revision older than this
	// get EventCompacted. Default 1 h; a negative value disables
	// compaction (history then grows until etcd's 2 GiB quota raises a
	// NOSPACE alarm and etcd refuses writes).
	CompactionRetention time.Duration
	// TLS, when set, serves clients and peers over TLS with client
	// certificates required (see EmbeddedTLS). Nil: plaintext.
	TLS *EmbeddedTLS
	// RootPassword, when set, turns etcd authentication on at the first
	// start: the user root (role root) is created with this password, and
	// from then on every client must log in. A later start with auth
	// already on changes nothing (the password stays what it was). Empty:
	// anonymous clients are served.
	RootPassword string
	// Logger receives etcd's warnings and errors; nil discards them.
	Logger *slog.Logger
}

// EmbeddedTLS names the PEM files of an embedded etcd's TLS.
type EmbeddedTLS struct {
	// CAFile verifies client (and peer) certificates.
	CAFile string
	// CertFile and KeyFile are the server's certificate and key, also
	// used as its peer client certificate.
	CertFile, KeyFile string
}

// RootUser is the etcd user Strata's clients log in as when
// EmbeddedConfig.RootPassword turned authentication on.
const RootUser = "root"

// DefaultEmbeddedConfig returns the defaults; Dir must still be set.
func DefaultEmbeddedConfig() EmbeddedConfig {
	return EmbeddedConfig{
		Name:                "strata-meta",
		Host:                "127.0.0.1",
		StartTimeout:        30 * time.Second,
		CompactionRetention: time.Hour,
	}
}

func (c EmbeddedConfig) withDefaults() EmbeddedConfig {
	d := DefaultEmbeddedConfig()
	if c.Name == "" {
		c.Name = d.Name
	}
	if c.Host == "" {
		c.Host = d.Host
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = d.StartTimeout
	}
	if c.CompactionRetention == 0 {
		c.CompactionRetention = d.CompactionRetention
	}
	return c
}

// Validate reports every problem with c (after defaults are applied).
func (c EmbeddedConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("meta: embedded: Dir is required"))
	}
	if c.ClientPort < 0 || c.ClientPort > 65535 {
		errs = append(errs, fmt.Errorf("meta: embedded: ClientPort %d out of range 0-65535", c.ClientPort))
	}
	if c.PeerPort < 0 || c.PeerPort > 65535 {
		errs = append(errs, fmt.Errorf("meta: embedded: PeerPort %d out of range 0-65535", c.PeerPort))
	}
	if c.ClientPort != 0 && c.ClientPort == c.PeerPort {
		errs = append(errs, fmt.Errorf("meta: embedded: ClientPort and PeerPort are both %d", c.ClientPort))
	}
	if c.StartTimeout < 0 {
		errs = append(errs, fmt.Errorf("meta: embedded: StartTimeout %v is negative", c.StartTimeout))
	}
	if t := c.TLS; t != nil && (t.CAFile == "" || t.CertFile == "" || t.KeyFile == "") {
		errs = append(errs, errors.New("meta: embedded: TLS needs CAFile, CertFile and KeyFile"))
	}
	return errors.Join(errs...)
}

// Embedded is a running single-node etcd.
type Embedded struct {
	etcd      *embed.Etcd
	clientURL string
	peerURL   string

	errc    chan error
	closing chan struct{}
	quiet   *atomic.Bool // set by Close: etcd's shutdown errors are expected
	once    sync.Once
	wg      sync.WaitGroup
}

// StartEmbedded starts etcd and returns once it is ready to serve clients,
// or fails when ctx ends or StartTimeout passes (etcd is then shut down).
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("meta: embedded: %w", err)
	}
	quiet := new(atomic.Bool)
	ec := etcdConfig(cfg, quiet)
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()

	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("meta: embedded: %w", err)
	}
	etcd, err := embed.StartEtcd(ec) // not cancelable: opens the WAL and database
	if err != nil {
		return nil, fmt.Errorf("meta: embedded: start etcd in %s: %w", cfg.Dir, err)
	}
	e := &Embedded{
		etcd: etcd,
		// The advertised URLs say port 0 when a port was left to the
		// kernel; the listeners know the real one.
		clientURL: scheme(cfg) + "://" + etcd.Clients[0].Addr().String(),
		peerURL:   scheme(cfg) + "://" + etcd.Peers[0].Addr().String(),
		errc:      make(chan error, 4),
		closing:   make(chan struct{}),
		quiet:     quiet,
	}
	// ctx first: a select among ready cases picks at random.
	if err := ctx.Err(); err != nil {
		e.Close()
		return nil, fmt.Errorf("meta: embedded: starting etcd: %w", err)
	}
	select {
	case <-etcd.Server.ReadyNotify():
	case err := <-etcd.Err():
		e.Close()
		return nil, fmt.Errorf("meta: embedded: etcd failed while starting: %w", err)
	case <-etcd.Server.StopNotify():
		e.Close()
		return nil, fmt.Errorf("meta: embedded: etcd stopped while starting")
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("meta: embedded: waiting for etcd to be ready: %w", ctx.Err())
	}
	if cfg.RootPassword != "" {
		if err := enableAuth(ctx, etcd, cfg.RootPassword); err != nil {
			e.Close()
			return nil, fmt.Errorf("meta: embedded: turning etcd authentication on: %w", err)
		}
	}
	e.wg.Add(1)
	go e.forwardErrors()
	return e, nil
}

// scheme is the URL scheme of cfg's listeners.
func scheme(cfg EmbeddedConfig) string {
	if cfg.TLS != nil {
		return "https"
	}
	return "http"
}

// etcdConfig translates cfg into etcd's configuration.
func etcdConfig(cfg EmbeddedConfig, quiet *atomic.Bool) *embed.Config {
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.Dir
	cu := url.URL{Scheme: scheme(cfg), Host: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.ClientPort))}
	pu := url.URL{Scheme: scheme(cfg), Host: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.PeerPort))}
	if t := cfg.TLS; t != nil {
		info := transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.CAFile, ClientCertAuth: true}
		ec.ClientTLSInfo, ec.PeerTLSInfo = info, info
	}
	// Listen and advertise the same URLs, port 0 included: etcd checks that
	// this member's advertised peer URLs match its entry in the initial
	// cluster, so the initial cluster is rebuilt from the name afterwards.
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	// The gateway would dial the listen address, port 0 included; we only
	// speak gRPC anyway.
	ec.EnableGRPCGateway = false
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newQuietableZapLogger(cfg.Logger, "etcd", quiet))
	if cfg.Fast {
		ec.TickMs = 10
		ec.ElectionMs = 100
	}
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	if cfg.CompactionRetention > 0 {
		ec.AutoCompactionMode = embed.CompactorModePeriodic
		ec.AutoCompactionRetention = cfg.CompactionRetention.String()
	}
	return ec
}

// forwardErrors relays etcd's serving errors, and an unexpected stop of the
// server, to e.errc until Close.
func (e *Embedded) forwardErrors() {
	defer e.wg.Done()
	defer close(e.errc)
	src := e.etcd.Err()
	stopped := e.etcd.Server.StopNotify()
	for {
		select {
		case err, ok := <-src:
			if !ok {
				return // etcd closes it at the end of Close
			}
			if err != nil {
				e.report(err)
			}
		case <-stopped:
			stopped = nil
			select {
			case <-e.closing:
			default:
				e.report(ErrEmbeddedStopped)
			}
		}
	}
}

// report delivers err if there is room; the first errors are the telling ones.
func (e *Embedded) report(err error) {
	select {
	case e.errc <- err:
	default:
	}
}

// ClientURL is the URL clients dial, with the real port, e.g.
// http://127.0.0.1:41234.
func (e *Embedded) ClientURL() string { return e.clientURL }

// PeerURL is the raft peer URL with the real port.
func (e *Embedded) PeerURL() string { return e.peerURL }

// Err carries etcd's fatal errors (serving failures, ErrEmbeddedStopped). It
// is buffered (4); errors beyond that while nobody reads are dropped. It is
// closed by Close.
func (e *Embedded) Err() <-chan error { return e.errc }

// Close stops etcd and waits for it. It is idempotent and safe to call
// concurrently (etcd's own Close panics when called twice); every caller
// returns once etcd is down.
func (e *Embedded) Close() error {
	e.once.Do(func() {
		close(e.closing)
		e.quiet.Store(true)
		e.etcd.Close()
		e.wg.Wait()
	})
	return nil
}
