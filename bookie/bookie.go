package bookie

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/stratamesh/strata/bookie/storage"
	"github.com/stratamesh/strata/internal/meta"
)

// BookieConfig configures a running bookie (StartBookie).
type BookieConfig struct {
	// ID is the bookie's stable id, as ensembles name it (required;
	// letters, digits, '.', '_', '-').
	ID string
	// DataDir is the bookie's data directory, where its cookie lives
	// (required; created if missing). It must be the directory (or on the
	// disk) that holds the storage engine's data, so that losing one loses
	// the other.
	DataDir string
	// ListenAddr is the gRPC listen address, host:port; port 0 picks a
	// free port (Addr reports it). Required.
	ListenAddr string
	// AdvertiseAddr is the address registered in etcd and reported by
	// Info. Default: the listener's address; required when ListenAddr's
	// host is unspecified (0.0.0.0, ::, empty).
	AdvertiseAddr string
	// Meta is the region's metadata store (required); the bookie does not
	// close it.
	Meta *meta.Store
	// OpenStorage opens the storage engine (required). It is called after
	// the cookie check, so that a data directory of another bookie is
	// never opened. The bookie owns what it returns and closes it in Stop.
	OpenStorage func(ctx context.Context) (storage.Storage, error)
	// HasStorageData reports whether the storage engine's directory
	// already holds data (storage.HasData). It is asked, before
	// OpenStorage, when DataDir has no cookie: data without a cookie is
	// refused (ErrCookieMismatch) instead of being given up as a new
	// instance's. nil: never (storage that keeps nothing on disk).
	HasStorageData func() (bool, error)
	// Logger; nil discards.
	Logger *slog.Logger
	// RegistrationTTL is the lease TTL of the registration in etcd.
	// Default 10 s; at least meta.MinLeaseTTL.
	RegistrationTTL time.Duration
	// RefreshInterval is how often the registration is checked for
	// changes (read-only state, free space). Default 5 s.
	RefreshInterval time.Duration
	// FreeBytesDelta: see RegistrarConfig.FreeBytesDelta.
	FreeBytesDelta int64
	// Limits bound requests and streams (see Limits).
	Limits Limits
	// TLS, when set, serves gRPC over TLS with this server config; to
	// admit only other nodes it should require and verify client
	// certificates (mutual TLS). Nil: plaintext.
	TLS *tls.Config
	// Now and NewInstance make the cookie deterministic in tests; nil:
	// time.Now and a random UUID.
	Now         func() time.Time
	NewInstance func() string
}

// Validate reports every problem with c.
func (c BookieConfig) Validate() error {
	var errs []error
	if err := ValidateID(c.ID); err != nil {
		errs = append(errs, err)
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("bookie: DataDir is required"))
	}
	if c.Meta == nil {
		errs = append(errs, errors.New("bookie: Meta is required"))
	}
	if c.OpenStorage == nil {
		errs = append(errs, errors.New("bookie: OpenStorage is required"))
	}
	if host, _, err := net.SplitHostPort(c.ListenAddr); err != nil {
		errs = append(errs, fmt.Errorf("bookie: ListenAddr %q: %w", c.ListenAddr, err))
	} else if ip := net.ParseIP(host); (host == "" || ip != nil && ip.IsUnspecified()) && c.AdvertiseAddr == "" {
		errs = append(errs, fmt.Errorf("bookie: ListenAddr %q listens on every address: AdvertiseAddr is required", c.ListenAddr))
	}
	if c.RegistrationTTL != 0 && c.RegistrationTTL < meta.MinLeaseTTL {
		errs = append(errs, fmt.Errorf("bookie: RegistrationTTL %v is below %v", c.RegistrationTTL, meta.MinLeaseTTL))
	}
	if c.RefreshInterval < 0 {
		errs = append(errs, fmt.Errorf("bookie: RefreshInterval %v is negative", c.RefreshInterval))
	}
	if c.FreeBytesDelta < 0 {
		errs = append(errs, fmt.Errorf("bookie: FreeBytesDelta %d is negative", c.FreeBytesDelta))
	}
	errs = append(errs, c.Limits.validate()...)
	return errors.Join(errs...)
}

// Bookie is a running bookie: cookie established, storage open, gRPC
// service listening, registered in etcd.
type Bookie struct {
	cfg    BookieConfig
	log    *slog.Logger
	cookie Cookie
	addr   string

	st        storage.Storage
	lis       net.Listener
	gs        *grpc.Server
	srv       *Server
	reg       *Registrar
	serveDone chan struct{}
	fatal     chan error

	stopOnce sync.Once
	stopErr  error
}

// StartBookie checks the cookie (see cookie.go), opens the storage,
// starts the gRPC service and registers the bookie. On error everything
// started is stopped again.
func StartBookie(ctx context.Context, cfg BookieConfig) (*Bookie, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewInstance == nil {
		cfg.NewInstance = uuid.NewString
	}
	b := &Bookie{cfg: cfg, log: cfg.Logger.With("bookie", cfg.ID), fatal: make(chan error, 4)}
	if err := b.start(ctx); err != nil {
		b.Stop(context.Background())
		return nil, fmt.Errorf("bookie: start %s: %w", cfg.ID, err)
	}
	b.log.Info("bookie serving", "addr", b.addr, "instance", b.cookie.Instance)
	return b, nil
}

func (b *Bookie) start(ctx context.Context) error {
	fresh := Cookie{BookieID: b.cfg.ID, Instance: b.cfg.NewInstance(), Created: b.cfg.Now().UTC()}
	cookie, cookieRev, err := establishCookie(ctx, b.cfg.Meta, b.cfg.DataDir, b.cfg.ID, b.cfg.HasStorageData, fresh, b.log)
	if err != nil {
		return err
	}
	b.cookie = cookie
	b.log = b.log.With("instance", cookie.Instance)
	st, err := b.cfg.OpenStorage(ctx)
	if err != nil {
		// st may be a typed nil (a nil *storage.Engine): never keep it.
		return fmt.Errorf("open storage: %w", err)
	}
	b.st = st
	if b.lis, err = net.Listen("tcp", b.cfg.ListenAddr); err != nil {
		return err
	}
	b.addr = b.cfg.AdvertiseAddr
	if b.addr == "" {
		b.addr = b.lis.Addr().String()
	}
	b.srv = NewServer(ServerConfig{
		Storage: b.st, BookieID: b.cfg.ID, Instance: cookie.Instance, Address: b.addr,
		Logger: b.cfg.Logger, Limits: b.cfg.Limits,
	})
	sopts := ServerOptions()
	if b.cfg.TLS != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(b.cfg.TLS)))
	}
	b.gs = grpc.NewServer(sopts...)
	b.srv.Register(b.gs)
	b.serveDone = make(chan struct{})
	go func(lis net.Listener) {
		defer close(b.serveDone)
		if err := b.gs.Serve(lis); err != nil {
			b.reportFatal(fmt.Errorf("bookie: serve %s: %w", b.addr, err))
		}
	}(b.lis)
	b.lis = nil // Serve owns it now
	b.reg, err = StartRegistrar(ctx, RegistrarConfig{
		Store: b.cfg.Meta, ID: b.cfg.ID, State: b.registration,
		TTL: b.cfg.RegistrationTTL, Interval: b.cfg.RefreshInterval, FreeBytesDelta: b.cfg.FreeBytesDelta,
		Cond:    &meta.Cond{Key: CookieKey(b.cfg.ID), ModRevision: cookieRev},
		OnFatal: b.reportFatal, Logger: b.cfg.Logger,
	})
	return err
}

func (b *Bookie) registration() Registration {
	u := b.st.Usage()
	return Registration{
		ID: b.cfg.ID, Address: b.addr, Instance: b.cookie.Instance,
		FreeBytes: u.FreeBytes, TotalBytes: u.TotalBytes, ReadOnly: u.ReadOnly,
	}
}

func (b *Bookie) reportFatal(err error) {
	select {
	case b.fatal <- err:
	default:
	}
}

// ID is the bookie id.
func (b *Bookie) ID() string { return b.cfg.ID }

// Addr is the address the bookie advertises (the listener's, unless
// AdvertiseAddr was set).
func (b *Bookie) Addr() string { return b.addr }

// Instance is the instance UUID the bookie serves as.
func (b *Bookie) Instance() string { return b.cookie.Instance }

// Cookie is the cookie the bookie runs with.
func (b *Bookie) Cookie() Cookie { return b.cookie }

// Info is what the Info RPC answers, without the ledger list.
func (b *Bookie) Info() Info { return b.srv.LocalInfo(false) }

// Registrar is the bookie's registration keeper (Refresh after a change
// of state worth publishing at once).
func (b *Bookie) Registrar() *Registrar { return b.reg }

// Fatal delivers errors after which the bookie cannot go on: its listener
// failed, or its cookie was replaced in etcd (another instance took its id
// over). The owner should Stop it. Buffered; never closed.
func (b *Bookie) Fatal() <-chan error { return b.fatal }

// Stop deregisters the bookie (revoking its lease), ends the service
// (open streams end; see Server.Shutdown), stops gRPC — gracefully until
// ctx ends, then forcibly — and closes the storage. It waits for every
// goroutine. Idempotent: later calls return the first call's result.
func (b *Bookie) Stop(ctx context.Context) error {
	b.stopOnce.Do(func() {
		var errs []error
		if b.reg != nil {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			errs = append(errs, b.reg.Stop(rctx))
			cancel()
		}
		if b.srv != nil {
			b.srv.Shutdown()
		}
		if b.gs != nil {
			stopped := make(chan struct{})
			go func() {
				b.gs.GracefulStop()
				close(stopped)
			}()
			select {
			case <-stopped:
			case <-ctx.Done():
				b.gs.Stop()
				<-stopped
			}
			<-b.serveDone
		}
		if b.lis != nil {
			b.lis.Close()
		}
		if b.srv != nil {
			b.srv.Close()
		}
		if b.st != nil {
			errs = append(errs, b.st.Close())
		}
		b.stopErr = errors.Join(errs...)
	})
	return b.stopErr
}
