package meta

import (
	"errors"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/testutil"
)

// Expiry (not revocation): once nobody keeps the lease alive, etcd deletes
// its keys after the TTL and Done closes.
func TestLeaseExpiryRemovesKeys(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := testCtx(t)
	l, err := s.GrantLease(ctx, MinLeaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	if l.TTL() != MinLeaseTTL {
		t.Fatalf("TTL = %v, want %v", l.TTL(), MinLeaseTTL)
	}
	if _, err := s.Put(ctx, "owned", []byte("x"), WithLease(l.ID())); err != nil {
		t.Fatal(err)
	}
	kv, err := s.Get(ctx, "owned")
	if err != nil || kv.Lease != l.ID() {
		t.Fatalf("get = %+v, %v; want lease %x", kv, err, l.ID())
	}
	// Outlives its TTL while the Store renews it.
	holdFor(t, l.TTL()+time.Second, "leased key present while kept alive", func() error {
		select {
		case <-l.Done():
			return errors.New("lease lost while kept alive")
		default:
		}
		_, err := s.Get(ctx, "owned")
		return err
	})

	start := time.Now()
	l.Orphan()
	testutil.Eventually(t, "the leased key to be deleted", 10*time.Second, func() bool {
		_, err := s.Get(ctx, "owned")
		return errors.Is(err, ErrNotFound)
	})
	if !closedWithin(l.Done(), 10*time.Second) {
		t.Fatal("Done not closed after expiry")
	}
	t.Logf("expired %v after Orphan", time.Since(start).Round(time.Millisecond))
	if _, err := s.Put(ctx, "late", nil, WithLease(l.ID())); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("put with expired lease: %v, want ErrLeaseLost", err)
	}
	if err := l.Revoke(ctx); err != nil {
		t.Fatalf("revoke after expiry: %v", err)
	}
}

func TestLeaseRevoke(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := testCtx(t)
	l, err := s.GrantLease(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CAS(ctx, "a", nil, 0, WithLease(l.ID())); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Txn(ctx, nil, OpPut("b", nil, WithLease(l.ID()))); err != nil {
		t.Fatal(err)
	}
	if err := l.Revoke(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed when Revoke returned")
	}
	if kvs, err := s.List(ctx, ""); err != nil || len(kvs) != 0 {
		t.Fatalf("keys left after revoke: %v, %v", kvs, err)
	}
	if err := l.Revoke(ctx); err != nil {
		t.Fatalf("second revoke: %v", err)
	}
	if _, err := s.Put(ctx, "c", nil, WithLease(l.ID())); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("put with revoked lease: %v", err)
	}
}

func TestGrantLeaseTTL(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := testCtx(t)
	for _, ttl := range []time.Duration{0, 500 * time.Millisecond, time.Second, MinLeaseTTL - 1} {
		if _, err := s.GrantLease(ctx, ttl); !errors.Is(err, ErrInvalidTTL) {
			t.Fatalf("%v lease: %v, want ErrInvalidTTL", ttl, err)
		}
	}
	l, err := s.GrantLease(ctx, 2500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if l.TTL() != 3*time.Second {
		t.Fatalf("TTL = %v, want 2.5s rounded up to 3s", l.TTL())
	}
	// etcd's own floor: 1 s on this Fast (100 ms election timeout) etcd.
	resp, err := s.client.Grant(ctx, 1)
	if err != nil || resp.TTL != 1 {
		t.Fatalf("raw 1s grant: %+v, %v", resp, err)
	}
	if _, err := s.client.Revoke(ctx, resp.ID); err != nil {
		t.Fatal(err)
	}
	if err := l.Revoke(ctx); err != nil {
		t.Fatal(err)
	}
}
