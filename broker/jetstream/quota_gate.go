package jetstream

import (
	"errors"
	"fmt"

	"github.com/stratamesh/strata/broker"
	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/tenancy/quota"
)

// Enforcing Config.Quotas (ARCHITECTURE §5) in the JetStream layer. The
// gate decides; this file asks it at the four points where a tenant's
// use grows, and turns a refusal into JetStream error 10429 (its
// description is the gate's text: the tenant, the quota, its limit and
// its use):
//
//   - a client publish stored to a topic, at the topic's owner, before it
//     is handed to the managed ledger (quotaRefusal): storage first
//     (Check quota.Storage), then the publish rate and bytes
//     (AdmitPublish), so a publish refused for storage spends no rate. A
//     replicated copy (repl_recv.go) is never charged here: publish rates
//     count at the origin only, and storage is measured, not charged (the
//     use report, quota_use.go). A refused publish is not stored; the
//     PubAck carries the error.
//   - a topic created by STREAM.CREATE, by a publish into a namespace
//     that auto-creates topics, or by the admin API (Check quota.Topics,
//     1). Topics created because another region replicates them are not
//     checked.
//   - a consumer created by CONSUMER.CREATE (the admin API's
//     subscriptions too): Check quota.Consumers, 1. Replicated
//     subscriptions created because another region shipped them are not
//     checked.
//
// A message routed as core NATS too (a stored publish also reaches the
// subject's core subscribers, broker.HookStored) is delivered to them
// even when the owner then refuses to store it: the broker routes it
// before the owner decides.

// ErrQuotaExceeded wraps a tenant quota's refusal of an admin API write
// (CreateTopic): the gate's error follows it.
var ErrQuotaExceeded = errors.New("jetstream: tenant quota exceeded")

// quotaRefusal is the tenant quota's answer to storing m in t (nil:
// store it). m is a client publish at the origin region (t.publish),
// never a replicated copy. Storage is checked before the publish is
// charged, so a publish refused for storage spends none of the tenant's
// publish rate.
func (t *topic) quotaRefusal(m message) error {
	q := t.s.cfg.Quotas
	if q == nil {
		return nil
	}
	size := len(m.hdr) + len(m.data)
	if err := q.Check(t.name.Tenant, quota.Storage, float64(size)); err != nil {
		return err
	}
	return q.AdmitPublish(t.name.Tenant, size)
}

// refuseByQuota answers m's PubAck with 10429 for err, the tenant
// quota's refusal of storing m (t.publish then stores nothing).
func (t *topic) refuseByQuota(m message, st *stream, err error) {
	t.s.cfg.Logger.Debug("publish refused by the tenant's quota", "topic", t.name.String(), "err", err)
	t.s.respond(m.reply, pubAckError(st.stream, jsapi.ErrQuotaExceeded(err)))
}

// countQuota is the gate's answer to tenant's count k growing by one (a
// topic or a consumer to create): nil, or the 10429 error.
func (s *Service) countQuota(tenant string, k quota.Kind) *jsapi.APIError {
	q := s.cfg.Quotas
	if q == nil {
		return nil
	}
	if err := q.Check(tenant, k, 1); err != nil {
		s.cfg.Logger.Debug("creation refused by the tenant's quota", "tenant", tenant, "quota", k.String(), "err", err)
		return jsapi.ErrQuotaExceeded(err)
	}
	return nil
}

// topicQuota and consumerQuota are countQuota for one topic or consumer
// more.
func (s *Service) topicQuota(tenant string) *jsapi.APIError {
	return s.countQuota(tenant, quota.Topics)
}
func (s *Service) consumerQuota(tenant string) *jsapi.APIError {
	return s.countQuota(tenant, quota.Consumers)
}

// topicQuotaErr is countQuota for a topic the admin API creates: nil, or
// ErrQuotaExceeded followed by the gate's text.
func (s *Service) topicQuotaErr(tenant string) error {
	if e := s.countQuota(tenant, quota.Topics); e != nil {
		return fmt.Errorf("%w: %s", ErrQuotaExceeded, e.Description)
	}
	return nil
}

// refuseAutoCreate decides, for a publish that would auto-create a topic
// of tenant, whether the topic quota refuses it: a JetStream publish
// (with a reply) gets the 10429 PubAck and goes nowhere; without a reply
// it is core NATS (charged as such by the broker). refused false: create
// the topic.
func (s *Service) refuseAutoCreate(tenant string, reply []byte) (res broker.HookResult, refused bool) {
	e := s.countQuota(tenant, quota.Topics)
	if e == nil {
		return 0, false
	}
	if len(reply) == 0 {
		return broker.HookRoute, true
	}
	s.respond(string(reply), pubAckError("", e))
	return broker.HookConsumed, true
}
