package ledger

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/bookie/storage"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/meta/metatest"
	"github.com/stratamesh/strata/internal/testutil"
)

func TestMain(m *testing.M) { metatest.Main(m) }

// testCtx bounds a whole test.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// env is one region for a test: a Store under a prefix of its own and
// real bookies (gRPC service over a storage engine in a temp dir),
// registered in that Store.
type env struct {
	t       *testing.T
	store   *meta.Store
	mu      sync.Mutex
	bookies map[string]*testBookie
}

type testBookie struct {
	id, dir, addr string
	b             *bookie.Bookie
	gen           int // data directory generation (a new one is an empty disk)
}

// newEnv starts n bookies k1..kn.
func newEnv(t *testing.T, n int) *env {
	t.Helper()
	st := metatest.OpenStore(t)
	e := &env{t: t, store: st, bookies: map[string]*testBookie{}}
	t.Cleanup(func() {
		e.mu.Lock()
		bs := e.bookies
		e.mu.Unlock()
		for _, tb := range bs {
			if tb.b != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				tb.b.Stop(ctx)
				cancel()
			}
		}
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	root := t.TempDir()
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("k%d", i)
		tb := &testBookie{id: id, dir: filepath.Join(root, id)}
		e.bookies[id] = tb
		e.start(tb, "127.0.0.1:0")
	}
	return e
}

// start runs tb on listen, with its data in tb.dir/gen<gen>.
func (e *env) start(tb *testBookie, listen string) {
	e.t.Helper()
	data := filepath.Join(tb.dir, fmt.Sprintf("gen%d", tb.gen))
	b, err := bookie.StartBookie(testCtx(e.t), bookie.BookieConfig{
		ID: tb.id, DataDir: data, ListenAddr: listen, Meta: e.store,
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
				return nil, err
			}
			return eng, nil
		},
		RegistrationTTL: meta.MinLeaseTTL,
		RefreshInterval: 100 * time.Millisecond,
	})
	if err != nil {
		e.t.Fatalf("start bookie %s: %v", tb.id, err)
	}
	e.mu.Lock()
	tb.b, tb.addr = b, b.Addr()
	e.mu.Unlock()
}

func (e *env) bookie(id string) *testBookie {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.bookies[string(id)]
}

// stop stops bookie id (its registration goes at once).
func (e *env) stop(id string) {
	e.t.Helper()
	tb := e.bookie(id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tb.b.Stop(ctx); err != nil {
		e.t.Fatalf("stop bookie %s: %v", id, err)
	}
	e.mu.Lock()
	tb.b = nil
	e.mu.Unlock()
}

// restart starts a stopped bookie id again at its address, on the same
// disk (same instance) or, if wipe, an empty one (a new instance).
func (e *env) restart(id string, wipe bool) {
	e.t.Helper()
	tb := e.bookie(id)
	if wipe {
		tb.gen++
	}
	e.start(tb, tb.addr)
}

// client returns a Client on the env's Store, closed at the end of the test.
func (e *env) client(mod ...func(*Config)) *Client {
	e.t.Helper()
	cfg := DefaultConfig()
	cfg.Store = e.store
	cfg.AddTimeout = 3 * time.Second
	cfg.OpTimeout = 3 * time.Second
	for _, f := range mod {
		f(&cfg)
	}
	c, err := NewClient(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// direct dials bookie id's current instance, bypassing the ledger client.
func (e *env) direct(id core.BookieID) *bookie.Client {
	e.t.Helper()
	tb := e.bookie(string(id))
	c, err := bookie.Dial(testCtx(e.t), tb.addr, bookie.DialOptions{Instance: tb.b.Instance()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// payload is the test payload of entry i of a ledger.
func payload(i int64) []byte {
	return fmt.Appendf(nil, "entry-%06d-%s", i, strings.Repeat("x", int(i%17)))
}

// faultTransport wraps a Transport and consults hook before each request
// (op: "add", "fence", "recovery_read", "read", "read_lac"; entry -1 where
// none). A non-nil error fails the request with it (an add's done gets
// it); the hook may also block (honouring ctx) to stall the request.
type faultTransport struct {
	inner Transport
	mu    sync.Mutex
	hook  func(ctx context.Context, op string, b string, entry int64) error
}

func (f *faultTransport) setHook(h func(ctx context.Context, op string, b string, entry int64) error) {
	f.mu.Lock()
	f.hook = h
	f.mu.Unlock()
}

func (f *faultTransport) check(ctx context.Context, op, b string, entry int64) error {
	f.mu.Lock()
	h := f.hook
	f.mu.Unlock()
	if h == nil {
		return nil
	}
	return h(ctx, op, b, entry)
}

func (f *faultTransport) Dial(ctx context.Context, t Target) (Conn, error) {
	inner := f.inner
	if inner == nil {
		inner = GRPCTransport{}
	}
	c, err := inner.Dial(ctx, t)
	if err != nil {
		return nil, err
	}
	return &faultConn{Conn: c, f: f, b: t.ID}, nil
}

type faultConn struct {
	Conn
	f *faultTransport
	b string
}

var errInjected = errors.New("injected fault")

func (c *faultConn) NewAddStream(ctx context.Context) (AddStream, error) {
	s, err := c.Conn.NewAddStream(ctx)
	if err != nil {
		return nil, err
	}
	return &faultStream{AddStream: s, c: c, ctx: ctx}, nil
}

func (c *faultConn) ReadRange(ctx context.Context, l, first, last int64, maxBytes int) ([]storage.Entry, error) {
	if err := c.f.check(ctx, "read", c.b, first); err != nil {
		return nil, err
	}
	return c.Conn.ReadRange(ctx, l, first, last, maxBytes)
}

func (c *faultConn) RecoveryRead(ctx context.Context, l, first, last int64, key []byte) ([]storage.Entry, int64, error) {
	if err := c.f.check(ctx, "recovery_read", c.b, first); err != nil {
		return nil, core.NoEntry, err
	}
	return c.Conn.RecoveryRead(ctx, l, first, last, key)
}

func (c *faultConn) ReadLAC(ctx context.Context, l, after int64, timeout time.Duration) (int64, error) {
	if err := c.f.check(ctx, "read_lac", c.b, core.NoEntry); err != nil {
		return core.NoEntry, err
	}
	return c.Conn.ReadLAC(ctx, l, after, timeout)
}

func (c *faultConn) Fence(ctx context.Context, l int64, key []byte) (int64, error) {
	if err := c.f.check(ctx, "fence", c.b, core.NoEntry); err != nil {
		return core.NoEntry, err
	}
	return c.Conn.Fence(ctx, l, key)
}

type faultStream struct {
	AddStream
	c   *faultConn
	ctx context.Context
}

func (s *faultStream) Send(req storage.AddRequest, done func(error)) error {
	op := "add"
	if req.Recovery {
		op = "recovery_add"
	}
	if err := s.c.f.check(s.ctx, op, s.c.b, req.EntryID); err != nil {
		done(err)
		return nil
	}
	return s.AddStream.Send(req, done)
}

// TrySend declines while a hook is set (it may block: the session's
// goroutine sends then).
func (s *faultStream) TrySend(req storage.AddRequest, done func(error)) (bool, error) {
	s.c.f.mu.Lock()
	hooked := s.c.f.hook != nil
	s.c.f.mu.Unlock()
	if hooked {
		return false, nil
	}
	return s.AddStream.TrySend(req, done)
}

// waitState waits until ledger id's metadata is in state.
func waitState(t *testing.T, c *Client, id int64, state core.State) {
	t.Helper()
	testutil.Eventually(t, "ledger "+state.String(), 20*time.Second, func() bool {
		md, err := c.Get(testCtx(t), id)
		return err == nil && md.State == state
	})
}

type storageLedger = storage.LedgerInfo
