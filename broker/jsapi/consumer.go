package jsapi

import (
	"errors"
	"fmt"
	"time"
)

// Durable pull consumers (spec §2.5).

// ConsumerConfig is a consumer's configuration, as sent in CONSUMER.CREATE
// and echoed (with defaults filled in) in ConsumerInfo.
type ConsumerConfig struct {
	Name          string        `json:"name,omitempty"`
	Durable       string        `json:"durable_name,omitempty"`
	Description   string        `json:"description,omitempty"`
	DeliverPolicy DeliverPolicy `json:"deliver_policy"`
	// OptStartSeq is for deliver_policy by_start_sequence.
	OptStartSeq uint64 `json:"opt_start_seq,omitempty"`
	// OptStartTime is for deliver_policy by_start_time.
	OptStartTime *time.Time `json:"opt_start_time,omitempty"`
	AckPolicy    AckPolicy  `json:"ack_policy"`
	// AckWait is how long a delivery waits for its ack (default 30 s).
	AckWait time.Duration `json:"ack_wait,omitempty"`
	// MaxDeliver caps deliveries per message; -1 = unlimited.
	MaxDeliver int `json:"max_deliver,omitempty"`
	// BackOff overrides AckWait for each redelivery in turn.
	BackOff []time.Duration `json:"backoff,omitempty"`
	// FilterSubject and FilterSubjects are exclusive (both: 10136).
	FilterSubject  string       `json:"filter_subject,omitempty"`
	FilterSubjects []string     `json:"filter_subjects,omitempty"`
	ReplayPolicy   ReplayPolicy `json:"replay_policy"`
	RateLimit      uint64       `json:"rate_limit_bps,omitempty"`
	SampleFreq     string       `json:"sample_freq,omitempty"`
	// MaxWaiting bounds the FIFO of waiting pull requests (default 512).
	MaxWaiting int `json:"max_waiting,omitempty"`
	// MaxAckPending bounds unacked deliveries across all clients
	// (default 1000; -1 = unlimited).
	MaxAckPending int  `json:"max_ack_pending,omitempty"`
	HeadersOnly   bool `json:"headers_only,omitempty"`
	// Pull limits on each request; 0 = none.
	MaxRequestBatch    int           `json:"max_batch,omitempty"`
	MaxRequestExpires  time.Duration `json:"max_expires,omitempty"`
	MaxRequestMaxBytes int           `json:"max_bytes,omitempty"`
	// InactiveThreshold: none for durables, 5 s for ephemerals by default.
	InactiveThreshold time.Duration     `json:"inactive_threshold,omitempty"`
	Replicas          int               `json:"num_replicas"`
	MemoryStorage     bool              `json:"mem_storage,omitempty"`
	Metadata          map[string]string `json:"metadata,omitempty"`
	PauseUntil        *time.Time        `json:"pause_until,omitempty"`
	// Priority groups (spec §4, Exclusive/Failover subscriptions).
	PriorityGroups []string       `json:"priority_groups,omitempty"`
	PriorityPolicy PriorityPolicy `json:"priority_policy,omitempty"`
	// PriorityTimeout is how long a pin lasts without pulls.
	PriorityTimeout time.Duration `json:"priority_timeout,omitempty"`

	// Push consumer fields: a consumer with DeliverSubject is push based and
	// not served as a pull consumer. Echoed so nothing is silently lost.
	DeliverSubject string        `json:"deliver_subject,omitempty"`
	DeliverGroup   string        `json:"deliver_group,omitempty"`
	FlowControl    bool          `json:"flow_control,omitempty"`
	IdleHeartbeat  time.Duration `json:"idle_heartbeat,omitempty"`
}

// Reference consumer defaults (spec §2.5).
const (
	DefaultAckWait                    = 30 * time.Second
	DefaultMaxWaiting                 = 512
	DefaultMaxAckPending              = 1000
	DefaultEphemeralInactiveThreshold = 5 * time.Second
	// DefaultPriorityTimeout is priority_timeout of a pinned_client
	// consumer that sets none: how long a pin lasts without a pull from
	// the pinned client.
	DefaultPriorityTimeout = 2 * time.Minute
)

// EffectiveName is the consumer's name by the resolution rule of spec
// §2.5: name, else durable_name; "" means an ephemeral the server names.
func (c *ConsumerConfig) EffectiveName() string {
	if c.Name != "" {
		return c.Name
	}
	return c.Durable
}

// SetDefaults fills unset fields with the reference defaults: deliver all,
// ack none when absent (the reference's zero value; nats.go always sends
// it), replay instant, ack_wait 30 s (or backoff[0]) when acks are
// expected, max_deliver -1, max_waiting 512 for pull consumers,
// max_ack_pending 1000 when acks are expected, inactive_threshold 5 s for
// ephemerals, priority_timeout 2 min for pinned_client (a negative one
// counts as unset). Stream consumer_limits and account limits are the
// broker's to apply first.
func (c *ConsumerConfig) SetDefaults() {
	if c.DeliverPolicy == "" {
		c.DeliverPolicy = DeliverAll
	}
	if c.AckPolicy == "" {
		c.AckPolicy = AckNone
	}
	if c.ReplayPolicy == "" {
		c.ReplayPolicy = ReplayInstant
	}
	if c.MaxDeliver == 0 || c.MaxDeliver < -1 {
		c.MaxDeliver = -1
	}
	if c.DeliverSubject == "" && c.MaxWaiting == 0 {
		c.MaxWaiting = DefaultMaxWaiting
	}
	acks := c.AckPolicy == AckExplicit || c.AckPolicy == AckAll
	if c.AckWait == 0 && acks {
		c.AckWait = DefaultAckWait
	}
	if len(c.BackOff) > 0 {
		c.AckWait = c.BackOff[0]
	}
	if c.MaxAckPending == 0 && c.AckPolicy != AckNone {
		c.MaxAckPending = DefaultMaxAckPending
	}
	if c.InactiveThreshold == 0 && c.Durable == "" {
		c.InactiveThreshold = DefaultEphemeralInactiveThreshold
	}
	if c.PriorityTimeout < 0 {
		c.PriorityTimeout = 0
	}
	if c.PriorityPolicy == PriorityPinned && c.PriorityTimeout == 0 {
		c.PriorityTimeout = DefaultPriorityTimeout
	}
}

// Validate checks what needs no stream state: names, enums, exclusive
// filters (10136 is the error to send), by_start_* options and priority
// fields. It returns every problem, joined.
func (c *ConsumerConfig) Validate() error {
	var errs []error
	for _, n := range []string{c.Name, c.Durable} {
		if n != "" && !ValidStreamName(n) {
			errs = append(errs, fmt.Errorf("jsapi: invalid consumer name %q", n))
		}
	}
	if c.Name != "" && c.Durable != "" && c.Name != c.Durable {
		errs = append(errs, errors.New("jsapi: name and durable_name differ"))
	}
	errs = append(errs, c.DeliverPolicy.Validate(), c.AckPolicy.Validate(),
		c.ReplayPolicy.Validate(), c.PriorityPolicy.Validate())
	if c.FilterSubject != "" && len(c.FilterSubjects) > 0 {
		errs = append(errs, errors.New("jsapi: both filter_subject and filter_subjects"))
	}
	switch {
	case c.DeliverPolicy == DeliverByStartSeq && c.OptStartSeq == 0:
		errs = append(errs, errors.New("jsapi: by_start_sequence needs opt_start_seq"))
	case c.DeliverPolicy == DeliverByStartTime && c.OptStartTime == nil:
		errs = append(errs, errors.New("jsapi: by_start_time needs opt_start_time"))
	case c.DeliverPolicy != DeliverByStartSeq && c.OptStartSeq != 0,
		c.DeliverPolicy != DeliverByStartTime && c.OptStartTime != nil:
		errs = append(errs, errors.New("jsapi: opt_start_* set for another deliver_policy"))
	}
	if (c.PriorityPolicy == PriorityNone) != (len(c.PriorityGroups) == 0) {
		errs = append(errs, errors.New("jsapi: priority_policy and priority_groups go together"))
	}
	return errors.Join(errs...)
}

// SequenceInfo is "delivered" and "ack_floor" of a ConsumerInfo.
type SequenceInfo struct {
	Consumer uint64     `json:"consumer_seq"`
	Stream   uint64     `json:"stream_seq"`
	Last     *time.Time `json:"last_active,omitempty"`
}

// PriorityGroupState is a priority group's pin state in ConsumerInfo.
type PriorityGroupState struct {
	Group          string `json:"group"`
	PinnedClientID string `json:"pinned_client_id,omitempty"`
	// PinnedTS is when the pin was given; the zero time when nobody is
	// pinned (the reference sends it then too).
	PinnedTS time.Time `json:"pinned_ts"`
}

// ConsumerInfo is the body of consumer create/info replies and of the
// entries of CONSUMER.LIST. Name is required (nats.go builds the NEXT
// subject from it); Config is echoed with defaults filled in.
type ConsumerInfo struct {
	Stream         string               `json:"stream_name"`
	Name           string               `json:"name"`
	Created        time.Time            `json:"created"`
	Config         ConsumerConfig       `json:"config"`
	Delivered      SequenceInfo         `json:"delivered"`
	AckFloor       SequenceInfo         `json:"ack_floor"`
	NumAckPending  int                  `json:"num_ack_pending"`
	NumRedelivered int                  `json:"num_redelivered"`
	NumWaiting     int                  `json:"num_waiting"`
	NumPending     uint64               `json:"num_pending"`
	PushBound      bool                 `json:"push_bound,omitempty"`
	Paused         bool                 `json:"paused,omitempty"`
	PauseRemaining time.Duration        `json:"pause_remaining,omitempty"`
	PriorityGroups []PriorityGroupState `json:"priority_groups,omitempty"`
	// TimeStamp is when the info was produced.
	TimeStamp time.Time `json:"ts"`
}

// CreateConsumerRequest is the body of CONSUMER.CREATE.
type CreateConsumerRequest struct {
	Stream   string         `json:"stream_name"`
	Config   ConsumerConfig `json:"config"`
	Action   ConsumerAction `json:"action"`
	Pedantic bool           `json:"pedantic,omitempty"`
}

// ConsumerNamesRequest is the body of CONSUMER.NAMES and CONSUMER.LIST.
type ConsumerNamesRequest struct {
	PagedRequest
}

// ConsumerUnpinRequest is the body of CONSUMER.UNPIN.
type ConsumerUnpinRequest struct {
	Group string `json:"group"`
}

// ValidPriorityGroup reports whether name is a valid priority group name:
// 1 to 16 of A-Z, a-z, 0-9, '-', '_', '/' and '=' (the reference's rule;
// otherwise 10162).
func ValidPriorityGroup(name string) bool {
	if len(name) == 0 || len(name) > 16 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '-', c == '_', c == '/', c == '=':
		default:
			return false
		}
	}
	return true
}

// ConsumerInfoResponse replies to CONSUMER.CREATE and CONSUMER.INFO.
type ConsumerInfoResponse struct {
	Response
	*ConsumerInfo
}

// ConsumerNamesResponse replies to CONSUMER.NAMES.
type ConsumerNamesResponse struct {
	Response
	Paged
	Consumers []string `json:"consumers"`
}

// ConsumerListResponse replies to CONSUMER.LIST.
type ConsumerListResponse struct {
	Response
	Paged
	Consumers []*ConsumerInfo `json:"consumers"`
	Missing   []string        `json:"missing,omitempty"`
}
