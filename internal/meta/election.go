package meta

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("meta: campaign %q: %w", election, err)
	}
	sess, err := lease.newSession()
	if err != nil {
		return nil, err
	}
	// Stop waiting as soon as the lease is lost: a candidate whose key
	// expired can never win.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(lease.lostCtx, cancel)
	defer stop()

	// etcd's election recipe (concurrency.Election), with the put taken
	// out of the caller's context: etcd's Campaign sends its put under the
	// caller's context, and a put canceled in flight can still commit after
	// the cleanup's delete, leaving a candidate nobody acts for.
	createRev, err := s.join(election, value, lease)
	if err == nil {
		err = s.waitTurn(cctx, s.abs(election)+"/", createRev)
	}
	if err != nil {
		s.withdraw(election, lease, createRev)
		lease.dropSession(sess)
		if ctx.Err() == nil && lease.lostCtx.Err() != nil {
			return nil, fmt.Errorf("meta: campaign %q: %w", election, ErrLeaseLost)
		}
		return nil, s.wrapErr("campaign", election, err)
	}
	elec := concurrency.ResumeElection(sess, s.abs(election)+"/", s.candidateKey(election, lease), createRev)
	// waitTurn can return after the candidate's own key expired (it only
	// waits for the earlier keys to go), or was deleted and made again
	// (a later place in the queue). Check the key is still this
	// candidacy's, and take its mod revision for use in a Cond.
	resp, err := s.client.Get(cctx, elec.Key())
	if err == nil && len(resp.Kvs) > 0 && LeaseID(resp.Kvs[0].Lease) == lease.id && resp.Kvs[0].CreateRevision != createRev {
		lease.dropSession(sess)
		return nil, fmt.Errorf("meta: campaign %q: the candidate key was deleted and made again while waiting (revision %d, joined at %d)",
			election, resp.Kvs[0].CreateRevision, createRev)
	}
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

// candidateKey is lease's candidate key in election (absolute), named as
// etcd's concurrency.Election names it: the election's prefix, "/", and the
// lease id in hex.
func (s *Store) candidateKey(election string, lease *Lease) string {
	return fmt.Sprintf("%s/%x", s.abs(election), int64(lease.id))
}

// join puts lease's candidate key in election unless it is there already
// (then it only sets the value), and returns the key's create revision, its
// place in the queue. Bounded by candidateOpTimeout rather than by the
// caller's context, so a put is never abandoned in flight.
func (s *Store) join(election, value string, lease *Lease) (int64, error) {
	ctx, cancel := context.WithTimeout(s.ctx, candidateOpTimeout)
	defer cancel()
	k := s.candidateKey(election, lease)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, value, clientv3.WithLease(clientv3.LeaseID(lease.id)))).
		Else(clientv3.OpGet(k)).
		Commit()
	if err != nil {
		return 0, err
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return 0, fmt.Errorf("candidate key %s vanished", k)
	}
	rev := kvs[0].CreateRevision
	if testHookJoinFound != nil {
		testHookJoinFound()
	}
	if string(kvs[0].Value) != value {
		// Only onto the same key: if it went meanwhile, a plain put
		// would make a new one, later in the queue than rev says.
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(k), "=", rev)).
			Then(clientv3.OpPut(k, value, clientv3.WithLease(clientv3.LeaseID(lease.id)))).
			Commit()
		if err != nil {
			return rev, err
		}
		if !resp.Succeeded {
			return rev, fmt.Errorf("candidate key %s went while its value was set", k)
		}
	}
	return rev, nil
}

// waitTurn blocks until no key under prefix created before rev remains:
// each candidate waits for the last earlier one to be deleted, then looks
// again (etcd's election recipe). It returns ctx's error when ctx ends, or
// the watch's error (e.g. compaction).
func (s *Store) waitTurn(ctx context.Context, prefix string, rev int64) error {
	opts := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))
	for {
		resp, err := s.client.Get(ctx, prefix, opts...)
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		if err := s.waitDeleted(ctx, string(resp.Kvs[0].Key), resp.Header.Revision); err != nil {
			return err
		}
	}
}

// waitDeleted blocks until key is deleted at a revision after rev.
func (s *Store) waitDeleted(ctx context.Context, key string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range s.client.Watch(wctx, key, clientv3.WithRev(rev+1)) {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("watch ended while waiting for a delete")
}

// withdraw deletes lease's candidate key in election after a failed
// Campaign: a key left behind would later win the election with nobody
// acting as leader, for as long as the lease lives. With createRev (> 0,
// the key's create revision as join saw it) only that key goes, not one
// made again since; without (join's outcome unknown), any key of lease's.
// Best effort, bounded by candidateOpTimeout; a key it fails to delete
// still goes with the lease.
func (s *Store) withdraw(election string, lease *Lease, createRev int64) {
	ctx, cancel := context.WithTimeout(s.ctx, candidateOpTimeout)
	defer cancel()
	k := s.candidateKey(election, lease)
	cond := clientv3.Compare(clientv3.LeaseValue(k), "=", int64(lease.id))
	if createRev > 0 {
		cond = clientv3.Compare(clientv3.CreateRevision(k), "=", createRev)
	}
	_, _ = s.client.Txn(ctx).If(cond).Then(clientv3.OpDelete(k)).Commit()
}

// testHookJoinFound, when set by a test, runs when join finds the key
// already there, before it sets the value.
var testHookJoinFound func()

// candidateOpTimeout bounds join's put and withdraw's delete.
const candidateOpTimeout = 5 * time.Second

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
