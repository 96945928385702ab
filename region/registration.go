package region

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/internal/meshfile"
	"github.com/stratamesh/strata/internal/meta"
)

// ErrDuplicateNode is returned when another live process already runs
// the node — it holds the node's directory (nodedir.Lock) or its
// registration in etcd: two processes must never run one node.
var ErrDuplicateNode = errors.New("region: another live process runs this node")

// registration keeps a node's key in etcd (nodes/<role>/<id> → its
// endpoints) under a lease, so the key vanishes TTL after the node dies.
// The key is created with a CAS: a key left by a dead process (its admin
// endpoint does not answer) is taken over; a key held by a live one is
// refused with ErrDuplicateNode. When the lease is lost (etcd restarted, a
// long pause) the node registers again the same way, and if another
// process took the key meanwhile, the node must stop (keep returns the
// error).
type registration struct {
	store  *meta.Store
	key    string
	ttl    time.Duration
	logger *slog.Logger
	alive  func(ctx context.Context, admin string) bool // probes a holder's admin endpoint
	lease  atomic.Pointer[meta.Lease]
}

func newRegistration(s *meta.Store, key string, ttl time.Duration, l *slog.Logger) *registration {
	return &registration{store: s, key: key, ttl: ttl, logger: l, alive: adminAnswers}
}

// register grants a lease and creates the key under it.
func (r *registration) register(ctx context.Context, e meshfile.Node) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	l, err := r.store.GrantLease(ctx, r.ttl)
	if err != nil {
		return err
	}
	if err := r.create(ctx, b, l, e.Admin); err != nil {
		_ = l.Revoke(ctx)
		return err
	}
	r.lease.Store(l)
	return nil
}

// create writes the key if absent, or replaces a dead holder's key.
func (r *registration) create(ctx context.Context, b []byte, l *meta.Lease, self string) error {
	_, err := r.store.CAS(ctx, r.key, b, 0, meta.WithLease(l.ID()))
	if !errors.Is(err, meta.ErrConflict) {
		return err
	}
	cur, err := r.store.Get(ctx, r.key)
	if errors.Is(err, meta.ErrNotFound) {
		_, err = r.store.CAS(ctx, r.key, b, 0, meta.WithLease(l.ID()))
		return err
	}
	if err != nil {
		return err
	}
	var holder meshfile.Node
	_ = json.Unmarshal(cur.Value, &holder)
	if holder.Admin != "" && holder.Admin != self && r.alive(ctx, holder.Admin) {
		return fmt.Errorf("%w: %s is held by pid %d (admin %s)", ErrDuplicateNode, r.key, holder.PID, holder.Admin)
	}
	r.logger.Warn("taking over the registration of a dead process", "key", r.key, "old_pid", holder.PID)
	if err := r.store.DeleteIf(ctx, r.key, cur.ModRevision); err != nil {
		return err
	}
	_, err = r.store.CAS(ctx, r.key, b, 0, meta.WithLease(l.ID()))
	return err
}

// keep registers again whenever the lease is lost, until stop closes. It
// returns nil on stop, or ErrDuplicateNode when another process took the
// registration while this one was away.
func (r *registration) keep(stop <-chan struct{}, e meshfile.Node) error {
	for {
		select {
		case <-stop:
			return nil
		case <-r.lease.Load().Done():
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
			if errors.Is(err, ErrDuplicateNode) {
				return err
			}
			r.logger.Warn("registration failed", "key", r.key, "err", err, "retry_in", backoff)
			select {
			case <-stop:
				return nil
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

// adminAnswers reports whether a node's admin endpoint answers /healthz
// within a second.
func adminAnswers(ctx context.Context, admin string) bool {
	return adminAnswersWith(ctx, http.DefaultClient, admin)
}

// adminAnswersWith is adminAnswers over client hc (HTTPS with the CA).
func adminAnswersWith(ctx context.Context, hc *http.Client, admin string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
