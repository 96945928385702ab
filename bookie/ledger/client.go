package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/internal/meta"
)

// Client creates, writes, reads and recovers the ledgers of one region.
// Safe for concurrent use. It owns the connections to bookies (shared by
// its writers, readers and recoveries) and the goroutines of its writers;
// Close ends them.
type Client struct {
	cfg Config
	log *slog.Logger
	// ownStore is the Store Dial opened (closed with the Client); nil
	// when the caller gave one.
	ownStore *meta.Store

	// ctx is canceled by Close: every call and goroutine of the client
	// watches it.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	ops    sync.WaitGroup // calls in progress
	// callbacks tracks the writers' callback goroutines: Writer.Close
	// does not wait for them (a callback may call Close), Client.Close
	// does.
	callbacks sync.WaitGroup
	writers   map[*Writer]struct{}
	conns     map[connKey]*pooledConn
	// quarantine holds the bookies that failed the writers' adds, out of
	// placement for Config.BookieQuarantine.
	quarantine *quarantine

	closeOnce sync.Once
	closeErr  error
}

type connKey struct{ id, instance string }

// pooledConn is a cached connection to one bookie instance. stale: a
// transport failure was seen; the next user looks the bookie's
// registration up again (it may have moved to another address).
type pooledConn struct {
	addr  string
	conn  Conn
	stale bool
}

// NewClient returns a Client for cfg (see Config). It does no I/O.
func NewClient(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Client{
		cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel,
		writers: map[*Writer]struct{}{}, conns: map[connKey]*pooledConn{},
		quarantine: newQuarantine(cfg.BookieQuarantine),
	}, nil
}

// Close ends the client: calls in progress are canceled, writers stop
// without closing their ledgers (they stay OPEN, for the next owner's
// OpenForTakeover; their unconfirmed appends fail with ErrWriterClosed),
// and connections close. It waits for every goroutine of the client,
// including those running append callbacks. Idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		ws := make([]*Writer, 0, len(c.writers))
		for w := range c.writers {
			ws = append(ws, w)
		}
		c.mu.Unlock()
		c.cancel()
		for _, w := range ws {
			w.abort()
		}
		c.ops.Wait()
		c.callbacks.Wait()
		c.mu.Lock()
		conns := c.conns
		c.conns = map[connKey]*pooledConn{}
		c.mu.Unlock()
		var errs []error
		for _, p := range conns {
			if err := p.conn.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		if c.ownStore != nil {
			errs = append(errs, c.ownStore.Close())
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// Dial opens the region's metadata (etcd at endpoints, under keyPrefix,
// e.g. "/strata/<mesh>/<region>": region.KeyPrefix, and "meta_prefix" of
// the region in mesh.json) and returns a Client over it that closes the
// metadata connection on Close. It is for tools outside this module,
// which cannot build the internal Store themselves; cfg.Store must be nil.
func Dial(ctx context.Context, endpoints []string, keyPrefix string, cfg Config) (*Client, error) {
	if cfg.Store != nil {
		return nil, fmt.Errorf("%w: Dial opens the Store itself; leave Config.Store nil", ErrInvalidOptions)
	}
	st, err := meta.Open(ctx, meta.Config{Endpoints: endpoints, Prefix: keyPrefix, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("ledger: open metadata at %v: %w", endpoints, err)
	}
	cfg.Store = st
	c, err := NewClient(cfg)
	if err != nil {
		st.Close()
		return nil, err
	}
	c.ownStore = st
	return c, nil
}

// begin registers a call; the returned context also ends with the
// client. end must be called when the call returns.
func (c *Client) begin(ctx context.Context) (context.Context, func(), error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, nil, ErrClientClosed
	}
	c.ops.Add(1)
	c.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
		c.ops.Done()
	}, nil
}

// conn returns the cached connection to bookie id serving instance,
// looking its address up in etcd (its registration) when there is none
// or a transport failure made it stale. An empty instance takes the
// registered one (metadata written without instances).
func (c *Client) conn(ctx context.Context, id core.BookieID, instance string) (Conn, error) {
	key := connKey{string(id), instance}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClientClosed
	}
	if p := c.conns[key]; p != nil && !p.stale {
		c.mu.Unlock()
		return p.conn, nil
	}
	c.mu.Unlock()

	lctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	reg, _, err := meta.GetJSON[bookie.Registration](lctx, c.cfg.Store, bookie.RegistrationKey(string(id)))
	cancel()
	if err != nil {
		if errors.Is(err, meta.ErrNotFound) {
			return nil, fmt.Errorf("ledger: bookie %s is not registered (down): %w", id, err)
		}
		return nil, fmt.Errorf("ledger: look bookie %s up: %w", id, err)
	}
	if instance == "" {
		instance = reg.Instance
		key.instance = instance
	}
	c.mu.Lock()
	if p := c.conns[key]; p != nil && p.addr == reg.Address {
		p.stale = false
		c.mu.Unlock()
		return p.conn, nil
	}
	c.mu.Unlock()
	conn, err := c.cfg.Transport.Dial(ctx, Target{ID: string(id), Address: reg.Address, Instance: instance})
	if err != nil {
		return nil, fmt.Errorf("ledger: dial bookie %s at %s: %w", id, reg.Address, err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		conn.Close()
		return nil, ErrClientClosed
	}
	old := c.conns[key]
	if old != nil && old.addr == reg.Address {
		// Another caller dialed the same address meanwhile: keep theirs.
		old.stale = false
		c.mu.Unlock()
		conn.Close()
		return old.conn, nil
	}
	c.conns[key] = &pooledConn{addr: reg.Address, conn: conn}
	c.mu.Unlock()
	if old != nil {
		// The bookie moved: its old address serves nobody of this instance.
		old.conn.Close()
	}
	return conn, nil
}

// noteFailure marks the connection to (id, instance) stale if err is a
// transport failure (not an answer of the bookie, nor our own cancel).
func (c *Client) noteFailure(id core.BookieID, instance string, err error) {
	if !transportFailure(err) {
		return
	}
	c.mu.Lock()
	if p := c.conns[connKey{string(id), instance}]; p != nil {
		p.stale = true
	}
	c.mu.Unlock()
}

// transportFailure reports whether err is a failure to reach a bookie,
// as opposed to its answer (a *bookie.CodeError) or a cancel of ours.
func transportFailure(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var ce *bookie.CodeError
	if errors.As(err, &ce) {
		return false
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.Canceled {
		return false
	}
	return true
}

// Get returns ledger id's metadata (Version = its etcd mod revision).
// Errors: ErrNoLedger, etcd's.
func (c *Client) Get(ctx context.Context, id int64) (core.Metadata, error) {
	ctx, end, err := c.begin(ctx)
	if err != nil {
		return core.Metadata{}, err
	}
	defer end()
	r, _, err := c.getRecord(ctx, id)
	return r.Metadata, err
}

// Custom returns the custom properties given to Create for ledger id.
func (c *Client) Custom(ctx context.Context, id int64) (map[string]string, error) {
	ctx, end, err := c.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	r, _, err := c.getRecord(ctx, id)
	return maps.Clone(r.Custom), err
}

// List returns every ledger's metadata in the region, by id.
func (c *Client) List(ctx context.Context) ([]core.Metadata, error) {
	ctx, end, err := c.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	kvs, err := c.cfg.Store.List(ctx, LedgersPrefix)
	if err != nil {
		return nil, fmt.Errorf("ledger: list: %w", err)
	}
	out := make([]core.Metadata, 0, len(kvs))
	for _, kv := range kvs {
		r, err := decodeRecord(kv)
		if err != nil {
			return nil, err
		}
		out = append(out, r.Metadata)
	}
	return out, nil
}

// Delete removes ledger id's metadata. For now it deletes the metadata
// only: the entries stay on the bookies until a bookie-side collection of
// ledgers without metadata exists. A writer or reader of the ledger fails
// at its next metadata access. Errors: ErrNoLedger, etcd's.
func (c *Client) Delete(ctx context.Context, id int64) error {
	ctx, end, err := c.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	r, _, err := c.getRecord(ctx, id)
	if err != nil {
		return err
	}
	if err := c.cfg.Store.DeleteIf(ctx, LedgerKey(id), r.Version); err != nil {
		if errors.Is(err, meta.ErrConflict) {
			return fmt.Errorf("ledger %d: changed while being deleted; try again: %w", id, err)
		}
		return fmt.Errorf("ledger %d: delete: %w", id, err)
	}
	return nil
}
