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
//   - a client publish captured by a stream is charged to the publish
//     rate and bytes at the broker it arrived at (rateRefused, from
//     ClientPublish), before it is routed anywhere, so a refused publish
//     is neither stored nor delivered to core subscribers. Its storage
//     is checked at the topic's owner, before it is handed to the
//     managed ledger (quotaRefusal). A replicated copy (repl_recv.go)
//     is never charged: publish rates count at the origin only, and
//     storage is measured (the use report, quota_use.go); the storage
//     quota may refuse a replicated batch, which its sender retries
//     (backlog_repl.go). A refused publish gets 10429 in its PubAck.
//   - a topic created by STREAM.CREATE, by a publish into a namespace
//     that auto-creates topics, or by the admin API (Check quota.Topics,
//     1). Topics created because another region replicates them are not
//     checked.
//   - a consumer created by CONSUMER.CREATE (the admin API's
//     subscriptions too): Check quota.Consumers, 1. Replicated
//     subscriptions created because another region shipped them are not
//     checked.
//
// ErrQuotaExceeded wraps a tenant quota's refusal of an admin API write
// (CreateTopic): the gate's error follows it.
var ErrQuotaExceeded = errors.New("jetstream: tenant quota exceeded")

// quotaRefusal is the tenant's storage quota's answer to storing m in t
// (nil: store it). m is a client publish at the origin region
// (t.publish), never a replicated copy; its publish rate was charged
// where it arrived (rateRefused).
func (t *topic) quotaRefusal(m message) error {
	q := t.s.cfg.Quotas
	if q == nil {
		return nil
	}
	return q.Check(t.name.Tenant, quota.Storage, float64(len(m.hdr)+len(m.data)))
}

// rateRefused charges a client publish of size bytes captured by st to
// its tenant's publish rate and bytes. refused true: the quota said no,
// and res is what the broker does with it — a JetStream publish (with a
// reply) gets 10429 in its PubAck and goes nowhere (HookConsumed); a
// publish without a reply is handed back (HookOverQuota): the broker
// refuses it as a core publish over quota, telling the client the quota.
func (s *Service) rateRefused(st *stream, reply []byte, size int) (res broker.HookResult, refused bool) {
	q := s.cfg.Quotas
	if q == nil {
		return 0, false
	}
	err := q.AdmitPublish(st.name.Tenant, size)
	if err == nil {
		return 0, false
	}
	s.cfg.Logger.Debug("publish refused by the tenant's quota", "stream", st.stream, "err", err)
	if len(reply) == 0 {
		return broker.HookOverQuota, true
	}
	s.respond(string(reply), pubAckError(st.stream, jsapi.ErrQuotaExceeded(err)))
	return broker.HookConsumed, true
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
