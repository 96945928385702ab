// Package cluster starts real in-process bookies for tests of the
// packages above the ledger client (the managed ledger, the broker):
// each bookie is the real gRPC service over the real storage engine in a
// temporary directory, listening on 127.0.0.1:0 and registered in the
// test's Store, as in bookie/ledger's own tests.
//
// It lives under bookietest but apart from it because it imports the
// bookie package, whose own tests import bookietest (a cycle).
//
// It must not be used outside tests. A Cluster is safe for concurrent
// use; everything it starts stops at the test's Cleanup.
package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/bookie/storage"
	"github.com/stratamesh/strata/internal/meta"
)

// Cluster is n bookies k1..kn of one region (one Store).
type Cluster struct {
	t     testing.TB
	store *meta.Store
	root  string

	mu      sync.Mutex
	bookies map[string]*node
}

type node struct {
	id, dir, addr string
	b             *bookie.Bookie // nil while stopped
}

// Start starts n bookies, k1..kn, registered in st, and stops them at
// the end of the test (before st is closed, if st was opened before
// Start: Cleanups run in reverse).
func Start(t testing.TB, st *meta.Store, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, store: st, root: t.TempDir(), bookies: map[string]*node{}}
	t.Cleanup(c.stopAll)
	for i := 1; i <= n; i++ {
		nd := &node{id: fmt.Sprintf("k%d", i)}
		nd.dir = filepath.Join(c.root, nd.id)
		c.bookies[nd.id] = nd
		c.start(nd, "127.0.0.1:0")
	}
	return c
}

// Store is the region's Store the bookies are registered in.
func (c *Cluster) Store() *meta.Store { return c.store }

// IDs are the bookies' ids, sorted.
func (c *Cluster) IDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.bookies))
	for id := range c.bookies {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Client returns a ledger client over the cluster's Store with test
// timeouts (3 s adds and operations, 10 s to replace a bookie), closed at
// the end of the test. mod may change its Config.
func (c *Cluster) Client(t testing.TB, mod ...func(*ledger.Config)) *ledger.Client {
	t.Helper()
	cfg := ledger.DefaultConfig()
	cfg.Store = c.store
	cfg.AddTimeout = 3 * time.Second
	cfg.OpTimeout = 3 * time.Second
	cfg.ReplaceTimeout = 10 * time.Second
	for _, f := range mod {
		f(&cfg)
	}
	lc, err := ledger.NewClient(cfg)
	if err != nil {
		t.Fatalf("cluster: ledger client: %v", err)
	}
	t.Cleanup(func() { lc.Close() })
	return lc
}

// Stop stops bookie id (its registration goes at once); its data stays.
func (c *Cluster) Stop(id string) {
	c.t.Helper()
	c.mu.Lock()
	nd := c.bookies[id]
	var b *bookie.Bookie
	if nd != nil {
		b, nd.b = nd.b, nil
	}
	c.mu.Unlock()
	if b == nil {
		c.t.Fatalf("cluster: bookie %s is not running", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Stop(ctx); err != nil {
		c.t.Fatalf("cluster: stop bookie %s: %v", id, err)
	}
}

// Restart starts a stopped bookie again at its address, on its data.
func (c *Cluster) Restart(id string) {
	c.t.Helper()
	c.mu.Lock()
	nd := c.bookies[id]
	c.mu.Unlock()
	if nd == nil || nd.b != nil {
		c.t.Fatalf("cluster: bookie %s is not stopped", id)
	}
	c.start(nd, nd.addr)
}

func (c *Cluster) start(nd *node, listen string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data := filepath.Join(nd.dir, "data")
	b, err := bookie.StartBookie(ctx, bookie.BookieConfig{
		ID: nd.id, DataDir: data, ListenAddr: listen, Meta: c.store,
		OpenStorage: func(context.Context) (storage.Storage, error) {
			cfg := storage.DefaultConfig()
			cfg.Dir = filepath.Join(data, "storage")
			cfg.JournalPreallocate = 0
			cfg.WriteCacheBytes = 4 << 20
			cfg.IndexMemTableBytes = 2 << 20
			cfg.IndexCacheBytes = 1 << 20
			cfg.CompactInterval = 0
			eng, err := storage.Open(cfg)
			if err != nil {
				return nil, err // not a nil *Engine in a non-nil interface
			}
			return eng, nil
		},
		RegistrationTTL: meta.MinLeaseTTL,
		RefreshInterval: 100 * time.Millisecond,
	})
	if err != nil {
		c.t.Fatalf("cluster: start bookie %s: %v", nd.id, err)
	}
	c.mu.Lock()
	nd.b, nd.addr = b, b.Addr()
	c.mu.Unlock()
}

func (c *Cluster) stopAll() {
	c.mu.Lock()
	var bs []*bookie.Bookie
	for _, nd := range c.bookies {
		if nd.b != nil {
			bs = append(bs, nd.b)
			nd.b = nil
		}
	}
	c.mu.Unlock()
	for _, b := range bs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := b.Stop(ctx); err != nil {
			c.t.Errorf("cluster: stop bookie %s: %v", b.ID(), err)
		}
		cancel()
	}
}
