package ledger

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie"
	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/internal/testutil"
)

// deadBookies kills bookies for a writer as kill -9 does while their
// registrations live on in etcd (until their leases expire): every add to
// a killed bookie fails at once, as on a broken connection, and the
// bookie stays registered. It remembers which killed bookies failed an
// add (before the writer hears of it).
type deadBookies struct {
	mu     sync.Mutex
	dead   map[string]bool
	failed map[string]bool
}

func newDeadBookies() *deadBookies {
	return &deadBookies{dead: map[string]bool{}, failed: map[string]bool{}}
}

func (d *deadBookies) kill(ids ...string) {
	d.mu.Lock()
	for _, id := range ids {
		d.dead[id] = true
	}
	d.mu.Unlock()
}

func (d *deadBookies) hasFailed(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.failed[id]
}

func (d *deadBookies) hook(_ context.Context, op, b string, _ int64) error {
	if op != "add" {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.dead[b] {
		return nil
	}
	d.failed[b] = true
	return fmt.Errorf("bookie %s killed: %w", b, errInjected)
}

// orderedPlacement places on the first writable candidates not excluded,
// in id order (deterministic, where DefaultPlacement is random: the first
// choice after k1 is k2, then k3...), and records its answers. A choice
// of a bookie that has already failed an add is a violation: that bookie
// is in quarantine, so it must never be a candidate.
type orderedPlacement struct {
	dead *deadBookies

	mu         sync.Mutex
	chosen     [][]string
	short      int // attempts that found too few bookies
	violations []string
}

func (p *orderedPlacement) place(candidates []bookie.Registration, n int, exclude []string) ([]bookie.Registration, error) {
	var out []bookie.Registration
	var ids []string
	for _, r := range candidates {
		if len(out) < n && !r.ReadOnly && !slices.Contains(exclude, r.ID) {
			out = append(out, r)
			ids = append(ids, r.ID)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(out) < n {
		p.short++
		return nil, fmt.Errorf("%w: need %d, have %v", ErrNotEnoughBookies, n, ids)
	}
	for _, id := range ids {
		if p.dead.hasFailed(id) {
			p.violations = append(p.violations, fmt.Sprintf("chose %s (exclude %v), which had failed an add", id, exclude))
		}
	}
	p.chosen = append(p.chosen, ids)
	return out, nil
}

func (p *orderedPlacement) shortCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.short
}

func (p *orderedPlacement) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, v := range p.violations {
		t.Errorf("placement %s", v)
	}
	t.Logf("placements %v; %d found too few bookies", p.chosen, p.short)
}

// changes is how many times ledger id's metadata was written after its
// creation (its etcd key's version less one): one per ensemble change.
func (e *env) changes(t *testing.T, id int64) int64 {
	t.Helper()
	kv, err := e.store.Get(testCtx(t), LedgerKey(id))
	if err != nil {
		t.Fatal(err)
	}
	return kv.Version - 1
}

// appendGuarded appends entry i's payload and waits for its result,
// failing the test as soon as the ledger's metadata has been written
// more than maxChanges times since its creation (a writer churning
// ensemble changes).
func (e *env) appendGuarded(t *testing.T, w *Writer, i, maxChanges int64) (int64, error) {
	t.Helper()
	type result struct {
		id  int64
		err error
	}
	done := make(chan result, 1)
	w.AppendAsync(payload(i), func(id int64, err error) { done <- result{id, err} })
	var r result
	testutil.Eventually(t, fmt.Sprintf("append %d", i), 30*time.Second, func() bool {
		if n := e.changes(t, w.ID()); n > maxChanges {
			t.Fatalf("append %d: ledger metadata written %d times by ensemble changes (max %d); segments now %+v",
				i, n, maxChanges, w.Metadata().Segments)
		}
		select {
		case r = <-done:
			return true
		default:
			return false
		}
	})
	return r.id, r.err
}

// addBookie starts a new bookie id (registered at once).
func (e *env) addBookie(id string) {
	e.t.Helper()
	tb := &testBookie{id: id, dir: filepath.Join(e.t.TempDir(), id)}
	e.mu.Lock()
	e.bookies[id] = tb
	e.mu.Unlock()
	e.start(tb, "127.0.0.1:0")
}

// quarantineSetup: bookies k1..kn (ordered placement), a ledger with
// E=Qw=Qa=2 on k1 and k2 and entries 0..9 written, then killed are
// killed at once (still registered).
func quarantineSetup(t *testing.T, n int, mod func(*Config), killed ...string) (*env, *Writer, *orderedPlacement) {
	e := newEnv(t, n)
	ctx := testCtx(t)
	dead := newDeadBookies()
	ft := &faultTransport{}
	ft.setHook(dead.hook)
	p := &orderedPlacement{dead: dead}
	c := e.client(func(c *Config) {
		c.Transport, c.Placement = ft, p.place
		if mod != nil {
			mod(c)
		}
	})
	w, err := c.Create(ctx, CreateOptions{Ensemble: 2, WriteQuorum: 2, AckQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	if ens := w.Metadata().Segments[0].Ensemble; !slices.Equal(ens, []core.BookieID{"k1", "k2"}) {
		t.Fatalf("created on %v", ens)
	}
	for i := range int64(10) {
		if _, err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	dead.kill(killed...)
	return e, w, p
}

// TestDeadBookiesNotPlacedAgain: both bookies of a ledger's ensemble die
// at once, with the bookie placement picks first (k3); their
// registrations live on. Each change replaces a bookie that failed, and
// none of them is ever placed again (it is in quarantine), so the writer
// reaches the live spares (k4, k5) in at most one change per dead bookie
// and the append is confirmed — instead of swapping the dead bookies for
// one another in a loop of metadata writes until their registrations
// expire.
func TestDeadBookiesNotPlacedAgain(t *testing.T) {
	e, w, p := quarantineSetup(t, 5, nil, "k1", "k2", "k3")
	ctx := testCtx(t)
	if id, err := e.appendGuarded(t, w, 10, 3); err != nil || id != 10 {
		t.Fatalf("append after the bookies died = %d, %v", id, err)
	}
	after := e.changes(t, w.ID())
	for i := int64(11); i < 20; i++ {
		if _, err := w.Append(ctx, payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	md, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.check(t)
	last := md.Segments[len(md.Segments)-1].Ensemble
	if slices.ContainsFunc(last, func(b core.BookieID) bool { return b != "k4" && b != "k5" }) {
		t.Fatalf("last ensemble %v; want the live bookies k4 and k5", last)
	}
	if n := e.changes(t, w.ID()) - 1; n != after { // less the close
		t.Fatalf("%d ensemble changes after the append was confirmed, %d before", n, after)
	}
	t.Logf("%d ensemble changes; segments %+v", after, md.Segments)
}

// TestOnlyQuarantinedCandidates: a bookie of the ensemble (k1) and the
// only other one (k3) die at once, still registered. k1 is replaced by
// k3, which fails in turn; k1 is in quarantine, so there is no candidate:
// the writer waits, retrying placement without writing metadata, and
// either ends with ErrNotEnoughBookies after ReplaceTimeout or, once a
// new bookie registers, places it and goes on. Create, unlike this
// writer's replacements, falls back on quarantined bookies.
func TestOnlyQuarantinedCandidates(t *testing.T) {
	t.Run("gives up", func(t *testing.T) {
		e, w, p := quarantineSetup(t, 3, func(c *Config) { c.ReplaceTimeout = time.Second }, "k1", "k3")
		_, err := e.appendGuarded(t, w, 10, 1)
		if !errors.Is(err, ErrNotEnoughBookies) {
			t.Fatalf("append with no live spare: %v; want ErrNotEnoughBookies", err)
		}
		t.Logf("append failed: %v", err)
		p.check(t) // that it waited meanwhile is the next subtest's
		if n := e.changes(t, w.ID()); n != 1 {
			t.Fatalf("%d ensemble changes; want 1 (k1 → k3)", n)
		}
		if lac := w.LAC(); lac != 9 {
			t.Fatalf("LAC %d", lac)
		}
		if md, err := w.Close(testCtx(t)); !errors.Is(err, ErrNotEnoughBookies) || md.State != core.StateOpen {
			t.Fatalf("Close of the ended writer = %+v, %v", md, err)
		}
		// Create takes quarantined bookies rather than fail, after every
		// bookie out of quarantine: k2 first, then the ordered placement's
		// first quarantined one, k1.
		w2, err := w.c.Create(testCtx(t), CreateOptions{Ensemble: 2, WriteQuorum: 2, AckQuorum: 2})
		if err != nil {
			t.Fatalf("Create with bookies in quarantine: %v", err)
		}
		if ens := w2.Metadata().Segments[0].Ensemble; !slices.Equal(ens, []core.BookieID{"k2", "k1"}) {
			t.Fatalf("created on %v; want k2 (out of quarantine) and then k1", ens)
		}
	})
	t.Run("spare appears", func(t *testing.T) {
		e, w, p := quarantineSetup(t, 3, nil, "k1", "k3")
		res := make(chan error, 1)
		w.AppendAsync(payload(10), func(_ int64, err error) { res <- err })
		testutil.Eventually(t, "placement retried without candidates", 20*time.Second, func() bool {
			if n := e.changes(t, w.ID()); n > 1 {
				t.Fatalf("%d ensemble changes while only quarantined bookies were left; segments %+v", n, w.Metadata().Segments)
			}
			return p.shortCount() >= 2
		})
		select {
		case err := <-res:
			t.Fatalf("append ended while waiting for a bookie: %v", err)
		default:
		}
		if n := e.changes(t, w.ID()); n != 1 {
			t.Fatalf("%d ensemble changes; want 1 (k1 → k3)", n)
		}
		e.addBookie("k4")
		if err := <-res; err != nil {
			t.Fatalf("append once k4 registered: %v", err)
		}
		md, err := w.Close(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		p.check(t)
		if last := md.Segments[len(md.Segments)-1].Ensemble; !slices.Equal(last, []core.BookieID{"k4", "k2"}) {
			t.Fatalf("last ensemble %v; want [k4 k2]", last)
		}
		if n := e.changes(t, w.ID()) - 1; n != 2 { // less the close
			t.Fatalf("%d ensemble changes; want 2 (k1 → k3 → k4)", n)
		}
	})
}

// TestSpareFailedByAnotherWriterIsPlaced: a healthy bookie (k3) that
// failed one add of another writer during a quick restart is the only
// spare when k1 dies afterwards: the Client's quarantine holds k3, but the
// writer k1 failed places it anyway (too few others), and goes on at once
// — even with ReplaceTimeout (10 s) below the quarantine (20 s).
func TestSpareFailedByAnotherWriterIsPlaced(t *testing.T) {
	replaceTimeout := 10 * time.Second
	e := newEnv(t, 3)
	ctx := testCtx(t)
	p := &orderedPlacement{dead: newDeadBookies()}
	c := e.client(func(c *Config) { c.Placement = p.place; c.ReplaceTimeout = replaceTimeout })
	opts := CreateOptions{Ensemble: 2, WriteQuorum: 2, AckQuorum: 2}
	registered := func(id string, want bool) {
		testutil.Eventually(t, id+" registration", 10*time.Second, func() bool {
			regs, err := bookie.ListRegistrations(ctx, e.store)
			return err == nil && slices.ContainsFunc(regs, func(r bookie.Registration) bool { return r.ID == id }) == want
		})
	}

	e.stop("k1")
	registered("k1", false)
	w2, err := c.Create(ctx, opts) // on k2, k3
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w2.Append(ctx, payload(0)); err != nil {
		t.Fatal(err)
	}
	e.restart("k1", false)
	registered("k1", true)
	w1, err := c.Create(ctx, opts) // on k1, k2
	if err != nil {
		t.Fatal(err)
	}
	if ens := w1.Metadata().Segments[0].Ensemble; !slices.Equal(ens, []core.BookieID{"k1", "k2"}) {
		t.Fatalf("w1 on %v", ens)
	}
	if _, err := w1.Append(ctx, payload(0)); err != nil {
		t.Fatal(err)
	}

	// k3 restarts quickly (same disk, same instance): w2 fails it once
	// and moves to k1.
	e.stop("k3")
	if _, err := w2.Append(ctx, payload(1)); err != nil {
		t.Fatalf("w2 append while k3 restarts: %v", err)
	}
	if _, err := w2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	e.restart("k3", false)
	registered("k3", true)
	if _, err := e.direct("k3").Info(ctx, false); err != nil {
		t.Fatalf("k3 is up: %v", err)
	}

	// Now k1 dies for good: k3, healthy and registered, is the only spare.
	e.stop("k1")
	start := time.Now()
	_, err = w1.Append(ctx, payload(1))
	t.Logf("w1 append after k1 died: %v after %v; last ensemble %v", err, time.Since(start).Round(time.Millisecond),
		w1.Metadata().Segments[len(w1.Metadata().Segments)-1].Ensemble)
	if errors.Is(err, ErrNotEnoughBookies) {
		t.Fatalf("writer ended although the healthy bookie k3 was available: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("append stalled %v with a healthy spare registered", d)
	}
}

// TestCreatePrefersBookiesOutOfQuarantine: with too few bookies out of
// quarantine, Create's placement takes all of those first and only the
// rest among the quarantined.
func TestCreatePrefersBookiesOutOfQuarantine(t *testing.T) {
	e := newEnv(t, 4)
	ctx := testCtx(t)
	c := e.client()
	regs, err := bookie.ListRegistrations(ctx, e.store)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range regs {
		if r.ID == "k3" || r.ID == "k4" {
			c.quarantine.add(core.BookieID(r.ID), r.Instance, time.Now())
		}
	}
	for i := range 40 {
		chosen, err := c.choose(ctx, 3, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range chosen {
			ids = append(ids, r.ID)
		}
		if !slices.Contains(ids, "k1") || !slices.Contains(ids, "k2") {
			t.Fatalf("try %d: Create's placement chose %v with k1, k2 free and k3, k4 in quarantine", i, ids)
		}
	}
}

// revive undoes kill for bookies that came back (as new instances).
func (d *deadBookies) revive(ids ...string) {
	d.mu.Lock()
	for _, id := range ids {
		delete(d.dead, id)
		delete(d.failed, id)
	}
	d.mu.Unlock()
}

// TestNewInstanceOfAFailedBookieIsPlaced: k1 fails the writer and is
// replaced by k3; k1 then comes back on an empty disk (a new instance at
// the same address) and k3 dies. The writer's quarantine holds the
// instance that failed, not the bookie id, so the new k1 replaces k3 at
// once instead of after BookieQuarantine (a newcomer's trial saw a 17 s
// publish stall). ReplaceTimeout below the quarantine makes the old
// behaviour fail the append.
func TestNewInstanceOfAFailedBookieIsPlaced(t *testing.T) {
	e, w, p := quarantineSetup(t, 3, func(c *Config) {
		c.ReplaceTimeout, c.BookieQuarantine = 5*time.Second, time.Minute
	})
	ctx := testCtx(t)
	dead := p.dead
	oldInstance := e.bookie("k1").b.Instance()
	dead.kill("k1")
	if _, err := w.Append(ctx, payload(10)); err != nil {
		t.Fatalf("append after k1 failed: %v", err)
	}
	if ens := w.Metadata().Segments[len(w.Metadata().Segments)-1].Ensemble; !slices.Equal(ens, []core.BookieID{"k3", "k2"}) {
		t.Fatalf("ensemble after k1 failed %v; want [k3 k2]", ens)
	}
	e.stop("k1")
	e.restart("k1", true)
	if e.bookie("k1").b.Instance() == oldInstance {
		t.Fatal("k1 restarted on an empty disk kept its instance")
	}
	dead.revive("k1")
	dead.kill("k3")
	if _, err := w.Append(ctx, payload(11)); err != nil {
		t.Fatalf("append after k3 failed, with k1's new instance registered: %v", err)
	}
	md, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.check(t)
	if last := md.Segments[len(md.Segments)-1].Ensemble; !slices.Equal(last, []core.BookieID{"k1", "k2"}) {
		t.Fatalf("last ensemble %v; want [k1 k2] (k1's new instance)", last)
	}
}
