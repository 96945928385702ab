package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/tenancy"
)

// Prefix holds the configuration records, relative to the region's
// metadata prefix: "config/<kind>/<key>".
const Prefix = "config/"

func recordKey(kind tenancy.Kind, key string) string { return Prefix + string(kind) + "/" + key }

// Errors of Store's writes (besides tenancy.ErrNotFound and
// tenancy.ErrNotEmpty, and etcd's).
var (
	// ErrExists: a create of an object that exists.
	ErrExists = errors.New("store: already exists")
	// ErrNoTenant: a namespace of a tenant that does not exist.
	ErrNoTenant = errors.New("store: no such tenant")
)

// Config configures a Store.
type Config struct {
	// Meta is the region's metadata store. Required.
	Meta *meta.Store
	// Region is this region's name: the HLC's tie-break. Required.
	Region string
	// Now is the wall clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Store is one region's copy of the mesh's configuration.
type Store struct {
	cfg Config

	clockMu sync.Mutex
	clock   *tenancy.Clock

	mu        sync.RWMutex
	state     *tenancy.State
	listeners []func([]tenancy.Record)

	cancel context.CancelFunc
	done   chan struct{}
}

// Open reads the region's records and starts watching them. Errors:
// etcd's.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Meta == nil || cfg.Region == "" {
		return nil, errors.New("store: Config.Meta and Config.Region are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{cfg: cfg, clock: tenancy.NewClock(cfg.Region), state: tenancy.NewState(), done: make(chan struct{})}
	kvs, rev, err := cfg.Meta.ListWithRev(ctx, Prefix)
	if err != nil {
		return nil, fmt.Errorf("store: read configuration: %w", err)
	}
	for _, kv := range kvs {
		s.take(kv)
	}
	wctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.watch(wctx, rev+1)
	return s, nil
}

// Close stops the watch. Idempotent.
func (s *Store) Close() {
	s.cancel()
	<-s.done
}

// OnChange registers fn to run after records change in the cached State
// (local writes, other regions' records, other brokers' writes): with the
// records that changed. fn runs on the watch goroutine and must not block.
func (s *Store) OnChange(fn func(changed []tenancy.Record)) {
	s.mu.Lock()
	s.listeners = append(s.listeners, fn)
	s.mu.Unlock()
}

// take merges one stored record into the cache; it reports the record
// when the cache changed.
func (s *Store) take(kv meta.KV) (tenancy.Record, bool) {
	var r tenancy.Record
	if err := json.Unmarshal(kv.Value, &r); err != nil || r.Check() != nil {
		s.cfg.Logger.Warn("ignoring a malformed configuration record", "key", kv.Key)
		return r, false
	}
	s.clockMu.Lock()
	s.clock.Observe(r.Stamp)
	s.clockMu.Unlock()
	s.mu.Lock()
	changed := s.state.Merge(r)
	s.mu.Unlock()
	return r, changed
}

func (s *Store) watch(ctx context.Context, from int64) {
	defer close(s.done)
	for ctx.Err() == nil {
		ch := s.cfg.Meta.Watch(ctx, Prefix, from)
		for ev := range ch {
			switch ev.Type {
			case meta.EventPut:
				from = ev.Revision + 1
				if r, ok := s.take(ev.KV); ok {
					s.notify([]tenancy.Record{r})
				}
			case meta.EventDelete:
				from = ev.Revision + 1 // records are never deleted, only tombstoned
			case meta.EventCompacted:
				kvs, rev, err := s.cfg.Meta.ListWithRev(ctx, Prefix)
				if err != nil {
					continue
				}
				var changed []tenancy.Record
				for _, kv := range kvs {
					if r, ok := s.take(kv); ok {
						changed = append(changed, r)
					}
				}
				from = rev + 1
				s.notify(changed)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *Store) notify(changed []tenancy.Record) {
	if len(changed) == 0 {
		return
	}
	s.mu.RLock()
	ls := s.listeners
	s.mu.RUnlock()
	for _, fn := range ls {
		fn(changed)
	}
}

// View calls fn with the cached State under the read lock (fn must not
// keep it or write to it).
func (s *Store) View(fn func(*tenancy.State)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(s.state)
}

// Tenant returns live tenant name from the cache.
func (s *Store) Tenant(name string) (t tenancy.Tenant, ok bool) {
	s.View(func(st *tenancy.State) { t, ok = st.Tenant(name) })
	return
}

// Namespace returns visible namespace n from the cache.
func (s *Store) Namespace(n tenancy.NSName) (ns tenancy.Namespace, ok bool) {
	s.View(func(st *tenancy.State) { ns, ok = st.Namespace(n) })
	return
}

// Tenants returns the live tenants from the cache.
func (s *Store) Tenants() (out []tenancy.Tenant) {
	s.View(func(st *tenancy.State) { out = st.Tenants() })
	return
}

// Namespaces returns tenant's visible namespaces ("" = all) from the cache.
func (s *Store) Namespaces(tenant string) (out []tenancy.Namespace) {
	s.View(func(st *tenancy.State) { out = st.Namespaces(tenant) })
	return
}

// Token returns live token id from the cache.
func (s *Store) Token(id string) (t tenancy.Token, ok bool) {
	s.View(func(st *tenancy.State) { t, ok = st.Token(id) })
	return
}

// Tokens returns the live tokens from the cache.
func (s *Store) Tokens() (out []tenancy.Token) {
	s.View(func(st *tenancy.State) { out = st.Tokens() })
	return
}

// Records returns every cached record, tombstones included.
func (s *Store) Records() (out []tenancy.Record) {
	s.View(func(st *tenancy.State) { out = st.Records() })
	return
}

// stamp issues a timestamp later than old and everything seen.
func (s *Store) stamp(old tenancy.HLC) tenancy.HLC {
	s.clockMu.Lock()
	defer s.clockMu.Unlock()
	s.clock.Observe(old)
	return s.clock.Now(s.cfg.Now().UnixMilli())
}

// current reads kind/key's stored record and its revision (0 when
// absent).
func (s *Store) current(ctx context.Context, kind tenancy.Kind, key string) (tenancy.Record, int64, error) {
	kv, err := s.cfg.Meta.Get(ctx, recordKey(kind, key))
	if errors.Is(err, meta.ErrNotFound) {
		return tenancy.Record{}, 0, nil
	}
	if err != nil {
		return tenancy.Record{}, 0, err
	}
	var r tenancy.Record
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return tenancy.Record{}, kv.ModRevision, nil // a malformed record is overwritten
	}
	return r, kv.ModRevision, nil
}

// maxWriteTries bounds a write's compare-and-swap attempts under
// contention (each after a pause of up to 20 ms): then it fails with
// meta.ErrConflict.
const maxWriteTries = 200

// write stores the record mk returns for the current record of
// kind/key (zero Record when absent), stamped after it, by a
// compare-and-swap retried on conflict. mk may return an error to
// refuse (e.g. ErrExists); a returned record with Kind "" writes nothing.
func (s *Store) write(ctx context.Context, kind tenancy.Kind, key string, mk func(cur tenancy.Record, st tenancy.HLC) (tenancy.Record, error)) (tenancy.Record, error) {
	for try := 0; ; try++ {
		cur, rev, err := s.current(ctx, kind, key)
		if err != nil {
			return tenancy.Record{}, err
		}
		rec, err := mk(cur, s.stamp(cur.Stamp))
		if err != nil || rec.Kind == "" {
			return rec, err
		}
		b, _ := json.Marshal(rec)
		_, err = s.cfg.Meta.CAS(ctx, recordKey(kind, key), b, rev)
		if errors.Is(err, meta.ErrConflict) && try < maxWriteTries {
			// Another writer (a broker of this region, or a merge) got
			// there first: read again after a short, growing, jittered
			// pause, so that writers racing on one key take turns.
			select {
			case <-ctx.Done():
				return tenancy.Record{}, fmt.Errorf("%w (after %d tries: %w)", err, try+1, ctx.Err())
			case <-time.After(time.Duration(rand.Int64N(int64(min(try+1, 20)) * int64(time.Millisecond)))):
			}
			continue
		}
		if err != nil {
			return tenancy.Record{}, err
		}
		// The cache learns it from the watch too; take it now so a read
		// right after the write sees it.
		s.mu.Lock()
		changed := s.state.Merge(rec)
		s.mu.Unlock()
		if changed {
			s.notify([]tenancy.Record{rec})
		}
		return rec, nil
	}
}

// Merge stores each record from another region that is newer than this
// region's copy (tenancy's rule), by compare-and-swap. It returns how
// many were stored; malformed records are skipped and reported in err.
func (s *Store) Merge(ctx context.Context, recs []tenancy.Record) (int, error) {
	n := 0
	var errs []error
	for _, r := range recs {
		if err := r.Check(); err != nil {
			errs = append(errs, err)
			continue
		}
		var cached tenancy.Record
		var have bool
		s.View(func(st *tenancy.State) { cached, have = st.Get(r.Kind, r.Key) })
		if have && !r.Newer(cached) {
			continue // the usual case of an anti-entropy round: nothing to do
		}
		s.clockMu.Lock()
		s.clock.Observe(r.Stamp)
		s.clockMu.Unlock()
		stored := false
		_, err := s.write(ctx, r.Kind, r.Key, func(cur tenancy.Record, _ tenancy.HLC) (tenancy.Record, error) {
			if cur.Kind != "" && !r.Newer(cur) {
				return tenancy.Record{}, nil
			}
			stored = true
			return r, nil
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if stored {
			n++
		}
	}
	return n, errors.Join(errs...)
}

func live(r tenancy.Record) bool { return r.Kind != "" && !r.Deleted }

// PutTenant creates or updates tenant t (validated). It reports whether it
// was created.
func (s *Store) PutTenant(ctx context.Context, t tenancy.Tenant) (created bool, err error) {
	if err := t.Validate(); err != nil {
		return false, err
	}
	_, err = s.write(ctx, tenancy.KindTenant, t.Name, func(cur tenancy.Record, st tenancy.HLC) (tenancy.Record, error) {
		created = !live(cur)
		return tenancy.NewRecord(t, st)
	})
	return created, err
}

// DeleteTenant tombstones tenant name and revokes its admin tokens and
// its NATS account and users.
// Without force a tenant with namespaces is refused
// (tenancy.ErrNotEmpty); with force its namespaces are tombstoned first. tenancy.ErrNotFound when it does not exist.
func (s *Store) DeleteTenant(ctx context.Context, name string, force bool) error {
	if _, ok := s.Tenant(name); !ok {
		return fmt.Errorf("tenant %s: %w", name, tenancy.ErrNotFound)
	}
	nss := s.Namespaces(name)
	if len(nss) > 0 && !force {
		names := make([]string, len(nss))
		for i, ns := range nss {
			names[i] = ns.Name
		}
		return fmt.Errorf("tenant %s has namespaces %s: %w", name, strings.Join(names, ", "), tenancy.ErrNotEmpty)
	}
	for _, ns := range nss {
		if err := s.DeleteNamespace(ctx, ns.NS()); err != nil && !errors.Is(err, tenancy.ErrNotFound) {
			return err
		}
	}
	// Its admin tokens go with it: a tenant created again under the name
	// must not inherit them.
	for _, t := range s.Tokens() {
		if t.Tenant == name {
			if err := s.RevokeToken(ctx, t.ID); err != nil && !errors.Is(err, tenancy.ErrNotFound) {
				return err
			}
		}
	}
	// So do its NATS account, users and revocations.
	if err := s.deleteCreds(ctx, name); err != nil {
		return err
	}
	return s.tombstone(ctx, tenancy.KindTenant, name)
}

func (s *Store) tombstone(ctx context.Context, kind tenancy.Kind, key string) error {
	_, err := s.write(ctx, kind, key, func(cur tenancy.Record, st tenancy.HLC) (tenancy.Record, error) {
		if !live(cur) {
			return tenancy.Record{}, fmt.Errorf("%s %s: %w", kind, key, tenancy.ErrNotFound)
		}
		return tenancy.Tombstone(kind, key, st), nil
	})
	return err
}

// PutNamespace creates or updates ns (validated against regions; nil
// regions: any). ErrNoTenant when its tenant does not exist. It reports
// whether it was created.
func (s *Store) PutNamespace(ctx context.Context, ns tenancy.Namespace, regions []string) (created bool, err error) {
	if err := ns.Validate(regions); err != nil {
		return false, err
	}
	if _, ok := s.Tenant(ns.Tenant); !ok {
		return false, fmt.Errorf("namespace %s: tenant %s: %w", ns.NS(), ns.Tenant, ErrNoTenant)
	}
	_, err = s.write(ctx, tenancy.KindNamespace, ns.NS().String(), func(cur tenancy.Record, st tenancy.HLC) (tenancy.Record, error) {
		created = !live(cur)
		ns.ReplicationEpochs = tenancy.ReplicationEpochs(prevNamespace(cur), ns.Policies.Replication, st)
		ns.Parked = tenancy.CarryParked(prevNamespace(cur), ns.Policies.Replication)
		return tenancy.NewRecord(ns, st)
	})
	return created, err
}

// PatchPolicies applies a JSON merge patch to namespace n's policies
// (tenancy.PatchPolicies) and stores the result once it validates. It
// returns the new policies. tenancy.ErrNotFound when n does not exist.
func (s *Store) PatchPolicies(ctx context.Context, n tenancy.NSName, patch []byte, regions []string) (tenancy.Policies, error) {
	var out tenancy.Policies
	_, err := s.write(ctx, tenancy.KindNamespace, n.String(), func(cur tenancy.Record, st tenancy.HLC) (tenancy.Record, error) {
		if _, ok := s.Tenant(n.Tenant); !ok || !live(cur) {
			return tenancy.Record{}, fmt.Errorf("namespace %s: %w", n, tenancy.ErrNotFound)
		}
		var ns tenancy.Namespace
		if err := json.Unmarshal(cur.Value, &ns); err != nil {
			return tenancy.Record{}, err
		}
		p, err := tenancy.PatchPolicies(ns.Policies, patch, tenancy.DefaultPolicies(regions))
		if err != nil {
			return tenancy.Record{}, err
		}
		if err := p.Validate(regions); err != nil {
			return tenancy.Record{}, err
		}
		prev := ns
		ns.Policies, out = p, p
		ns.ReplicationEpochs = tenancy.ReplicationEpochs(&prev, p.Replication, st)
		ns.Parked = tenancy.CarryParked(&prev, p.Replication)
		return tenancy.NewRecord(ns, st)
	})
	return out, err
}

// DeleteNamespace tombstones namespace n (tenancy.ErrNotFound when it
// does not exist). Whether it may be deleted (its topics) is the
// caller's decision.
func (s *Store) DeleteNamespace(ctx context.Context, n tenancy.NSName) error {
	return s.tombstone(ctx, tenancy.KindNamespace, n.String())
}

// PutToken stores admin token t (its secret's hash).
func (s *Store) PutToken(ctx context.Context, t tenancy.Token) error {
	_, err := s.write(ctx, tenancy.KindToken, t.ID, func(cur tenancy.Record, st tenancy.HLC) (tenancy.Record, error) {
		if live(cur) {
			return tenancy.Record{}, fmt.Errorf("token %s: %w", t.ID, ErrExists)
		}
		return tenancy.NewRecord(t, st)
	})
	return err
}

// RevokeToken tombstones token id, mesh-wide.
func (s *Store) RevokeToken(ctx context.Context, id string) error {
	return s.tombstone(ctx, tenancy.KindToken, id)
}

// seedStamp is the stamp of seeded records: older than any write made
// at run time, in any region.
func seedStamp(region string) tenancy.HLC { return tenancy.HLC{Wall: 1, Region: region} }

// Seed writes each tenant and namespace of c that this region has no
// record of at all (live or tombstone) with the oldest possible stamp,
// so that any change made at run time, anywhere, wins over it: the
// topology file's tenants are the mesh's initial desired state. It
// returns how many records it wrote.
func (s *Store) Seed(ctx context.Context, c tenancy.Config) (int, error) {
	n := 0
	seed := func(v any, kind tenancy.Kind, key string) error {
		_, err := s.write(ctx, kind, key, func(cur tenancy.Record, _ tenancy.HLC) (tenancy.Record, error) {
			if cur.Kind != "" {
				return tenancy.Record{}, nil
			}
			n++
			return tenancy.NewRecord(v, seedStamp(s.cfg.Region))
		})
		return err
	}
	for _, t := range c.Tenants {
		if err := seed(t, tenancy.KindTenant, t.Name); err != nil {
			return n, err
		}
	}
	for _, ns := range c.Namespaces {
		if err := seed(ns, tenancy.KindNamespace, ns.NS().String()); err != nil {
			return n, err
		}
	}
	return n, nil
}
