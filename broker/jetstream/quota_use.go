package jetstream

import (
	"time"

	"github.com/stratamesh/strata/tenancy/quota"
)

// quotaUseInterval is how often the broker reports its tenants' counts to
// the quota gate (Quotas.SetUse): the quota coordinator's interval, so a
// coordinator's sum is at most one interval old.
const quotaUseInterval = quota.DefaultInterval

// tenantUse is one tenant's use on this broker, in the units of its
// quota kinds.
type tenantUse struct {
	topics, consumers, bytes float64
}

// quotaUse is, per tenant, what the topics this broker serves as owner
// hold now: the topics, their consumers (durable and ephemeral; the
// replicator cursors, which are not consumers, never count) and the bytes
// they store. Bytes are the managed ledger's live bytes (mledger.State:
// every confirmed message not trimmed, whether its ledger is on the
// bookies or offloaded to the tier), counted once per region's copy, not
// once per bookie replica; a stream's declared max_bytes counts nothing
// until messages are stored. Topics still opening are not counted yet.
func (s *Service) quotaUse() map[string]tenantUse {
	s.mu.Lock()
	topics := make([]*topic, 0, len(s.topics))
	for _, t := range s.topics {
		topics = append(topics, t)
	}
	s.mu.Unlock()
	use := map[string]tenantUse{}
	for _, t := range topics {
		if !t.isReady() {
			continue
		}
		t.mu.Lock()
		ml, consumers := t.ml, len(t.consumers)
		t.mu.Unlock()
		u := use[t.name.Tenant]
		u.topics++
		u.consumers += float64(consumers)
		if ml != nil {
			u.bytes += float64(ml.State().Bytes)
		}
		use[t.name.Tenant] = u
	}
	return use
}

// reportUse tells q each tenant's use, and 0 for the tenants of the
// previous report that have nothing on this broker any more.
func reportUse(q Quotas, use, last map[string]tenantUse) {
	for tenant, u := range use {
		q.SetUse(tenant, quota.Topics, u.topics)
		q.SetUse(tenant, quota.Consumers, u.consumers)
		q.SetUse(tenant, quota.Storage, u.bytes)
	}
	for tenant := range last {
		if _, ok := use[tenant]; !ok {
			q.SetUse(tenant, quota.Topics, 0)
			q.SetUse(tenant, quota.Consumers, 0)
			q.SetUse(tenant, quota.Storage, 0)
		}
	}
}

// quotaUseLoop reports the tenants' use every quotaUseInterval while the
// service runs (Config.Quotas set), and zero for every tenant when it
// stops (its topics were handed over by then).
func (s *Service) quotaUseLoop() {
	q := s.cfg.Quotas
	if q == nil {
		return
	}
	tick := time.NewTicker(quotaUseInterval)
	defer tick.Stop()
	var last map[string]tenantUse
	for {
		use := s.quotaUse()
		reportUse(q, use, last)
		last = use
		select {
		case <-s.ctx.Done():
			reportUse(q, nil, last)
			return
		case <-tick.C:
		}
	}
}
