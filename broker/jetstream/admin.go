package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/tenancy"
)

// ErrTopicNotFound is returned by the admin views for a topic the region
// does not have.
var ErrTopicNotFound = errors.New("jetstream: topic not found")

// TopicSummary is one row of the admin topic list.
type TopicSummary struct {
	Tenant    string   `json:"tenant"`
	Namespace string   `json:"namespace"`
	Topic     string   `json:"topic"`
	Stream    string   `json:"stream"`
	Subjects  []string `json:"subjects"`
	// Owner is the broker serving the topic ("" while none does).
	Owner string `json:"owner"`
}

// TopicStats is a topic's live state as its owner reports it
// (admin API: GET /admin/v1/topics/{t}/{ns}/{topic}/stats).
type TopicStats struct {
	TopicSummary
	Retention     string               `json:"retention"`
	Messages      uint64               `json:"messages"`
	Bytes         uint64               `json:"bytes"`
	FirstSeq      uint64               `json:"first_seq"`
	LastSeq       uint64               `json:"last_seq"`
	FirstTime     time.Time            `json:"first_ts,omitzero"`
	LastTime      time.Time            `json:"last_ts,omitzero"`
	NumSubjects   uint64               `json:"num_subjects"`
	Ledgers       []mledger.LedgerInfo `json:"ledgers"`
	Subscriptions []SubscriptionStats  `json:"subscriptions"`
	// Replication is the topic's replicator cursors and the origin
	// streams replicated into it (nil when the owner did not answer).
	Replication *TopicReplication `json:"replication,omitempty"`
	// Offload is where the topic's ledgers are (bookies, tier) and its
	// offloads' progress (ARCHITECTURE §6).
	Offload *mledger.OffloadStatus `json:"offload,omitempty"`
	Config  jsapi.StreamConfig     `json:"config"`
	// Policy is the owner's last attempt to apply the namespace's
	// policies (nil when the owner did not answer).
	Policy *PolicyStatus `json:"policy,omitempty"`
}

// SubscriptionStats is one durable cursor of a topic: its mark-delete
// position (ack floor), read position, unacknowledged deliveries and
// backlog (matching messages not yet delivered).
type SubscriptionStats struct {
	Name           string    `json:"name"`
	AckFloor       uint64    `json:"ack_floor"`
	Delivered      uint64    `json:"delivered"`
	NumAckPending  int       `json:"num_ack_pending"`
	NumRedelivered int       `json:"num_redelivered"`
	NumWaiting     int       `json:"num_waiting"`
	Backlog        uint64    `json:"backlog"`
	AckPolicy      string    `json:"ack_policy"`
	Created        time.Time `json:"created"`
	// Replicated: a replicated subscription (consumer metadata
	// strata.replicated=true), acknowledged mesh-wide.
	Replicated bool `json:"replicated"`
}

// Topics lists the region's topics, sorted, those of tenant (and
// namespace) when set.
func (s *Service) Topics(tenant, namespace string) []TopicSummary {
	var out []TopicSummary
	for _, n := range s.reg.all() {
		if (tenant != "" && n.Tenant != tenant) || (namespace != "" && n.Namespace != namespace) {
			continue
		}
		st := s.reg.topic(n)
		if st == nil {
			continue
		}
		out = append(out, s.summary(st))
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Tenant+"/"+a.Namespace+"/"+a.Topic < b.Tenant+"/"+b.Namespace+"/"+b.Topic
	})
	return out
}

func (s *Service) summary(st *stream) TopicSummary {
	return TopicSummary{Tenant: st.name.Tenant, Namespace: st.name.Namespace, Topic: st.name.Topic,
		Stream: st.stream, Subjects: st.config.Subjects, Owner: s.ownerOf(st.name)}
}

// TopicStats asks the topic's owner (through the JetStream API, over the
// internal link when another broker owns it) for its stream and consumer
// state, and reads its ledger list from etcd. Errors: ErrTopicNotFound;
// ctx's error when no owner answers in time (no owner yet).
func (s *Service) TopicStats(ctx context.Context, name tenancy.Name) (*TopicStats, error) {
	st := s.reg.topic(name)
	if st == nil {
		return nil, ErrTopicNotFound
	}
	var info jsapi.StreamInfoResponse
	if err := s.request(ctx, jsapi.APIPrefix+"STREAM.INFO."+qualifiedStream(st), nil, &info); err != nil {
		return nil, err
	}
	if info.Error != nil {
		return nil, info.Error
	}
	var list jsapi.ConsumerListResponse
	if err := s.request(ctx, jsapi.APIPrefix+"CONSUMER.LIST."+qualifiedStream(st), nil, &list); err != nil {
		return nil, err
	}
	out := &TopicStats{TopicSummary: s.summary(st), Config: st.config, Retention: string(st.config.Retention)}
	if info.StreamInfo != nil {
		ss := info.State
		out.Messages, out.Bytes, out.FirstSeq, out.LastSeq = ss.Msgs, ss.Bytes, ss.FirstSeq, ss.LastSeq
		out.FirstTime, out.LastTime, out.NumSubjects = ss.FirstTime, ss.LastTime, ss.NumSubjects
		out.Config = info.Config
	}
	for _, ci := range list.Consumers {
		out.Subscriptions = append(out.Subscriptions, SubscriptionStats{
			Name: ci.Name, AckFloor: ci.AckFloor.Stream, Delivered: ci.Delivered.Stream,
			NumAckPending: ci.NumAckPending, NumRedelivered: ci.NumRedelivered, NumWaiting: ci.NumWaiting,
			Backlog: ci.NumPending, AckPolicy: string(ci.Config.AckPolicy), Created: ci.Created,
			Replicated: isReplicated(&ci.Config),
		})
	}
	var own ownerState
	if err := s.request(ctx, replAdminPrefix+name.Tenant+"."+name.Namespace+"."+name.Topic, nil, &own); err == nil {
		out.Replication, out.Policy = &own.TopicReplication, &own.Policy
	}
	if tm, _, err := mledger.Load(ctx, s.cfg.Store, name); err == nil {
		out.Ledgers = tm.Ledgers
	}
	if off, err := s.TopicOffload(ctx, name, OffloadRequest{}); err == nil {
		out.Offload = off
	}
	return out, nil
}

// request sends a JetStream API request from the broker itself and
// decodes the reply into v.
func (s *Service) request(ctx context.Context, subject string, body []byte, v any) error {
	inbox := "_INBOX.strata-admin." + randomName() + randomName()
	ch := make(chan []byte, 1)
	unsub, err := s.srv.SubscribeInternal(inbox, func(_, _, _, p []byte) {
		select {
		case ch <- bytes.Clone(p):
		default:
		}
	})
	if err != nil {
		return err
	}
	defer unsub()
	s.dispatch(message{origin: s.cfg.Name, subject: subject, reply: inbox, data: body})
	select {
	case b := <-ch:
		if err := json.Unmarshal(b, v); err != nil {
			return fmt.Errorf("jetstream: decoding the reply to %s: %w", subject, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("jetstream: no answer to %s (no owner serving the topic yet?): %w", subject, ctx.Err())
	}
}

// SubscriptionRequest is the admin API's PUT of a subscription: a
// durable pull consumer (explicit acks) on the topic, replicated to the
// other regions of its namespace's replication list when Replicated.
type SubscriptionRequest struct {
	Replicated    bool   `json:"replicated"`
	FilterSubject string `json:"filter_subject,omitempty"`
	// ResetTo, when set, resets the subscription's position: it is
	// deleted (if it exists) and created again, delivering from there.
	ResetTo *ResetTo `json:"-"`
}

// PutSubscription creates durable subscription name on topic n, or
// updates it, through the JetStream API at the topic's owner (a
// replicated one: consumer metadata strata.replicated=true); with
// req.ResetTo, deletes it and creates it again delivering from there
// (resetSubscription). Errors:
// ErrTopicNotFound, the API's error (*jsapi.APIError), ctx's when no
// owner answers.
func (s *Service) PutSubscription(ctx context.Context, n tenancy.Name, name string, req SubscriptionRequest) error {
	st := s.reg.topic(n)
	if st == nil {
		return ErrTopicNotFound
	}
	if req.ResetTo != nil {
		return s.resetSubscription(ctx, st, name, req, *req.ResetTo)
	}
	cfg := jsapi.ConsumerConfig{Durable: name, AckPolicy: jsapi.AckExplicit, FilterSubject: req.FilterSubject}
	if req.Replicated {
		cfg.Metadata = map[string]string{MetaReplicated: "true"}
	}
	body, _ := json.Marshal(jsapi.CreateConsumerRequest{Stream: qualifiedStream(st), Config: cfg})
	var resp jsapi.ConsumerInfoResponse
	if err := s.request(ctx, jsapi.APIPrefix+"CONSUMER.CREATE."+qualifiedStream(st)+"."+name, body, &resp); err != nil {
		return err
	}
	if resp.Error != nil {
		return resp.Error
	}
	return nil
}

// DeleteSubscription deletes durable subscription name of topic n (a
// replicated one in every region). Errors as PutSubscription's.
func (s *Service) DeleteSubscription(ctx context.Context, n tenancy.Name, name string) error {
	st := s.reg.topic(n)
	if st == nil {
		return ErrTopicNotFound
	}
	var resp jsapi.SuccessResponse
	if err := s.request(ctx, jsapi.APIPrefix+"CONSUMER.DELETE."+qualifiedStream(st)+"."+name, nil, &resp); err != nil {
		return err
	}
	if resp.Error != nil {
		return resp.Error
	}
	return nil
}
