package meta

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Lease is an etcd lease kept alive by the Store until Revoke, Orphan or
// Store.Close. Keys written WithLease(l.ID()) are deleted when it ends.
type Lease struct {
	s   *Store
	id  LeaseID
	ttl time.Duration

	// kaCtx scopes the keep-alive (ours and the election sessions');
	// canceling it stops renewing the lease.
	kaCtx    context.Context
	kaCancel context.CancelFunc
	// lostCtx is done when the lease is lost; its Done channel is Done().
	lostCtx  context.Context
	markLost context.CancelFunc

	mu             sync.Mutex
	stopped        bool // keep-alive stopped on purpose (Orphan, Revoke)
	revoked        bool // a Revoke succeeded
	sessions       map[*concurrency.Session]struct{}
	sessionsClosed bool // keep-alive over: no new sessions
}

// MinLeaseTTL is the shortest TTL GrantLease accepts. etcd would grant 1 s
// (its own floor is ceil(1.5 × election timeout): 1 s with a Fast
// Embedded), but the etcd client sends keep-alives from a loop that wakes
// every 500 ms and renews a lease once a third of its TTL has passed since
// the last reply. A 1 s lease is thus renewed every 0.5 s only while round
// trips stay under ~170 ms, and otherwise every 1 s, which races its expiry:
// 1 s leases expired while kept alive under go test -race on a loaded
// 2-core machine. At 2 s a renewal can be about a second late.
const MinLeaseTTL = 2 * time.Second

// GrantLease creates a lease with the given TTL and keeps it alive in the
// background until Revoke, Orphan or Store.Close.
//
// etcd counts TTLs in whole seconds: a fraction is rounded up. A TTL below
// MinLeaseTTL is rejected with ErrInvalidTTL. etcd itself raises a TTL below
// its floor, ceil(1.5 × election timeout) — 2 s with etcd's default 1 s
// election timeout, more on a cluster tuned for a WAN — and TTL reports
// what etcd actually granted.
func (s *Store) GrantLease(ctx context.Context, ttl time.Duration) (*Lease, error) {
	if ttl < MinLeaseTTL {
		return nil, fmt.Errorf("meta: grant lease: %w: %v is below the minimum %v (the etcd client renews at most every 500ms)", ErrInvalidTTL, ttl, MinLeaseTTL)
	}
	if err := s.check("grant lease", "", false); err != nil {
		return nil, err
	}
	secs := int64((ttl + time.Second - 1) / time.Second)
	resp, err := s.client.Grant(ctx, secs)
	if err != nil {
		return nil, s.wrapErr("grant lease", "", err)
	}
	if resp.TTL != secs {
		s.log.Debug("etcd raised lease TTL to its minimum", "asked", secs, "granted", resp.TTL)
	}
	l := &Lease{s: s, id: LeaseID(resp.ID), ttl: time.Duration(resp.TTL) * time.Second}
	if !s.goStart() {
		// Closing: nothing will keep it alive; it expires on its own.
		return nil, fmt.Errorf("meta: grant lease: %w", ErrClosed)
	}
	l.kaCtx, l.kaCancel = context.WithCancel(s.ctx)
	l.lostCtx, l.markLost = context.WithCancel(context.Background())
	ch, err := s.client.KeepAlive(l.kaCtx, resp.ID)
	if err != nil {
		l.kaCancel()
		l.markLost()
		s.wg.Done()
		return nil, s.wrapErr("keep lease alive", "", err)
	}
	go l.run(ch)
	return l, nil
}

// ID is the lease's id, for WithLease.
func (l *Lease) ID() LeaseID { return l.id }

// TTL is the TTL etcd granted (possibly above the one asked for).
func (l *Lease) TTL() time.Duration { return l.ttl }

// Done is closed when the lease is lost: it expired (after Orphan, or when
// keep-alives could not reach etcd for a TTL), it was revoked, or the Store
// was closed (nothing keeps it alive any more). Done is advisory: it can
// close up to about a second after etcd expired the lease, so a holder must
// make its writes conditional (Txn with a Cond on a key bound to the lease)
// rather than trust Done.
func (l *Lease) Done() <-chan struct{} { return l.lostCtx.Done() }

// Revoke ends the lease now; etcd deletes its keys. Idempotent: revoking a
// lease already revoked or expired returns nil. If the request fails the
// lease is no longer kept alive either way and expires within its TTL.
func (l *Lease) Revoke(ctx context.Context) error {
	l.mu.Lock()
	if l.revoked {
		l.mu.Unlock()
		return nil
	}
	l.stopped = true
	l.mu.Unlock()
	l.kaCancel()
	if l.s.isClosed() {
		return fmt.Errorf("meta: revoke lease %x: %w", l.id, ErrClosed)
	}
	_, err := l.s.client.Revoke(ctx, clientv3.LeaseID(l.id))
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return l.s.wrapErr("revoke lease", fmt.Sprintf("%x", l.id), err)
	}
	l.mu.Lock()
	l.revoked = true
	l.mu.Unlock()
	l.markLost()
	return nil
}

// Orphan stops keeping the lease alive without revoking it: the lease
// expires after its TTL, etcd deletes its keys, and Done closes once etcd
// reports the lease gone. This is how a holder crashing looks to everyone
// else; tests use it to exercise expiry.
func (l *Lease) Orphan() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	l.kaCancel()
}

// run owns the keep-alive channel. It ends when the lease is lost or the
// Store closes, and closes Done on the way out.
func (l *Lease) run(ch <-chan *clientv3.LeaseKeepAliveResponse) {
	defer l.s.wg.Done()
	defer l.markLost()
	// The etcd client closes ch when kaCtx ends, when etcd answers that the
	// lease is gone, or when no renewal succeeded for a TTL.
	for range ch {
	}
	l.closeSessions()
	l.mu.Lock()
	stopped := l.stopped
	l.mu.Unlock()
	if stopped && l.s.ctx.Err() == nil {
		l.awaitExpiry()
	}
}

// awaitExpiry polls etcd until the lease no longer exists (or the Store
// closes, or Revoke succeeded). TimeToLive's TTL cannot be used for this:
// a lease past its expiry but not yet revoked by etcd's lessor (it sweeps
// every 500 ms) reports TTL 0 or negative, and -1 is also what "not found"
// reports. GrantedTTL is 0 only when the lease is gone.
func (l *Lease) awaitExpiry() {
	for {
		wait := 50 * time.Millisecond
		resp, err := l.s.client.TimeToLive(l.s.ctx, clientv3.LeaseID(l.id))
		switch {
		case err == nil && resp.GrantedTTL == 0:
			return
		case err == nil && resp.TTL >= 2:
			wait = time.Duration(resp.TTL-1) * time.Second
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return
		case err != nil:
			if l.s.ctx.Err() != nil {
				return
			}
			wait = 200 * time.Millisecond
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-l.s.ctx.Done():
			t.Stop()
			return
		case <-l.lostCtx.Done():
			t.Stop()
			return
		}
	}
}

// newSession makes an etcd concurrency session on this lease, for an
// election. It shares kaCtx, so Orphan and Revoke stop its keep-alive too.
func (l *Lease) newSession() (*concurrency.Session, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sessionsClosed || l.lostCtx.Err() != nil {
		return nil, fmt.Errorf("meta: lease %x: %w", l.id, ErrLeaseLost)
	}
	sess, err := concurrency.NewSession(l.s.client,
		concurrency.WithLease(clientv3.LeaseID(l.id)),
		concurrency.WithContext(l.kaCtx))
	if err != nil {
		return nil, l.s.wrapErr("session", fmt.Sprintf("%x", l.id), err)
	}
	if l.sessions == nil {
		l.sessions = make(map[*concurrency.Session]struct{})
	}
	l.sessions[sess] = struct{}{}
	return sess, nil
}

// dropSession stops a session's keep-alive (not the lease's) and forgets it.
func (l *Lease) dropSession(sess *concurrency.Session) {
	l.mu.Lock()
	delete(l.sessions, sess)
	l.mu.Unlock()
	sess.Orphan()
}

// closeSessions stops every session's keep-alive goroutine (they end by
// themselves once kaCtx ends or the lease is gone; Orphan waits for them).
func (l *Lease) closeSessions() {
	l.mu.Lock()
	l.sessionsClosed = true
	sessions := l.sessions
	l.sessions = nil
	l.mu.Unlock()
	for sess := range sessions {
		sess.Orphan()
	}
}

// RevokeLeaseID ends another holder's lease by its id (e.g. one taken from
// a registration) at once, deleting its keys: a broker that the
// membership layer has declared dead loses what it owned without waiting
// for the lease's TTL. Revoking an unknown or expired lease returns nil.
// Errors: etcd unreachable within ctx, or ErrClosed.
func (s *Store) RevokeLeaseID(ctx context.Context, id LeaseID) error {
	if s.isClosed() {
		return fmt.Errorf("meta: revoke lease %x: %w", id, ErrClosed)
	}
	_, err := s.client.Revoke(ctx, clientv3.LeaseID(id))
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return s.wrapErr("revoke lease", fmt.Sprintf("%x", id), err)
	}
	return nil
}
