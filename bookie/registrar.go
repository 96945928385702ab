package bookie

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/stratamesh/strata/internal/meta"
)

// RegistrationPrefix is where bookies register in etcd (relative to the
// region's metadata prefix): RegistrationKey(id) → Registration (JSON),
// under a lease, so the key disappears a TTL after the bookie dies.
const RegistrationPrefix = "bookies/"

// RegistrationKey is the etcd key of a bookie's registration.
func RegistrationKey(id string) string { return RegistrationPrefix + id }

// Registration is what a bookie publishes about itself for placement and
// for clients: where it is, which instance serves, and whether it takes
// writes.
type Registration struct {
	ID         string `json:"id"`
	Address    string `json:"address"`
	Instance   string `json:"instance"`
	FreeBytes  int64  `json:"free_bytes"`
	TotalBytes int64  `json:"total_bytes"`
	ReadOnly   bool   `json:"read_only"`
}

// ListRegistrations returns the registered bookies, sorted by id.
func ListRegistrations(ctx context.Context, st *meta.Store) ([]Registration, error) {
	kvs, err := st.List(ctx, RegistrationPrefix)
	if err != nil {
		return nil, err
	}
	out := make([]Registration, 0, len(kvs))
	for _, kv := range kvs {
		var r Registration
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, fmt.Errorf("bookie: registration %s: %w", kv.Key, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Defaults of RegistrarConfig.
const (
	DefaultRegistrationTTL     = 10 * time.Second
	DefaultRegistrationRefresh = 5 * time.Second
	// minFreeBytesDelta is the smallest free-space change republished by
	// default (see RegistrarConfig.FreeBytesDelta).
	minFreeBytesDelta = 64 << 20
)

// RegistrarConfig configures a Registrar.
type RegistrarConfig struct {
	// Store is the region's metadata (required).
	Store *meta.Store
	// ID is the bookie id (required).
	ID string
	// State reports what to publish now (required); its ID is overwritten
	// with ID. It is called from the Registrar's goroutine every Interval
	// and must be cheap.
	State func() Registration
	// TTL of the registration's lease: after a crash the key disappears
	// this long later. Default 10 s; at least meta.MinLeaseTTL.
	TTL time.Duration
	// Interval is how often State is checked for a change worth
	// publishing. Default 5 s. Refresh checks at once.
	Interval time.Duration
	// FreeBytesDelta is the change of free bytes that is republished;
	// smaller changes are not, to spare etcd. A change of address,
	// instance or read-only state always is. Default (0): 1% of the total
	// bytes, at least 64 MiB.
	FreeBytesDelta int64
	// Cond, when set, conditions every write of the registration: the
	// bookie's cookie key at the revision this instance wrote or read it,
	// so that an instance whose cookie was replaced (its disk was taken
	// over by a new instance) can no longer register.
	Cond *meta.Cond
	// OnFatal is called (once, from the Registrar's goroutine) when the
	// Registrar gives up because Cond no longer holds. Optional.
	OnFatal func(error)
	// Logger; nil discards.
	Logger *slog.Logger
}

func (c RegistrarConfig) withDefaults() RegistrarConfig {
	if c.TTL == 0 {
		c.TTL = DefaultRegistrationTTL
	}
	if c.Interval == 0 {
		c.Interval = DefaultRegistrationRefresh
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with c (after defaults are applied).
func (c RegistrarConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("bookie: RegistrarConfig.Store is required"))
	}
	if err := ValidateID(c.ID); err != nil {
		errs = append(errs, err)
	}
	if c.State == nil {
		errs = append(errs, errors.New("bookie: RegistrarConfig.State is required"))
	}
	if c.TTL < meta.MinLeaseTTL {
		errs = append(errs, fmt.Errorf("bookie: registration TTL %v is below %v", c.TTL, meta.MinLeaseTTL))
	}
	if c.Interval < 0 {
		errs = append(errs, fmt.Errorf("bookie: registration Interval %v is negative", c.Interval))
	}
	if c.FreeBytesDelta < 0 {
		errs = append(errs, fmt.Errorf("bookie: FreeBytesDelta %d is negative", c.FreeBytesDelta))
	}
	return errors.Join(errs...)
}

// registrationChanged says whether cur differs from the published prev
// enough to be written again.
func registrationChanged(prev, cur Registration, freeDelta int64) bool {
	if prev.Address != cur.Address || prev.Instance != cur.Instance || prev.ReadOnly != cur.ReadOnly || prev.ID != cur.ID {
		return true
	}
	if freeDelta <= 0 {
		freeDelta = max(cur.TotalBytes/100, minFreeBytesDelta)
	}
	return absDiff(cur.FreeBytes, prev.FreeBytes) >= freeDelta || absDiff(cur.TotalBytes, prev.TotalBytes) >= freeDelta
}

func absDiff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}

// Registrar keeps a bookie's registration in etcd: written under a lease
// at start, rewritten when the bookie's state changes meaningfully, and
// under a new lease when the lease is lost (etcd restarted, a long pause).
// Stop revokes the lease, which deletes the key at once.
type Registrar struct {
	cfg   RegistrarConfig
	nudge chan struct{}
	stop  chan struct{}
	done  chan struct{}

	mu    sync.Mutex
	lease *meta.Lease
	pub   Registration // last written

	stopOnce sync.Once
	stopErr  error
}

// StartRegistrar writes the registration and keeps it up to date in the
// background until Stop.
func StartRegistrar(ctx context.Context, cfg RegistrarConfig) (*Registrar, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.Logger = cfg.Logger.With("bookie", cfg.ID)
	r := &Registrar{cfg: cfg, nudge: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if err := r.register(ctx); err != nil {
		return nil, err
	}
	go r.run()
	return r, nil
}

// Published is the registration last written.
func (r *Registrar) Published() Registration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pub
}

// Refresh asks for an immediate check of State (e.g. the bookie just
// turned read-only); it does not wait.
func (r *Registrar) Refresh() {
	select {
	case r.nudge <- struct{}{}:
	default:
	}
}

// Stop ends the background work and revokes the lease (deleting the
// registration). Idempotent.
func (r *Registrar) Stop(ctx context.Context) error {
	r.stopOnce.Do(func() {
		close(r.stop)
		<-r.done
		r.mu.Lock()
		l := r.lease
		r.mu.Unlock()
		if l != nil {
			r.stopErr = l.Revoke(ctx)
		}
	})
	return r.stopErr
}

func (r *Registrar) state() Registration {
	s := r.cfg.State()
	s.ID = r.cfg.ID
	return s
}

// register writes the current state under a new lease.
func (r *Registrar) register(ctx context.Context) error {
	l, err := r.cfg.Store.GrantLease(ctx, r.cfg.TTL)
	if err != nil {
		return fmt.Errorf("bookie: register %s: %w", r.cfg.ID, err)
	}
	cur := r.state()
	if err := r.write(ctx, l, cur); err != nil {
		_ = l.Revoke(ctx)
		return err
	}
	r.mu.Lock()
	r.lease, r.pub = l, cur
	r.mu.Unlock()
	return nil
}

func (r *Registrar) write(ctx context.Context, l *meta.Lease, reg Registration) error {
	b, err := json.Marshal(reg)
	if err != nil {
		return err
	}
	var conds []meta.Cond
	if r.cfg.Cond != nil {
		conds = append(conds, *r.cfg.Cond)
	}
	if _, err := r.cfg.Store.Txn(ctx, conds, meta.OpPut(RegistrationKey(r.cfg.ID), b, meta.WithLease(l.ID()))); err != nil {
		return fmt.Errorf("bookie: register %s: %w", r.cfg.ID, err)
	}
	return nil
}

func (r *Registrar) run() {
	defer close(r.done)
	tick := time.NewTicker(r.cfg.Interval)
	defer tick.Stop()
	for {
		r.mu.Lock()
		l := r.lease
		r.mu.Unlock()
		select {
		case <-r.stop:
			return
		case <-l.Done():
			r.cfg.Logger.Warn("registration lease lost; registering again")
			if !r.reregister() {
				return
			}
		case <-tick.C:
			if !r.refresh(l) {
				return
			}
		case <-r.nudge:
			if !r.refresh(l) {
				return
			}
		}
	}
}

// refresh rewrites the registration if it changed; false when the
// Registrar must stop.
func (r *Registrar) refresh(l *meta.Lease) bool {
	cur := r.state()
	if !registrationChanged(r.Published(), cur, r.cfg.FreeBytesDelta) {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.TTL)
	err := r.write(ctx, l, cur)
	cancel()
	switch {
	case err == nil:
		r.mu.Lock()
		r.pub = cur
		r.mu.Unlock()
	case errors.Is(err, meta.ErrConflict):
		r.fatal(l, err)
		return false
	case errors.Is(err, meta.ErrLeaseLost):
		return r.reregister()
	default:
		r.cfg.Logger.Warn("registration update failed; retrying at the next check", "err", err)
	}
	return true
}

// reregister registers under a new lease, retrying with backoff until it
// works, Stop, or Cond fails (false).
func (r *Registrar) reregister() bool {
	backoff := 250 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.TTL)
		err := r.register(ctx)
		cancel()
		if err == nil {
			return true
		}
		if errors.Is(err, meta.ErrConflict) {
			r.fatal(nil, err)
			return false
		}
		r.cfg.Logger.Warn("registration failed", "err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-r.stop:
			t.Stop()
			return false
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// fatal reports that this instance was superseded.
func (r *Registrar) fatal(l *meta.Lease, err error) {
	err = fmt.Errorf("%w: the cookie of bookie %s changed since this instance started (a new instance took the id over); no longer registering: %w",
		ErrCookieMismatch, r.cfg.ID, err)
	r.cfg.Logger.Error("bookie superseded", "err", err)
	if l != nil {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.TTL)
		_ = l.Revoke(ctx)
		cancel()
	}
	if r.cfg.OnFatal != nil {
		r.cfg.OnFatal(err)
	}
}
