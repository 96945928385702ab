package jsapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Streams (spec §2.3). Durations are time.Duration, which encodes as integer
// nanoseconds; times are time.Time, which encodes as RFC 3339 — callers
// must set them in UTC (t.UTC()), as the reference does.

// StreamConfig is a stream's configuration, as sent in STREAM.CREATE/UPDATE
// and echoed in StreamInfo. Every field the subset accepts is modelled so it
// is echoed back (nats.go checks the echo); features Strata does not serve
// are kept as raw JSON so they can be detected (Unsupported) and rejected
// with ErrStreamInvalidConfig (10052) instead of being silently dropped.
type StreamConfig struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Subjects    []string        `json:"subjects,omitempty"`
	Retention   RetentionPolicy `json:"retention"`
	// MaxConsumers, MaxMsgs, MaxBytes, MaxMsgsPerSubject: -1 = unlimited.
	MaxConsumers      int           `json:"max_consumers"`
	MaxMsgs           int64         `json:"max_msgs"`
	MaxBytes          int64         `json:"max_bytes"`
	MaxAge            time.Duration `json:"max_age"` // 0 = forever
	MaxMsgsPerSubject int64         `json:"max_msgs_per_subject"`
	MaxMsgSize        int32         `json:"max_msg_size,omitempty"` // -1 = unlimited
	Discard           DiscardPolicy `json:"discard"`
	// DiscardNewPerSubject applies discard:new per subject.
	DiscardNewPerSubject bool        `json:"discard_new_per_subject,omitempty"`
	Storage              StorageType `json:"storage"`
	Replicas             int         `json:"num_replicas"` // 0 means 1
	NoAck                bool        `json:"no_ack,omitempty"`
	// Duplicates is the Nats-Msg-Id dedup window (default 2 min).
	Duplicates   time.Duration `json:"duplicate_window,omitempty"`
	Compression  Compression   `json:"compression"`
	FirstSeq     uint64        `json:"first_seq,omitempty"`
	AllowDirect  bool          `json:"allow_direct"`
	MirrorDirect bool          `json:"mirror_direct"`
	Sealed       bool          `json:"sealed"`
	DenyDelete   bool          `json:"deny_delete"`
	DenyPurge    bool          `json:"deny_purge"`
	AllowRollup  bool          `json:"allow_rollup_hdrs"`
	AllowMsgTTL  bool          `json:"allow_msg_ttl"`
	// SubjectDeleteMarkerTTL needs AllowMsgTTL.
	SubjectDeleteMarkerTTL time.Duration        `json:"subject_delete_marker_ttl,omitempty"`
	AllowMsgCounter        bool                 `json:"allow_msg_counter,omitempty"`
	AllowAtomicPublish     bool                 `json:"allow_atomic,omitempty"`
	AllowMsgSchedules      bool                 `json:"allow_msg_schedules,omitempty"`
	AllowBatchPublish      bool                 `json:"allow_batched,omitempty"`
	PersistMode            PersistMode          `json:"persist_mode,omitempty"`
	ConsumerLimits         StreamConsumerLimits `json:"consumer_limits"`
	// Metadata is free-form; Strata reads "strata.namespace" (spec §4).
	Metadata map[string]string `json:"metadata,omitempty"`

	// Placement is echoed and ignored: a region places topics itself.
	Placement json.RawMessage `json:"placement,omitempty"`
	// Features outside the subset, kept verbatim (see Unsupported).
	Mirror           json.RawMessage `json:"mirror,omitempty"`
	Sources          json.RawMessage `json:"sources,omitempty"`
	SubjectTransform json.RawMessage `json:"subject_transform,omitempty"`
	RePublish        json.RawMessage `json:"republish,omitempty"`
}

// StreamConsumerLimits are per-stream defaults for its consumers.
type StreamConsumerLimits struct {
	InactiveThreshold time.Duration `json:"inactive_threshold,omitempty"`
	MaxAckPending     int           `json:"max_ack_pending,omitempty"`
}

// Reference defaults (spec §2.3).
const (
	DefaultDuplicateWindow = 2 * time.Minute
)

// SetDefaults fills unset fields with the reference defaults (spec §2.3):
// retention limits, limits -1, discard old, storage file, compression none,
// num_replicas 1, duplicate_window 2 min (or max_age if shorter), and
// subjects [name] when there are none and no mirror or sources.
func (c *StreamConfig) SetDefaults() {
	if c.Retention == "" {
		c.Retention = RetentionLimits
	}
	for _, p := range []*int64{&c.MaxMsgs, &c.MaxBytes, &c.MaxMsgsPerSubject} {
		if *p == 0 {
			*p = -1
		}
	}
	if c.MaxConsumers == 0 {
		c.MaxConsumers = -1
	}
	if c.MaxMsgSize == 0 {
		c.MaxMsgSize = -1
	}
	if c.Discard == "" {
		c.Discard = DiscardOld
	}
	if c.Storage == "" {
		c.Storage = StorageFile
	}
	if c.Compression == "" {
		c.Compression = CompressionNone
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Duplicates == 0 && len(c.Mirror) == 0 {
		c.Duplicates = DefaultDuplicateWindow
		if c.MaxAge > 0 && c.MaxAge < c.Duplicates {
			c.Duplicates = c.MaxAge
		}
	}
	if len(c.Subjects) == 0 && len(c.Mirror) == 0 && len(c.Sources) == 0 && c.Name != "" {
		c.Subjects = []string{c.Name}
	}
}

// Validate checks what this package can check without broker state: the
// name (ValidStreamName) and that every enum is a value nats.go decodes (so
// call it after SetDefaults). It returns every problem, joined.
func (c *StreamConfig) Validate() error {
	var errs []error
	if !ValidStreamName(c.Name) {
		errs = append(errs, fmt.Errorf("jsapi: invalid stream name %q", c.Name))
	}
	errs = append(errs, c.Retention.Validate(), c.Discard.Validate(),
		c.Storage.Validate(), c.Compression.Validate(), c.PersistMode.Validate())
	return errors.Join(errs...)
}

// Unsupported lists the JSON keys of features set in c that Strata's subset
// does not serve; the broker answers a non-empty list with
// ErrStreamInvalidConfig rather than accept and not echo them.
func (c *StreamConfig) Unsupported() []string {
	var out []string
	for _, f := range []struct {
		key string
		set bool
	}{
		{"mirror", hasJSON(c.Mirror)},
		{"sources", hasJSON(c.Sources)},
		{"subject_transform", hasJSON(c.SubjectTransform)},
		{"republish", hasJSON(c.RePublish)},
		{"mirror_direct", c.MirrorDirect},
		{"sealed", c.Sealed},
		{"allow_msg_counter", c.AllowMsgCounter},
		{"allow_msg_schedules", c.AllowMsgSchedules},
		{"persist_mode", c.PersistMode == PersistAsync},
	} {
		if f.set {
			out = append(out, f.key)
		}
	}
	return out
}

func hasJSON(m json.RawMessage) bool { return len(m) > 0 && string(m) != "null" }

// StreamState is the "state" of a StreamInfo.
type StreamState struct {
	Msgs        uint64    `json:"messages"`
	Bytes       uint64    `json:"bytes"`
	FirstSeq    uint64    `json:"first_seq"`
	FirstTime   time.Time `json:"first_ts"`
	LastSeq     uint64    `json:"last_seq"`
	LastTime    time.Time `json:"last_ts"`
	Consumers   int       `json:"consumer_count"`
	NumDeleted  int       `json:"num_deleted,omitempty"`
	NumSubjects uint64    `json:"num_subjects,omitempty"`
	// Subjects (per-subject counts) only when requested with
	// subjects_filter.
	Subjects map[string]uint64 `json:"subjects,omitempty"`
}

// StreamInfo is the body of stream create/update/info replies and of the
// entries of STREAM.LIST. Config is required: nats.go rejects a StreamInfo
// without it.
type StreamInfo struct {
	Config  StreamConfig `json:"config"`
	Created time.Time    `json:"created"`
	State   StreamState  `json:"state"`
	Domain  string       `json:"domain,omitempty"`
	// TimeStamp is when the info was produced.
	TimeStamp time.Time `json:"ts"`
}

// StreamInfoRequest is the optional body of STREAM.INFO.
type StreamInfoRequest struct {
	PagedRequest
	DeletedDetails bool   `json:"deleted_details,omitempty"`
	SubjectsFilter string `json:"subjects_filter,omitempty"`
}

// StreamPurgeRequest is the optional body of STREAM.PURGE.
type StreamPurgeRequest struct {
	Filter   string `json:"filter,omitempty"`
	Sequence uint64 `json:"seq,omitempty"`
	Keep     uint64 `json:"keep,omitempty"`
}

// StreamNamesRequest is the body of STREAM.NAMES and STREAM.LIST.
type StreamNamesRequest struct {
	PagedRequest
	Subject string `json:"subject,omitempty"`
}

// StreamCreateResponse replies to STREAM.CREATE and STREAM.UPDATE (the
// latter never sets DidCreate).
type StreamCreateResponse struct {
	Response
	*StreamInfo
	DidCreate bool `json:"did_create,omitempty"`
}

// StreamInfoResponse replies to STREAM.INFO.
type StreamInfoResponse struct {
	Response
	Paged
	*StreamInfo
}

// StreamPurgeResponse replies to STREAM.PURGE.
type StreamPurgeResponse struct {
	Response
	Success bool   `json:"success,omitempty"`
	Purged  uint64 `json:"purged"`
}

// StreamNamesResponse replies to STREAM.NAMES.
type StreamNamesResponse struct {
	Response
	Paged
	Streams []string `json:"streams"`
}

// StreamListResponse replies to STREAM.LIST.
type StreamListResponse struct {
	Response
	Paged
	Streams []*StreamInfo `json:"streams"`
	Missing []string      `json:"missing,omitempty"`
}

// PubAck is the reply to a JetStream publish (no "type"). Stream is
// required (nats.go rejects an empty one); Duplicate and Domain are omitted
// when unset.
type PubAck struct {
	Stream    string `json:"stream"`
	Sequence  uint64 `json:"seq"`
	Domain    string `json:"domain,omitempty"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// PubAckResponse is a PubAck or a publish error:
// {"error":{…},"stream":"ORDERS","seq":0} (spec §2.4).
type PubAckResponse struct {
	Error *APIError `json:"error,omitempty"`
	*PubAck
}
