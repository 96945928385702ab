package region

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/meta"
)

// registration keeps a node's key in etcd (nodes/<role>/<id> → its
// endpoints) under a lease, so the key vanishes TTL after the node dies,
// and re-registers under a new lease when the old one is lost (etcd
// restarted, a long pause).
type registration struct {
	store  *meta.Store
	key    string
	ttl    time.Duration
	logger *slog.Logger
	lease  atomic.Pointer[meta.Lease]
}

func newRegistration(s *meta.Store, key string, ttl time.Duration, l *slog.Logger) *registration {
	return &registration{store: s, key: key, ttl: ttl, logger: l}
}

// register grants a lease and writes the key under it.
func (r *registration) register(ctx context.Context, e meshfile.Node) error {
	l, err := r.store.GrantLease(ctx, r.ttl)
	if err != nil {
		return err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := r.store.Put(ctx, r.key, b, meta.WithLease(l.ID())); err != nil {
		_ = l.Revoke(ctx)
		return err
	}
	r.lease.Store(l)
	return nil
}

// keep re-registers whenever the lease is lost, until stop closes.
func (r *registration) keep(stop <-chan struct{}, e meshfile.Node) {
	for {
		l := r.lease.Load()
		select {
		case <-stop:
			return
		case <-l.Done():
		}
		r.logger.Warn("registration lease lost; registering again", "key", r.key)
		backoff := 250 * time.Millisecond
		for {
			ctx, cancel := context.WithTimeout(context.Background(), r.ttl)
			err := r.register(ctx, e)
			cancel()
			if err == nil {
				break
			}
			r.logger.Warn("registration failed", "key", r.key, "err", err, "retry_in", backoff)
			select {
			case <-stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

// revoke deletes the key at once by revoking its lease.
func (r *registration) revoke(ctx context.Context) error {
	l := r.lease.Load()
	if l == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return l.Revoke(ctx)
}
