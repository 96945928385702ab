package meta

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/testutil"
)

type campaignResult struct {
	l   *Leadership
	err error
}

func campaign(s *Store, ctx context.Context, election, value string, lease *Lease) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	go func() {
		l, err := s.Campaign(ctx, election, value, lease)
		ch <- campaignResult{l, err}
	}()
	return ch
}

func grant(t *testing.T, s *Store) *Lease {
	t.Helper()
	l, err := s.GrantLease(testCtx(t), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Revoke(context.Background()) })
	return l
}

// waitCandidates waits until n candidates are registered in election.
func waitCandidates(t *testing.T, s *Store, election string, n int) {
	t.Helper()
	ctx := testCtx(t)
	testutil.Eventually(t, "candidates to register", 5*time.Second, func() bool {
		kvs, err := s.List(ctx, election+"/")
		return err == nil && len(kvs) == n
	})
}

func notReturned(t *testing.T, ch <-chan campaignResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("second campaigner returned while the first leads: %+v", r)
	default:
	}
}

func TestElectionResign(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := testCtx(t)
	la, lb := grant(t, s), grant(t, s)
	if _, err := s.Leader(ctx, "el"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("leader before any campaign: %v", err)
	}
	a, err := s.Campaign(ctx, "el", "broker-a", la)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Leader(ctx, "el"); err != nil || v != "broker-a" {
		t.Fatalf("leader = %q, %v", v, err)
	}
	bch := campaign(s, ctx, "el", "broker-b", lb)
	waitCandidates(t, s, "el", 2)
	notReturned(t, bch)

	// The leadership works as a write condition while held.
	if _, err := s.Txn(ctx, []Cond{a.Cond()}, OpPut("state", []byte("by a"))); err != nil {
		t.Fatalf("write conditioned on leadership: %v", err)
	}
	notReturned(t, bch)
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatalf("second resign: %v", err)
	}
	r := recv(t, bch, 5*time.Second, "second campaigner to win")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if v, err := s.Leader(ctx, "el"); err != nil || v != "broker-b" {
		t.Fatalf("leader = %q, %v", v, err)
	}
	kv, err := s.LeaderKV(ctx, "el")
	if err != nil || kv.Key != r.l.Key() || kv.ModRevision != r.l.Rev() {
		t.Fatalf("LeaderKV = %+v, %v; want key %s rev %d", kv, err, r.l.Key(), r.l.Rev())
	}
	if _, err := s.Txn(ctx, []Cond{{Key: a.Key(), ModRevision: a.Rev()}}, OpPut("state", []byte("by a again"))); !errors.Is(err, ErrConflict) {
		t.Fatalf("write conditioned on resigned leadership: %v", err)
	}
	if err := r.l.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Leader(ctx, "el"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("leader after everyone resigned: %v", err)
	}
	// The leases outlive resignation.
	select {
	case <-la.Done():
		t.Fatal("resign ended the lease")
	default:
	}
}

func TestElectionLeaderLeaseRevoked(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := testCtx(t)
	la, lb := grant(t, s), grant(t, s)
	a, err := s.Campaign(ctx, "el", "a", la)
	if err != nil {
		t.Fatal(err)
	}
	bch := campaign(s, ctx, "el", "b", lb)
	waitCandidates(t, s, "el", 2)
	notReturned(t, bch)
	if err := la.Revoke(ctx); err != nil {
		t.Fatal(err)
	}
	r := recv(t, bch, 5*time.Second, "second campaigner to win")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if v, _ := s.Leader(ctx, "el"); v != "b" {
		t.Fatalf("leader = %q, want b", v)
	}
	select {
	case <-a.Done():
	default:
		t.Fatal("old leadership's Done not closed")
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatalf("resign after losing the lease: %v", err)
	}
	if v, _ := s.Leader(ctx, "el"); v != "b" {
		t.Fatalf("old leader's resign removed the new leader: %q", v)
	}
}

func TestCampaignEndsWhenLeaseLostOrCanceled(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := testCtx(t)
	la, lb, lc := grant(t, s), grant(t, s), grant(t, s)
	if _, err := s.Campaign(ctx, "el", "a", la); err != nil {
		t.Fatal(err)
	}

	bch := campaign(s, ctx, "el", "b", lb)
	waitCandidates(t, s, "el", 2)
	if err := lb.Revoke(ctx); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, bch, 5*time.Second, "campaign with a lost lease"); !errors.Is(r.err, ErrLeaseLost) {
		t.Fatalf("campaign after its lease was revoked: %+v, want ErrLeaseLost", r)
	}
	if _, err := s.Campaign(ctx, "el", "b", lb); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("campaign with a revoked lease: %v", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	cch := campaign(s, cctx, "el", "c", lc)
	waitCandidates(t, s, "el", 2)
	cancel()
	if r := recv(t, cch, 5*time.Second, "canceled campaign"); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("canceled campaign: %+v", r)
	}
	waitCandidates(t, s, "el", 1) // the canceled candidate withdrew
	if v, _ := s.Leader(ctx, "el"); v != "a" {
		t.Fatalf("leader = %q, want a", v)
	}
}

// A campaign canceled at any moment, even while its put is in flight,
// leaves no candidate key behind: such a key would later win the election
// with nobody acting as leader.
func TestCanceledCampaignLeavesNoCandidate(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := testCtx(t)
	la, lc := grant(t, s), grant(t, s)
	if _, err := s.Campaign(ctx, "el", "a", la); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		cctx, cancel := context.WithCancel(ctx)
		ch := campaign(s, cctx, "el", "c", lc)
		// Cancel at moments from before the put is sent to after it
		// committed: yield a varying number of times first.
		for range (i % 40) * 25 {
			runtime.Gosched()
		}
		cancel()
		r := recv(t, ch, 5*time.Second, "canceled campaign")
		if r.err == nil {
			t.Fatalf("round %d: campaign won while a leads", i)
		}
		kvs, err := s.List(ctx, "el/")
		if err != nil {
			t.Fatal(err)
		}
		if len(kvs) != 1 || string(kvs[0].Value) != "a" {
			t.Fatalf("round %d: candidates after a canceled campaign: %+v (want only a); campaign: %v", i, kvs, r.err)
		}
	}
}

// Resuming a candidacy with a new value, while the key goes (here: the
// leadership it resumes resigns), must not make the key again: a new key
// is later in the queue than the revision the campaign waits on, and it
// would win at once, beside whoever leads by then.
func TestResumedCampaignDoesNotRemakeAGoneKey(t *testing.T) {
	s := openStore(t) // not parallel: it sets testHookJoinFound
	ctx := testCtx(t)
	la := grant(t, s)
	l1, err := s.Campaign(ctx, "el", "a", la)
	if err != nil {
		t.Fatal(err)
	}
	testHookJoinFound = func() {
		testHookJoinFound = nil
		if err := l1.Resign(ctx); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { testHookJoinFound = nil })
	if l2, err := s.Campaign(ctx, "el", "b", la); err == nil {
		t.Fatalf("campaign won on a key made again: %q", l2.Key())
	}
	kvs, err := s.List(ctx, "el/")
	if err != nil {
		t.Fatal(err)
	}
	if len(kvs) != 0 {
		t.Fatalf("candidates left: %+v", kvs)
	}
}
