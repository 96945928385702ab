package mledger

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie/bookietest/cluster"
	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/internal/meta/metatest"
	"github.com/stratamesh/strata/tenancy"
)

func TestMain(m *testing.M) { metatest.Main(m) }

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// env is one region for a test: a Store under its own prefix, 4 real
// bookies and a ledger client.
type env struct {
	t     *testing.T
	st    *meta.Store
	bk    *cluster.Cluster
	lc    *ledger.Client
	owner atomic.Int64
}

func newEnv(t *testing.T) *env {
	st := metatest.OpenStore(t)
	bk := cluster.Start(t, st, 4)
	return &env{t: t, st: st, bk: bk, lc: bk.Client(t)}
}

var testTopic = tenancy.Name{Tenant: "acme", Namespace: "prod", Topic: "orders"}

// testRegion is the local region of the tests' MLs (Config.Region).
const testRegion = "us-east"

// create creates the topic with spec.
func (e *env) create(name tenancy.Name, spec string) {
	e.t.Helper()
	if err := Create(testCtx(e.t), e.st, name, []byte(spec), time.Now()); err != nil {
		e.t.Fatal(err)
	}
}

// takeOwnership makes a new owner of name: it writes the ownership key,
// which breaks every earlier owner's condition, and returns the new
// condition.
func (e *env) takeOwnership(name tenancy.Name) meta.Cond {
	e.t.Helper()
	key := "owners/" + name.String()
	rev, err := e.st.Put(testCtx(e.t), key, fmt.Appendf(nil, "owner-%d", e.owner.Add(1)))
	if err != nil {
		e.t.Fatal(err)
	}
	return meta.Cond{Key: key, ModRevision: rev}
}

// lostRecorder records OnLost calls.
type lostRecorder struct {
	mu   sync.Mutex
	errs []error
	ch   chan struct{}
}

func newLost() *lostRecorder { return &lostRecorder{ch: make(chan struct{})} }

func (l *lostRecorder) onLost(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
	if len(l.errs) == 1 {
		close(l.ch)
	}
}

func (l *lostRecorder) calls() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

// config is a Config for a new owner of name (E3/Qw2/Qa2 over the 4
// bookies, region testRegion); mod may change it.
func (e *env) config(name tenancy.Name, lost *lostRecorder, mod ...func(*Config)) Config {
	cfg := Config{
		Store: e.st, Ledgers: e.lc, Ensemble: 3, WriteQuorum: 2, AckQuorum: 2, Region: testRegion,
		Cond: e.takeOwnership(name), MaintenanceInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if lost != nil {
		cfg.OnLost = lost.onLost
	}
	for _, f := range mod {
		f(&cfg)
	}
	return cfg
}

// open takes name over with cfg; the ML is dropped at the end of the
// test if still running.
func (e *env) open(name tenancy.Name, cfg Config) *ML {
	e.t.Helper()
	ml, err := Open(testCtx(e.t), cfg, name)
	if err != nil {
		e.t.Fatalf("open %s: %v", name, err)
	}
	e.t.Cleanup(ml.Drop)
	return ml
}

func msgHeader(id string) []byte {
	if id == "" {
		return nil
	}
	return []byte("NATS/1.0\r\nNats-Msg-Id: " + id + "\r\n\r\n")
}

type pubAnswer struct {
	res PubResult
	err error
}

// publish publishes and waits for the answer.
func publish(t testing.TB, ml *ML, subject, data string, o PublishOptions) (PubResult, error) {
	t.Helper()
	ch := make(chan pubAnswer, 1)
	ml.Publish(subject, msgHeader(o.MsgID), []byte(data), o, func(r PubResult, err error) { ch <- pubAnswer{r, err} })
	select {
	case a := <-ch:
		return a.res, a.err
	case <-time.After(60 * time.Second):
		t.Fatalf("publish on %s: no answer", subject)
		return PubResult{}, nil
	}
}

// mustPublish publishes and fails the test on an error.
func mustPublish(t testing.TB, ml *ML, subject, data string, o PublishOptions) uint64 {
	t.Helper()
	r, err := publish(t, ml, subject, data, o)
	if err != nil {
		t.Fatalf("publish %q on %s: %v", data, subject, err)
	}
	return r.Seq
}

// asyncPublisher publishes without waiting and records the answers in
// call order.
type asyncPublisher struct {
	mu      sync.Mutex
	answers []pubAnswer
	pending sync.WaitGroup
}

func (p *asyncPublisher) publish(ml *ML, subject, data string, o PublishOptions) {
	p.publishThen(ml, subject, data, o, nil)
}

// publishThen is publish, calling then with the answer too.
func (p *asyncPublisher) publishThen(ml *ML, subject, data string, o PublishOptions, then func(PubResult, error)) {
	p.pending.Add(1)
	p.mu.Lock()
	i := len(p.answers)
	p.answers = append(p.answers, pubAnswer{})
	p.mu.Unlock()
	ml.Publish(subject, msgHeader(o.MsgID), []byte(data), o, func(r PubResult, err error) {
		p.mu.Lock()
		p.answers[i] = pubAnswer{r, err}
		p.mu.Unlock()
		if then != nil {
			then(r, err)
		}
		p.pending.Done()
	})
}

// wait waits for every answer and returns them.
func (p *asyncPublisher) wait(t testing.TB) []pubAnswer {
	t.Helper()
	ch := make(chan struct{})
	go func() { p.pending.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(60 * time.Second):
		t.Fatal("publishes not all answered")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]pubAnswer(nil), p.answers...)
}

// atomicTime is a settable clock for Config.Now.
type atomicTime struct{ v atomic.Int64 }

func (a *atomicTime) set(t time.Time) { a.v.Store(t.UnixNano()) }
func (a *atomicTime) now() time.Time  { return time.Unix(0, a.v.Load()).UTC() }

// ledgersOf lists the region's ledgers created for name (CustomTopic).
func (e *env) ledgersOf(name tenancy.Name) []int64 {
	e.t.Helper()
	mds, err := e.lc.List(testCtx(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []int64
	for _, md := range mds {
		if c, err := e.lc.Custom(testCtx(e.t), md.LedgerID); err == nil && c[CustomTopic] == name.String() {
			ids = append(ids, md.LedgerID)
		}
	}
	return ids
}
