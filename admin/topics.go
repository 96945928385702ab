package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stratamesh/strata/tenancy"
)

// TopicSummary is one row of the topic list.
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
// (GET /admin/v1/topics/{t}/{ns}/{topic}[/stats]).
type TopicStats struct {
	TopicSummary
	Retention     string              `json:"retention"`
	Messages      uint64              `json:"messages"`
	Bytes         uint64              `json:"bytes"`
	FirstSeq      uint64              `json:"first_seq"`
	LastSeq       uint64              `json:"last_seq"`
	FirstTime     time.Time           `json:"first_ts,omitzero"`
	LastTime      time.Time           `json:"last_ts,omitzero"`
	NumSubjects   uint64              `json:"num_subjects"`
	Ledgers       []TopicLedger       `json:"ledgers"`
	Subscriptions []SubscriptionStats `json:"subscriptions"`
	// Replication is the topic's replicator cursors and the origin
	// streams replicated into it (nil when the owner did not answer).
	Replication *TopicReplication `json:"replication,omitempty"`
	// Offload is where the topic's ledgers are (bookies, tier) and its
	// offloads' progress.
	Offload *OffloadStatus `json:"offload,omitempty"`
	// Config is the stream's configuration as the JetStream API gives it
	// (STREAM.INFO's config), passed through unchanged.
	Config json.RawMessage `json:"config,omitempty"`
	// Policy is the owner's last attempt to apply the namespace's
	// policies: a step that keeps failing (e.g. removing a region's
	// replicator cursor) shows here until it succeeds.
	Policy *PolicyStatus `json:"policy,omitempty"`
}

// PolicyStatus: Error is the step that keeps failing ("" once the
// policies are applied), Failures the rounds in a row it failed
// (retried with a backoff from 2 s to 1 min), Since the first.
type PolicyStatus struct {
	Error    string    `json:"error,omitempty"`
	Failures int       `json:"failures,omitempty"`
	Since    time.Time `json:"since,omitzero"`
}

// The states of TopicLedger.State.
const (
	TopicLedgerOpen   = "open"
	TopicLedgerClosed = "closed"
)

// TopicLedger is one ledger of a topic.
type TopicLedger struct {
	ID       int64  `json:"id"`
	FirstSeq uint64 `json:"first_seq"`
	// Entries and Msgs once closed; -1 while open. Bytes is the sum of its
	// messages' sizes once closed (0 while open).
	Entries int64 `json:"entries"`
	Msgs    int64 `json:"msgs"`
	Bytes   int64 `json:"bytes"`
	// FirstTime, LastTime: publish times of its first and last messages
	// once closed.
	FirstTime time.Time `json:"first_time"`
	LastTime  time.Time `json:"last_time"`
	// LastOrigin is the topic's last local origin sequence as of its last
	// message once closed.
	LastOrigin uint64 `json:"last_origin,omitempty"`
	State      string `json:"state"` // TopicLedgerOpen or TopicLedgerClosed
	// Offload is the ledger's verified copy in the region's tier (nil:
	// none).
	Offload *TierCopy `json:"offload,omitempty"`
}

// TierCopy is a ledger's verified copy in the tier.
type TierCopy struct {
	Base          string    `json:"base"`  // its objects' name in the tier
	Bytes         int64     `json:"bytes"` // the data object's size
	Time          time.Time `json:"time"`  // when it was verified
	BookieDeleted bool      `json:"bookie_deleted,omitempty"`
}

// SubscriptionStats is one durable cursor of a topic: its ack floor, read
// position, unacknowledged deliveries and backlog (matching messages not
// yet delivered).
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
	// Replicated: acknowledged mesh-wide (a replicated subscription).
	Replicated bool `json:"replicated"`
}

// TopicReplication is a topic's replication as its owner reports it.
type TopicReplication struct {
	Incarnation   string             `json:"incarnation"`
	LastOriginSeq uint64             `json:"last_origin_seq"`
	Cursors       []ReplicationStats `json:"cursors"`
	Origins       []OriginStats      `json:"origins"`
	OriginsLost   uint64             `json:"origins_lost"`
}

// ReplicationStats is one replicator cursor of a topic: its remote,
// health and lag.
type ReplicationStats struct {
	Topic  string `json:"topic"`  // tenant/namespace/topic
	Remote string `json:"remote"` // the region replicated to
	Cursor string `json:"cursor"` // __repl.<remote>
	// State is replicating, backing-off or stalled.
	State string `json:"state"`
	// Position is the last local origin sequence the remote acknowledged
	// as stored; LastOriginSeq the last one published here.
	Position      uint64 `json:"position"`
	LastOriginSeq uint64 `json:"last_origin_seq"`
	// Lag: messages, their stored bytes (an estimate) and the age of the
	// oldest, in seconds.
	LagMsgs     uint64    `json:"lag_msgs"`
	LagBytes    uint64    `json:"lag_bytes"`
	LagSeconds  float64   `json:"lag_seconds"`
	InFlight    uint64    `json:"in_flight"`
	LastSuccess time.Time `json:"last_success,omitzero"`
	RetryAt     time.Time `json:"retry_at,omitzero"`
	Failures    int       `json:"failures,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	// Counters over the cursor's current life.
	Batches    uint64 `json:"batches"`
	Sent       uint64 `json:"sent"`
	Resent     uint64 `json:"resent,omitempty"`
	GapRecords uint64 `json:"gap_records,omitempty"`
	Timeouts   uint64 `json:"timeouts,omitempty"`
}

// OriginStats is one origin stream replicated into a topic: its
// high-water mark here and the messages gap records skipped.
type OriginStats struct {
	Region      string `json:"region"`
	Incarnation string `json:"incarnation"`
	HWM         uint64 `json:"hwm"`
	Lost        uint64 `json:"lost,omitempty"`
}

// TopicList is GET /admin/v1/topics[/{t}[/{ns}]].
type TopicList struct {
	Region string         `json:"region"`
	Topics []TopicSummary `json:"topics"`
}

// TopicAnswer is GET /admin/v1/topics/{t}/{ns}/{topic}[/stats].
type TopicAnswer struct {
	Region string      `json:"region"`
	Topic  *TopicStats `json:"topic"`
}

// SubscriptionList is GET …/subscriptions, and the answer of a
// subscription PUT or DELETE: the region's subscriptions of the topic.
type SubscriptionList struct {
	Region        string              `json:"region"`
	Subscriptions []SubscriptionStats `json:"subscriptions"`
}

// SubscriptionAnswer is GET …/subscriptions/{sub}.
type SubscriptionAnswer struct {
	Region       string            `json:"region"`
	Subscription SubscriptionStats `json:"subscription"`
}

// TopicsBackend answers for the region's topics (any broker, asking the
// topic's owner).
type TopicsBackend interface {
	// Topics lists the region's topics, sorted; those of tenant (and
	// namespace) when set.
	Topics(tenant, namespace string) []TopicSummary
	// TopicStats is the topic's state from its owner. Errors:
	// topic_not_found, no_owner.
	TopicStats(ctx context.Context, name tenancy.Name) (*TopicStats, error)
	// CreateTopic creates the topic in its namespace with the
	// namespace's policies; created is false when it existed. Errors:
	// namespace_not_found, conflict (another stream captures its
	// subjects), metadata_unavailable.
	CreateTopic(ctx context.Context, name tenancy.Name) (created bool, err error)
	// DeleteTopic deletes the topic at its owner, and in the other
	// regions through a tombstone (emptiness is checked by the route).
	// Errors: topic_not_found, no_owner.
	DeleteTopic(ctx context.Context, name tenancy.Name) error
}

// TopicRequest is the body of a topic PUT (optional).
type TopicRequest struct {
	// Partitions: 0 (or absent) for a topic; partitioned topics are not
	// supported yet, so anything else is refused.
	Partitions int `json:"partitions"`
}

func (q *TopicRequest) validate() *Error {
	switch {
	case q.Partitions < 0:
		return Errorf(CodeInvalidBody, "partitions", "request body: partitions %d is negative", q.Partitions)
	case q.Partitions > 0:
		return Errorf(CodeInvalidBody, "partitions", "request body: partitions %d: partitioned topics are not supported yet (omit partitions or give 0)", q.Partitions)
	}
	return nil
}

// TopicCreated is the answer of a topic PUT: the topic's state (its
// summary only when its owner did not answer in time), and whether the
// PUT created it (201) or it existed (200).
type TopicCreated struct {
	Region  string      `json:"region"`
	Created bool        `json:"created"`
	Topic   *TopicStats `json:"topic"`
}

// TopicDeleted is the answer of a topic DELETE.
type TopicDeleted struct {
	Region  string `json:"region"`
	Topic   string `json:"topic"` // tenant/namespace/topic
	Deleted bool   `json:"deleted"`
	// Forced: deleted with ?force=true; Messages and Subscriptions are
	// what it held then.
	Forced        bool     `json:"forced,omitempty"`
	Messages      uint64   `json:"messages"`
	Subscriptions []string `json:"subscriptions"`
}

func (b Backends) topicRoutes() []Route {
	list := func(hasT, hasNS bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var t, ns string
			var e *Error
			if hasT {
				if t, e = Token(r, "t"); e != nil {
					WriteError(w, e)
					return
				}
			} else {
				t = scopeOf(r) // a tenant admin sees its own tenant's
			}
			if hasNS {
				if ns, e = Token(r, "ns"); e != nil {
					WriteError(w, e)
					return
				}
			}
			WriteJSON(w, http.StatusOK, TopicList{Region: b.Region, Topics: nonNil(b.Topics.Topics(t, ns))})
		}
	}
	stats := func(w http.ResponseWriter, r *http.Request) {
		if st, ok := b.topicStats(w, r); ok {
			WriteJSON(w, http.StatusOK, TopicAnswer{Region: b.Region, Topic: st})
		}
	}
	return []Route{
		{http.MethodGet, "/admin/v1/topics", Authenticated, list(false, false)},
		{http.MethodGet, "/admin/v1/topics/{t}", TenantAdmin, list(true, false)},
		{http.MethodGet, "/admin/v1/topics/{t}/{ns}", TenantAdmin, list(true, true)},
		{http.MethodGet, "/admin/v1/topics/{t}/{ns}/{topic}", TenantAdmin, stats},
		{http.MethodPut, "/admin/v1/topics/{t}/{ns}/{topic}", TenantAdmin, b.putTopic},
		{http.MethodDelete, "/admin/v1/topics/{t}/{ns}/{topic}", TenantAdmin, b.deleteTopic},
		{http.MethodGet, "/admin/v1/topics/{t}/{ns}/{topic}/stats", TenantAdmin, stats},
		{http.MethodGet, "/admin/v1/topics/{t}/{ns}/{topic}/subscriptions", TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			if st, ok := b.topicStats(w, r); ok {
				WriteJSON(w, http.StatusOK, SubscriptionList{Region: b.Region, Subscriptions: nonNil(st.Subscriptions)})
			}
		}},
		{http.MethodGet, "/admin/v1/topics/{t}/{ns}/{topic}/subscriptions/{sub}", TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			sub, e := tokenAs(r, "sub", CodeInvalidSubscription)
			if e != nil {
				WriteError(w, e)
				return
			}
			st, ok := b.topicStats(w, r)
			if !ok {
				return
			}
			for _, s := range st.Subscriptions {
				if s.Name == sub {
					WriteJSON(w, http.StatusOK, SubscriptionAnswer{Region: b.Region, Subscription: s})
					return
				}
			}
			WriteError(w, Errorf(CodeSubscriptionNotFound, "sub", "topic %s/%s/%s has no subscription %s", st.Tenant, st.Namespace, st.Topic, sub))
		}},
	}
}

// putTopic creates the topic of the path in its namespace: 201 when it
// did, 200 when it existed.
func (b Backends) putTopic(w http.ResponseWriter, r *http.Request) {
	name, e := TopicName(r)
	if e != nil {
		WriteError(w, e)
		return
	}
	var req TopicRequest
	if e := DecodeBody(w, r, &req, true); e != nil {
		WriteError(w, e)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), TopicTimeout)
	defer cancel()
	created, err := b.Topics.CreateTopic(ctx, name)
	if err != nil {
		WriteError(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	st, err := b.Topics.TopicStats(ctx, name)
	if err != nil {
		// Created, but its owner is not serving it yet: its summary.
		st = &TopicStats{TopicSummary: TopicSummary{Tenant: name.Tenant, Namespace: name.Namespace, Topic: name.Topic}}
		for _, ts := range b.Topics.Topics(name.Tenant, name.Namespace) {
			if ts.Topic == name.Topic {
				st.TopicSummary = ts
			}
		}
	}
	WriteJSON(w, status, TopicCreated{Region: b.Region, Created: created, Topic: st})
}

// deleteTopic deletes the topic of the path; one that holds messages or
// subscriptions only with ?force=true (409 not_empty otherwise).
func (b Backends) deleteTopic(w http.ResponseWriter, r *http.Request) {
	force, e := queryFlag(r, "force")
	if e != nil {
		WriteError(w, e)
		return
	}
	st, ok := b.topicStats(w, r)
	if !ok {
		return
	}
	name := tenancy.Name{Tenant: st.Tenant, Namespace: st.Namespace, Topic: st.Topic}
	subs := make([]string, 0, len(st.Subscriptions))
	for _, s := range st.Subscriptions {
		subs = append(subs, s.Name)
	}
	if !force && (st.Messages > 0 || len(subs) > 0) {
		var held []string
		if st.Messages > 0 {
			held = append(held, fmt.Sprintf("%d stored messages", st.Messages))
		}
		if len(subs) > 0 {
			held = append(held, fmt.Sprintf("%d subscriptions (%s)", len(subs), strings.Join(subs, ", ")))
		}
		WriteError(w, Errorf(CodeNotEmpty, "force", "topic %s holds %s: delete it with ?force=true", name, strings.Join(held, " and ")))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), TopicTimeout)
	defer cancel()
	if err := b.Topics.DeleteTopic(ctx, name); err != nil {
		WriteError(w, err)
		return
	}
	WriteJSON(w, http.StatusOK, TopicDeleted{Region: b.Region, Topic: name.String(), Deleted: true, Forced: force,
		Messages: st.Messages, Subscriptions: subs})
}

// queryFlag returns boolean query parameter name: false when absent,
// true for "true" (or "1"), false for "false" (or "0"); anything else
// is 400 invalid_field naming it.
func queryFlag(r *http.Request, name string) (bool, *Error) {
	q := r.URL.Query()
	if !q.Has(name) {
		return false, nil
	}
	switch v := q.Get(name); v {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	default:
		return false, Errorf(CodeInvalidField, name, "%s=%s: want true or false", name, strconv.Quote(v))
	}
}

// topicStats answers the topic of the request's path, or writes the error.
func (b Backends) topicStats(w http.ResponseWriter, r *http.Request) (*TopicStats, bool) {
	name, e := TopicName(r)
	if e != nil {
		WriteError(w, e)
		return nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), TopicTimeout)
	defer cancel()
	st, err := b.Topics.TopicStats(ctx, name)
	if err != nil {
		WriteError(w, err)
		return nil, false
	}
	return st, true
}

// SubscriptionRequest is the body of a subscription PUT (optional): a
// durable pull consumer with explicit acks, replicated to the other
// regions of the namespace's replication list when Replicated.
type SubscriptionRequest struct {
	Replicated    bool   `json:"replicated"`
	FilterSubject string `json:"filter_subject,omitempty"`
	// ResetTo resets the subscription's position (creating it there when
	// it does not exist): the durable is deleted and created again
	// delivering from stream sequence seq, or from the first message
	// stored at or after time. An existing subscription keeps its
	// configuration (filter_subject and replicated change it when set).
	ResetTo *ResetTo `json:"reset_to,omitempty"`
}

// ResetTo is where a subscription reset restarts delivery: exactly one of
// Seq (a stream sequence, from 1) and Time (RFC 3339).
type ResetTo struct {
	Seq  *uint64 `json:"seq,omitempty"`
	Time string  `json:"time,omitempty"`
}

// At is Time parsed (zero when unset or not RFC 3339; validate refuses
// the latter).
func (q *ResetTo) At() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, q.Time)
	return t
}

func (q *SubscriptionRequest) validate() *Error {
	rt := q.ResetTo
	if rt == nil {
		return nil
	}
	switch {
	case rt.Seq != nil && rt.Time != "":
		return Errorf(CodeInvalidBody, "reset_to", `request body: reset_to takes one of "seq" and "time", not both`)
	case rt.Seq == nil && rt.Time == "":
		return Errorf(CodeInvalidBody, "reset_to", `request body: reset_to needs "seq" (a stream sequence) or "time" (RFC 3339)`)
	case rt.Seq != nil && *rt.Seq == 0:
		return Errorf(CodeInvalidBody, "reset_to.seq", "request body: reset_to.seq: stream sequences start at 1")
	case rt.Seq == nil:
		if _, err := time.Parse(time.RFC3339Nano, rt.Time); err != nil {
			return Errorf(CodeInvalidBody, "reset_to.time", "request body: reset_to.time %s is not an RFC 3339 time (e.g. 2025-01-02T15:04:05Z)", strconv.Quote(rt.Time))
		}
	}
	return nil
}

// SubscriptionsBackend writes a topic's durable subscriptions (at the
// topic's owner). Errors: topic_not_found, subscription_not_found (field
// sub), invalid_subscription, no_owner.
type SubscriptionsBackend interface {
	PutSubscription(ctx context.Context, name tenancy.Name, sub string, req SubscriptionRequest) error
	DeleteSubscription(ctx context.Context, name tenancy.Name, sub string) error
}

func (b Backends) subscriptionRoutes() []Route {
	const path = "/admin/v1/topics/{t}/{ns}/{topic}/subscriptions/{sub}"
	return []Route{
		{http.MethodPut, path, TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			var req SubscriptionRequest
			b.subscriptionWrite(w, r, &req, func(ctx context.Context, name tenancy.Name, sub string) error {
				return b.Subscriptions.PutSubscription(ctx, name, sub, req)
			})
		}},
		{http.MethodDelete, path, TenantAdmin, func(w http.ResponseWriter, r *http.Request) {
			b.subscriptionWrite(w, r, nil, b.Subscriptions.DeleteSubscription)
		}},
	}
}

// subscriptionWrite checks the path (and decodes body into req, when the
// route takes one), runs do and answers with the topic's subscriptions.
func (b Backends) subscriptionWrite(w http.ResponseWriter, r *http.Request, req *SubscriptionRequest, do func(context.Context, tenancy.Name, string) error) {
	name, e := TopicName(r)
	if e != nil {
		WriteError(w, e)
		return
	}
	sub, e := tokenAs(r, "sub", CodeInvalidSubscription)
	if e != nil {
		WriteError(w, e)
		return
	}
	if req != nil {
		if e := DecodeBody(w, r, req, true); e != nil {
			WriteError(w, e)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), TopicTimeout)
	defer cancel()
	if err := do(ctx, name, sub); err != nil {
		WriteError(w, err)
		return
	}
	if st, ok := b.topicStats(w, r); ok {
		WriteJSON(w, http.StatusOK, SubscriptionList{Region: b.Region, Subscriptions: nonNil(st.Subscriptions)})
	}
}
