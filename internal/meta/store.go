package meta

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Config configures a Store.
type Config struct {
	// Endpoints are etcd client URLs, e.g. Embedded.ClientURL(). Required.
	Endpoints []string
	// Prefix is prepended, with a "/", to every key given to the Store, so
	// that Stores with different prefixes never see each other's keys.
	// Default "/strata"; a trailing "/" is ignored.
	Prefix string
	// DialTimeout bounds Open: it fails if no endpoint answers a read in
	// this time. Default 5 s.
	DialTimeout time.Duration
	// WatchBuffer is the capacity of each channel returned by Watch. A
	// reader that falls this far behind pauses the etcd watch (see Watch).
	// Default 128.
	WatchBuffer int
	// TLS, when set, is the client config for https:// endpoints (the CA,
	// and a client certificate for an etcd that requires one). Nil:
	// plaintext.
	TLS *tls.Config
	// Username and Password log the client in when etcd has
	// authentication on (Strata's nodes use root). Empty: anonymous.
	Username, Password string
	// Logger receives the Store's and the etcd client's warnings; nil
	// discards them.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults; Endpoints must still be set.
func DefaultConfig() Config {
	return Config{Prefix: "/strata", DialTimeout: 5 * time.Second, WatchBuffer: 128}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.Prefix = strings.TrimRight(c.Prefix, "/")
	if c.Prefix == "" {
		c.Prefix = d.Prefix
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = d.DialTimeout
	}
	if c.WatchBuffer == 0 {
		c.WatchBuffer = d.WatchBuffer
	}
	return c
}

// Validate reports every problem with c (after defaults are applied).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if len(c.Endpoints) == 0 {
		errs = append(errs, errors.New("meta: Endpoints is empty"))
	}
	for _, ep := range c.Endpoints {
		if ep == "" {
			errs = append(errs, errors.New("meta: Endpoints has an empty entry"))
		}
	}
	if c.Password != "" && c.Username == "" {
		errs = append(errs, errors.New("meta: Password without Username"))
	}
	if c.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("meta: DialTimeout %v is negative", c.DialTimeout))
	}
	if c.WatchBuffer < 0 {
		errs = append(errs, fmt.Errorf("meta: WatchBuffer %d is negative", c.WatchBuffer))
	}
	return errors.Join(errs...)
}

// Store is typed access to etcd under one key prefix. Safe for concurrent use.
type Store struct {
	client *clientv3.Client
	cfg    Config
	root   string // cfg.Prefix + "/"
	log    *slog.Logger

	// ctx is canceled by Close; every goroutine the Store starts watches it.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // goroutines started by the Store

	closeOnce sync.Once
	closeErr  error
}

// Open connects to etcd and checks that an endpoint answers within
// DialTimeout (and ctx).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		// Detect half-open connections under watches and keep-alives. etcd
		// refuses pings more often than every 5 s.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               newZapLogger(cfg.Logger, "etcd-client"),
		TLS:                  cfg.TLS,
		Username:             cfg.Username,
		Password:             cfg.Password,
		// AutoSyncInterval stays 0: an embedded etcd on port 0 advertises
		// port 0, and syncing would replace the working endpoints with it.
	})
	if err != nil {
		return nil, fmt.Errorf("meta: open %v: %w", cfg.Endpoints, err)
	}
	root := cfg.Prefix + "/"
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	_, err = client.Get(pctx, root, clientv3.WithCountOnly())
	cancel()
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("meta: open %v: no endpoint answered within %v: %w", cfg.Endpoints, cfg.DialTimeout, err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	return &Store{
		client: client,
		cfg:    cfg,
		root:   root,
		log:    log.With("component", "meta", "prefix", cfg.Prefix),
		ctx:    sctx,
		cancel: scancel,
	}, nil
}

// Close stops the Store's goroutines (lease keep-alives, watches), waits for
// them and closes the etcd connection. Leases are not revoked: they expire
// after their TTL. Idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		s.wg.Wait()
		err := s.client.Close()
		if err != nil && !errors.Is(err, context.Canceled) {
			s.closeErr = fmt.Errorf("meta: close: %w", err)
		}
	})
	return s.closeErr
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// goStart registers a goroutine about to start; false once Close has begun.
func (s *Store) goStart() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// Prefix is the Store's key prefix (without the trailing "/").
func (s *Store) Prefix() string { return s.cfg.Prefix }

// KV is one key with its value and etcd metadata.
type KV struct {
	Key            string // relative to the Store's prefix
	Value          []byte
	CreateRevision int64 // revision that created the key (since its last deletion)
	ModRevision    int64 // revision of the last write; what Cond and CAS compare
	Version        int64 // number of writes since creation (1 after create)
	Lease          LeaseID
}

// LeaseID names an etcd lease; 0 means none.
type LeaseID int64

// PutOption modifies a put (Put, CAS, OpPut).
type PutOption func(*putOptions)

type putOptions struct{ lease LeaseID }

// WithLease attaches the key to a lease: the key is deleted when the lease
// ends (revoked or expired).
func WithLease(id LeaseID) PutOption { return func(o *putOptions) { o.lease = id } }

func putOpts(opts []PutOption) []clientv3.OpOption {
	var po putOptions
	for _, o := range opts {
		o(&po)
	}
	if po.lease != 0 {
		return []clientv3.OpOption{clientv3.WithLease(clientv3.LeaseID(po.lease))}
	}
	return nil
}

func (s *Store) abs(key string) string { return s.root + key }

func (s *Store) rel(key []byte) string { return strings.TrimPrefix(string(key), s.root) }

func (s *Store) kv(k *mvccpb.KeyValue) KV {
	return KV{
		Key:            s.rel(k.Key),
		Value:          k.Value,
		CreateRevision: k.CreateRevision,
		ModRevision:    k.ModRevision,
		Version:        k.Version,
		Lease:          LeaseID(k.Lease),
	}
}

// check fails fast on a closed Store (the etcd client would retry for
// seconds) and, when needKey, on an empty key.
func (s *Store) check(op, key string, needKey bool) error {
	if needKey && key == "" {
		return fmt.Errorf("meta: %s: %w: empty key", op, ErrInvalidKey)
	}
	if s.isClosed() {
		return fmt.Errorf("meta: %s %q: %w", op, key, ErrClosed)
	}
	return nil
}

// Get reads one key; ErrNotFound if absent.
func (s *Store) Get(ctx context.Context, key string) (KV, error) {
	if err := s.check("get", key, true); err != nil {
		return KV{}, err
	}
	resp, err := s.client.Get(ctx, s.abs(key))
	if err != nil {
		return KV{}, s.wrapErr("get", key, err)
	}
	if len(resp.Kvs) == 0 {
		return KV{}, fmt.Errorf("meta: get %q: %w", key, ErrNotFound)
	}
	return s.kv(resp.Kvs[0]), nil
}

// Put writes key unconditionally and returns the revision of the write (the
// key's new ModRevision).
func (s *Store) Put(ctx context.Context, key string, value []byte, opts ...PutOption) (int64, error) {
	if err := s.check("put", key, true); err != nil {
		return 0, err
	}
	resp, err := s.client.Put(ctx, s.abs(key), string(value), putOpts(opts)...)
	if err != nil {
		return 0, s.wrapErr("put", key, err)
	}
	return resp.Header.Revision, nil
}

// CAS writes key only if its mod revision is expectModRev (0: only if the
// key is absent). On a mismatch it returns a *ConflictError carrying the
// actual mod revision (0 if absent).
func (s *Store) CAS(ctx context.Context, key string, value []byte, expectModRev int64, opts ...PutOption) (int64, error) {
	if err := s.check("cas", key, true); err != nil {
		return 0, err
	}
	return s.Txn(ctx, []Cond{{Key: key, ModRevision: expectModRev}}, OpPut(key, value, opts...))
}

// Delete removes key; deleting an absent key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.check("delete", key, true); err != nil {
		return err
	}
	_, err := s.client.Delete(ctx, s.abs(key))
	return s.wrapErr("delete", key, err)
}

// DeleteIf removes key only if its mod revision is expectModRev, else
// returns a *ConflictError. With expectModRev 0 it succeeds (deleting
// nothing) only if the key is absent, like Cond.
func (s *Store) DeleteIf(ctx context.Context, key string, expectModRev int64) error {
	if err := s.check("delete", key, true); err != nil {
		return err
	}
	_, err := s.Txn(ctx, []Cond{{Key: key, ModRevision: expectModRev}}, OpDelete(key))
	return err
}

// listPage bounds one range request; List pages through larger prefixes at
// one revision so that the result is a consistent snapshot.
const listPage = 500

// List returns every key under prefix (relative; "" lists the whole Store),
// sorted by key.
func (s *Store) List(ctx context.Context, prefix string) ([]KV, error) {
	kvs, _, err := s.ListWithRev(ctx, prefix)
	return kvs, err
}

// ListWithRev is List plus the revision of the snapshot it read. Watch(ctx,
// prefix, rev+1) then continues exactly where the listing ended.
func (s *Store) ListWithRev(ctx context.Context, prefix string) ([]KV, int64, error) {
	if err := s.check("list", prefix, false); err != nil {
		return nil, 0, err
	}
	for {
		kvs, rev, err := s.list(ctx, prefix)
		// A compaction between two pages invalidates the snapshot: start over.
		if errors.Is(err, rpctypes.ErrCompacted) && ctx.Err() == nil {
			continue
		}
		return kvs, rev, err
	}
}

func (s *Store) list(ctx context.Context, prefix string) ([]KV, int64, error) {
	start := s.abs(prefix)
	end := clientv3.GetPrefixRangeEnd(start)
	var (
		out []KV
		rev int64
		key = start
	)
	for {
		opts := []clientv3.OpOption{
			clientv3.WithRange(end),
			clientv3.WithLimit(listPage),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend),
		}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.client.Get(ctx, key, opts...)
		if err != nil {
			return nil, 0, s.wrapErr("list", prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, k := range resp.Kvs {
			out = append(out, s.kv(k))
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, rev, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
