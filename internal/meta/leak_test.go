package meta

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Close stops and waits for everything the Store started: keep-alives,
// election sessions, watches, and campaigns blocked at the time. Not
// parallel, so that the snapshot of running goroutines is this test's own.
func TestStoreCloseStopsItsGoroutines(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Endpoints = []string{testEtcd.ClientURL()}
	cfg.Prefix = testPrefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// etcd starts its gRPC server, and the leader monitor behind
	// WithRequireLeader streams, in goroutines of its own right after it
	// reports ready. Serve one watch first so they are part of the snapshot.
	warm, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	wch := warm.Watch(wctx, "", 0)
	if _, err := warm.Put(ctx, "warm", nil); err != nil {
		t.Fatal(err)
	}
	recv(t, wch, 5*time.Second, "warm-up event")
	wcancel()
	warm.Close()
	before := goleak.IgnoreCurrent()

	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	la, err := s.GrantLease(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := s.GrantLease(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Campaign(ctx, "el", "a", la); err != nil {
		t.Fatal(err)
	}
	blocked := make(chan error, 1)
	go func() {
		_, err := s.Campaign(ctx, "el", "b", lb)
		blocked <- err
	}()
	waitCandidates(t, s, "el", 2)
	w := s.Watch(ctx, "", 0)
	orphan, err := s.GrantLease(ctx, MinLeaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	orphan.Orphan() // its goroutine now waits for the expiry

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, blocked, 5*time.Second, "blocked campaign"); !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrClosed) {
		t.Fatalf("campaign blocked across Close returned %v", err)
	}
	if !closedWithin(w, time.Second) {
		t.Fatal("watch open after Close")
	}
	for _, l := range []*Lease{la, lb, orphan} {
		if !closedWithin(l.Done(), time.Second) {
			t.Fatal("lease Done open after Close")
		}
	}
	// The etcd server's handlers for this client's streams end when it
	// notices the closed connection; VerifyNone retries meanwhile.
	goleak.VerifyNone(t, before)
}
