package jetstream

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/internal/meta"
)

// ownersPrefix holds one election per topic: "owners/<t>/<ns>/<topic>",
// whose candidates are keys under it, bound to their broker's lease; the
// oldest candidate owns the topic.
const ownersPrefix = "owners/"

func ownerElection(n mledger.Name) string { return ownersPrefix + n.String() }

// ownerCache mirrors the ownership elections from a watch, so finding a
// topic's owner on the publish path never waits for etcd.
type ownerCache struct {
	mu    sync.RWMutex
	cands map[mledger.Name]map[string]candidate // by candidate key
}

type candidate struct {
	value string // broker name
	rev   int64  // create revision: the oldest leads
}

func newOwnerCache() *ownerCache {
	return &ownerCache{cands: map[mledger.Name]map[string]candidate{}}
}

// parseCandidate splits "owners/t/ns/topic/<id>" into the topic.
func parseCandidate(key string) (mledger.Name, bool) {
	rest, ok := strings.CutPrefix(key, ownersPrefix)
	if !ok {
		return mledger.Name{}, false
	}
	p := strings.Split(rest, "/")
	if len(p) != 4 {
		return mledger.Name{}, false
	}
	return mledger.Name{Tenant: p[0], Namespace: p[1], Topic: p[2]}, true
}

func (o *ownerCache) load(ctx context.Context, st *meta.Store) (int64, error) {
	kvs, rev, err := st.ListWithRev(ctx, ownersPrefix)
	if err != nil {
		return 0, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, kv := range kvs {
		o.putLocked(kv)
	}
	return rev, nil
}

func (o *ownerCache) putLocked(kv meta.KV) {
	n, ok := parseCandidate(kv.Key)
	if !ok {
		return
	}
	m := o.cands[n]
	if m == nil {
		m = map[string]candidate{}
		o.cands[n] = m
	}
	m[kv.Key] = candidate{value: string(kv.Value), rev: kv.CreateRevision}
}

func (o *ownerCache) apply(ev meta.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if ev.Type == meta.EventPut {
		o.putLocked(ev.KV)
		return
	}
	n, ok := parseCandidate(ev.KV.Key)
	if !ok {
		return
	}
	if m := o.cands[n]; m != nil {
		delete(m, ev.KV.Key)
		if len(m) == 0 {
			delete(o.cands, n)
		}
	}
}

// leader returns the broker that owns topic n ("" when none campaigns).
func (o *ownerCache) leader(n mledger.Name) string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	var best candidate
	for _, c := range o.cands[n] {
		if best.rev == 0 || c.rev < best.rev {
			best = c
		}
	}
	return best.value
}

// watch follows the elections from rev until ctx ends, re-listing after a
// compaction.
func (o *ownerCache) watch(ctx context.Context, st *meta.Store, rev int64, log *slog.Logger) {
	for ctx.Err() == nil {
		for ev := range st.Watch(ctx, ownersPrefix, rev) {
			if ev.Type != meta.EventPut && ev.Type != meta.EventDelete {
				break
			}
			o.apply(ev)
			rev = ev.Revision + 1
		}
		if ctx.Err() != nil {
			return
		}
		log.Info("re-listing topic owners after the watch ended")
		fresh := newOwnerCache()
		r, err := fresh.load(ctx, st)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		o.mu.Lock()
		o.cands = fresh.cands
		o.mu.Unlock()
		rev = r + 1
	}
}

// renewLease grants the broker's ownership lease.
func (s *Service) renewLease(ctx context.Context) error {
	l, err := s.cfg.Store.GrantLease(ctx, s.cfg.LeaseTTL)
	if err != nil {
		return err
	}
	s.leaseMu.Lock()
	s.lease = l
	close(s.leaseOK)
	s.leaseMu.Unlock()
	return nil
}

// currentLease returns a live lease, waiting for keepLease to replace a
// lost one.
func (s *Service) currentLease(ctx context.Context) (*meta.Lease, error) {
	for {
		s.leaseMu.Lock()
		l, ok := s.lease, s.leaseOK
		s.leaseMu.Unlock()
		select {
		case <-ok:
			select {
			case <-l.Done():
			default:
				return l, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// keepLease replaces the ownership lease when it is lost (etcd expired it:
// this broker was cut off or frozen for longer than its TTL). Losing it
// ends every leadership it carried; each topic's campaign notices and
// stops serving the topic.
func (s *Service) keepLease() {
	for {
		s.leaseMu.Lock()
		l := s.lease
		s.leaseMu.Unlock()
		select {
		case <-s.ctx.Done():
			return
		case <-l.Done():
		}
		s.cfg.Logger.Warn("ownership lease lost; taking a new one")
		s.leaseMu.Lock()
		s.leaseOK = make(chan struct{})
		s.leaseMu.Unlock()
		for s.ctx.Err() == nil {
			ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
			err := s.renewLease(ctx)
			cancel()
			if err == nil {
				break
			}
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

// startCampaign makes this broker a candidate owner of topic n, once.
func (s *Service) startCampaign(n mledger.Name) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || s.campaigns[n] != nil {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.campaigns[n] = cancel
	s.goRun(func() { s.campaign(ctx, n) })
}

// stopCampaign withdraws from topic n (it was deleted).
func (s *Service) stopCampaign(n mledger.Name) {
	s.mu.Lock()
	cancel := s.campaigns[n]
	delete(s.campaigns, n)
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// campaign is one topic's ownership loop on this broker: wait to lead,
// open the topic, serve it until it is lost, deleted or the broker stops,
// then campaign again (unless deleted or stopping).
func (s *Service) campaign(ctx context.Context, n mledger.Name) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		lease, err := s.currentLease(ctx)
		if err != nil {
			return
		}
		lead, err := s.cfg.Store.Campaign(ctx, ownerElection(n), s.cfg.Name, lease)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.sleep(ctx, backoff)
			continue
		}
		t, err := s.openTopic(ctx, n, lead)
		if err != nil {
			s.cfg.Logger.Warn("opening an owned topic failed; resigning", "topic", n.String(), "err", err)
			s.resign(lead)
			s.sleep(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		select {
		case <-t.done:
		case <-lead.Done():
			t.lost(errLeadershipLost)
		case <-ctx.Done():
		}
		s.mu.Lock()
		closing := s.closing
		s.mu.Unlock()
		if !closing {
			_ = t.shutdown(context.Background(), false)
		}
		<-t.done
		s.mu.Lock()
		if s.topics[n] == t {
			delete(s.topics, n)
		}
		s.mu.Unlock()
		s.resign(lead)
		if t.deleted.Load() {
			return
		}
	}
}

func (s *Service) resign(lead *meta.Leadership) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = lead.Resign(ctx)
}

func (s *Service) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
