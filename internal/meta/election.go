package meta

import (
	"context"
	"errors"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Leadership is won by Campaign and held until Resign or until its lease
// ends (which deletes the leader key and elects the next campaigner).
type Leadership struct {
	s     *Store
	lease *Lease
	elec  *concurrency.Election
	sess  *concurrency.Session
	key   string // relative
	rev   int64

	mu       sync.Mutex
	resigned bool
}

// Campaign joins election (a key relative to the Store's prefix; candidates
// are keys under election+"/") with value, bound to lease, and blocks until
// it is the leader, ctx ends, or the lease is lost (ErrLeaseLost).
// Candidates win in the order they joined. Campaigning again with a lease
// that already holds or awaits the same election resumes that candidacy.
func (s *Store) Campaign(ctx context.Context, election, value string, lease *Lease) (*Leadership, error) {
	if err := s.check("campaign", election, true); err != nil {
		return nil, err
	}
	if lease == nil || lease.s != s {
		return nil, errors.New("meta: campaign: lease is nil or from another Store")
	}
	sess, err := lease.newSession()
	if err != nil {
		return nil, err
	}
	// Stop waiting as soon as the lease is lost: a candidate whose key
	// expired can never win (etcd's Campaign would wait on regardless).
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(lease.lostCtx, cancel)
	defer stop()

	elec := concurrency.NewElection(sess, s.abs(election))
	if err := elec.Campaign(cctx, value); err != nil {
		lease.dropSession(sess)
		if ctx.Err() == nil && lease.lostCtx.Err() != nil {
			return nil, fmt.Errorf("meta: campaign %q: %w", election, ErrLeaseLost)
		}
		return nil, s.wrapErr("campaign", election, err)
	}
	// etcd's Campaign can return success after the candidate's own key
	// expired (it only waits for the earlier keys to go). Check the key is
	// still ours, and take its mod revision for use in a Cond.
	resp, err := s.client.Get(cctx, elec.Key())
	if err != nil || len(resp.Kvs) == 0 || LeaseID(resp.Kvs[0].Lease) != lease.id {
		// Best effort: the key is gone or going with the lease anyway.
		_ = elec.Resign(s.ctx)
		lease.dropSession(sess)
		if err != nil {
			return nil, s.wrapErr("campaign", election, err)
		}
		return nil, fmt.Errorf("meta: campaign %q: %w", election, ErrLeaseLost)
	}
	return &Leadership{
		s:     s,
		lease: lease,
		elec:  elec,
		sess:  sess,
		key:   s.rel([]byte(elec.Key())),
		rev:   resp.Kvs[0].ModRevision,
	}, nil
}

// Key is the leader key, relative to the Store's prefix.
func (l *Leadership) Key() string { return l.key }

// Rev is the leader key's mod revision when leadership was won:
// Cond{Key: l.Key(), ModRevision: l.Rev()} holds exactly while this
// leadership does.
func (l *Leadership) Rev() int64 { return l.rev }

// Cond is the condition "this leadership still holds", for Txn.
func (l *Leadership) Cond() Cond { return Cond{Key: l.key, ModRevision: l.rev} }

// Done is closed when the leadership's lease is lost (see Lease.Done).
func (l *Leadership) Done() <-chan struct{} { return l.lease.Done() }

// Resign deletes the leader key (if it is still this leadership's), letting
// the next candidate win. Idempotent. The lease stays alive.
func (l *Leadership) Resign(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.resigned {
		return nil
	}
	if l.s.isClosed() {
		return fmt.Errorf("meta: resign %q: %w", l.key, ErrClosed)
	}
	if err := l.elec.Resign(ctx); err != nil {
		return l.s.wrapErr("resign", l.key, err)
	}
	l.resigned = true
	l.lease.dropSession(l.sess)
	return nil
}

// Leader returns the current leader's value; ErrNotFound when nobody leads.
func (s *Store) Leader(ctx context.Context, election string) (string, error) {
	kv, err := s.LeaderKV(ctx, election)
	if err != nil {
		return "", err
	}
	return string(kv.Value), nil
}

// LeaderKV returns the current leader's key (relative), value and
// revisions; ErrNotFound when nobody leads.
func (s *Store) LeaderKV(ctx context.Context, election string) (KV, error) {
	if err := s.check("leader", election, true); err != nil {
		return KV{}, err
	}
	resp, err := s.client.Get(ctx, s.abs(election)+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return KV{}, s.wrapErr("leader", election, err)
	}
	if len(resp.Kvs) == 0 {
		return KV{}, fmt.Errorf("meta: leader %q: %w", election, ErrNotFound)
	}
	return s.kv(resp.Kvs[0]), nil
}
