package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/replicator/wire"
	"github.com/stratamesh/strata/tenancy"
)

// The admin API's topic writes: create a topic in its namespace, delete
// it, and reset a durable subscription's position.

// ErrNamespaceNotFound: the topic's namespace does not exist (CreateTopic).
var ErrNamespaceNotFound = errors.New("jetstream: namespace not found")

// ErrSubjectOverlap: another stream of the tenant captures the topic's
// subjects (CreateTopic).
var ErrSubjectOverlap = errors.New("jetstream: subjects overlap another stream")

// CreateTopic creates topic name in its namespace with the namespace's
// policies (retention, limits, dedup window: the configuration
// auto-create gives a topic), as publishing to it would when the
// namespace auto-creates topics; the other regions of the namespace's
// replication list are told of it (they create their copy without
// waiting for a message). created is false when the topic existed
// (whatever its configuration). Errors: ErrNamespaceNotFound,
// ErrSubjectOverlap (the stream's name in the message), ErrQuotaExceeded
// (the tenant's topic quota refused it, the refusal in the message),
// etcd's.
func (s *Service) CreateTopic(ctx context.Context, name tenancy.Name) (created bool, err error) {
	ns, ok := s.namespace(name.Tenant, name.Namespace)
	if !ok {
		return false, fmt.Errorf("%w: tenant %s has no namespace %s", ErrNamespaceNotFound, name.Tenant, name.Namespace)
	}
	if s.reg.topic(name) != nil {
		return false, nil
	}
	cfg := nsStreamConfig(name, ns)
	if other := s.reg.overlapping(name.Tenant, cfg.Name, cfg.Subjects); other != "" {
		return false, fmt.Errorf("%w: stream %s of tenant %s captures subjects %v", ErrSubjectOverlap, other, name.Tenant, cfg.Subjects)
	}
	if err := s.topicQuotaErr(name.Tenant); err != nil { // quota_gate.go
		return false, err
	}
	spec, _ := json.Marshal(topicSpec{Stream: cfg.Name, Config: cfg})
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	switch err := mledger.Create(ctx, s.cfg.Store, name, spec, s.cfg.Now().UTC()); {
	case err == nil:
		created = true
	case !errors.Is(err, mledger.ErrExists):
		return false, err
	}
	tm, _, err := mledger.Load(ctx, s.cfg.Store, name)
	if err != nil {
		return created, err
	}
	if s.reg.put(decodeStream(name, tm)) || created {
		s.topicAdded(name)
	}
	if created {
		if err := s.queueDefinition(ctx, name, wire.TombCreate, spec); err != nil {
			s.cfg.Logger.Warn("topic created here; queueing it for the other regions failed (they create it with its first message)", "topic", name.String(), "err", err)
		}
	}
	return created, nil
}

// DeleteTopic deletes topic name through the JetStream API at its owner
// (STREAM.DELETE of its qualified stream name): its consumers, cursors,
// ledgers and metadata; the deletion is replicated to the other regions
// as a tombstone. Emptiness is the caller's to check. Errors:
// ErrTopicNotFound, the API's (*jsapi.APIError), ctx's when no owner
// answers.
func (s *Service) DeleteTopic(ctx context.Context, name tenancy.Name) error {
	st := s.reg.topic(name)
	if st == nil {
		return ErrTopicNotFound
	}
	var resp jsapi.SuccessResponse
	if err := s.request(ctx, jsapi.APIPrefix+"STREAM.DELETE."+qualifiedStream(st), nil, &resp); err != nil {
		return err
	}
	if resp.Error != nil {
		return resp.Error
	}
	return nil
}

// ResetTo is where a subscription reset restarts delivery: at stream
// sequence Seq, or at the first message stored at or after Time (exactly
// one is set).
type ResetTo struct {
	Seq  uint64
	Time time.Time
}

// resetSubscription deletes durable subscription sub of topic st (when it
// exists) and creates it again with deliver policy by_start_sequence or
// by_start_time: delivery restarts at to. An existing subscription keeps
// its configuration (ack policy, filter, metadata…), with the request's
// filter and replicated flag when set. For a replicated subscription the
// deletion and the re-creation are a new epoch in every region (its ack
// set starts again from what precedes to here). Errors as
// PutSubscription's.
func (s *Service) resetSubscription(ctx context.Context, st *stream, sub string, req SubscriptionRequest, to ResetTo) error {
	prefix := jsapi.APIPrefix + "CONSUMER."
	subj := qualifiedStream(st) + "." + sub
	cfg := jsapi.ConsumerConfig{Durable: sub, AckPolicy: jsapi.AckExplicit}
	var info jsapi.ConsumerInfoResponse
	if err := s.request(ctx, prefix+"INFO."+subj, nil, &info); err != nil {
		return err
	}
	switch {
	case info.Error == nil && info.ConsumerInfo != nil:
		cfg = info.Config
		var del jsapi.SuccessResponse
		if err := s.request(ctx, prefix+"DELETE."+subj, nil, &del); err != nil {
			return err
		}
		if del.Error != nil && del.Error.ErrCode != jsapi.ErrCodeConsumerNotFound {
			return del.Error
		}
	case info.Error != nil && info.Error.ErrCode != jsapi.ErrCodeConsumerNotFound:
		return info.Error
	}
	if req.FilterSubject != "" {
		cfg.FilterSubject, cfg.FilterSubjects = req.FilterSubject, nil
	}
	if req.Replicated {
		md := make(map[string]string, len(cfg.Metadata)+1)
		for k, v := range cfg.Metadata {
			md[k] = v
		}
		md[MetaReplicated] = "true"
		cfg.Metadata = md
	}
	cfg.Name, cfg.Durable = sub, sub
	cfg.OptStartSeq, cfg.OptStartTime = 0, nil
	if to.Seq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jsapi.DeliverByStartSeq, to.Seq
	} else {
		t := to.Time.UTC()
		cfg.DeliverPolicy, cfg.OptStartTime = jsapi.DeliverByStartTime, &t
	}
	body, _ := json.Marshal(jsapi.CreateConsumerRequest{Stream: qualifiedStream(st), Config: cfg, Action: jsapi.ActionCreate})
	var resp jsapi.ConsumerInfoResponse
	if err := s.request(ctx, prefix+"CREATE."+subj, body, &resp); err != nil {
		return err
	}
	if resp.Error != nil {
		return resp.Error
	}
	return nil
}
