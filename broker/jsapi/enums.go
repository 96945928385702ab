package jsapi

import (
	"encoding/json"
	"fmt"
	"slices"
)

// JSON enums (spec §2.1). nats.go decodes these strictly: one unknown value
// makes a whole response undecodable, so Validate accepts exactly the
// values nats.go v1.55 decodes and replies must only carry valid values.
//
// Decoding (UnmarshalJSON) accepts the same values plus "" (unset; the
// Set…Defaults methods fill it in) and the aliases the reference accepts
// ("undefined" deliver policy, "none" priority policy); it rejects anything
// else, which the caller answers with ErrInvalidJSON (10025), as the
// reference does. Aliases are normalised on decode, so "none" is never
// echoed back.

// RetentionPolicy is a stream's "retention".
type RetentionPolicy string

// Retention policies.
const (
	RetentionLimits    RetentionPolicy = "limits"
	RetentionInterest  RetentionPolicy = "interest"
	RetentionWorkQueue RetentionPolicy = "workqueue"
)

// StorageType is a stream's "storage".
type StorageType string

// Storage types.
const (
	StorageFile   StorageType = "file"
	StorageMemory StorageType = "memory"
)

// DiscardPolicy is a stream's "discard".
type DiscardPolicy string

// Discard policies.
const (
	DiscardOld DiscardPolicy = "old"
	DiscardNew DiscardPolicy = "new"
)

// Compression is a stream's "compression".
type Compression string

// Compressions.
const (
	CompressionNone Compression = "none"
	CompressionS2   Compression = "s2"
)

// PersistMode is a stream's "persist_mode"; "" (omitted) is the default.
type PersistMode string

// Persist modes.
const (
	PersistDefault PersistMode = "default"
	PersistAsync   PersistMode = "async"
)

// DeliverPolicy is a consumer's "deliver_policy".
type DeliverPolicy string

// Deliver policies.
const (
	DeliverAll            DeliverPolicy = "all"
	DeliverLast           DeliverPolicy = "last"
	DeliverNew            DeliverPolicy = "new"
	DeliverByStartSeq     DeliverPolicy = "by_start_sequence"
	DeliverByStartTime    DeliverPolicy = "by_start_time"
	DeliverLastPerSubject DeliverPolicy = "last_per_subject"
)

// AckPolicy is a consumer's "ack_policy".
type AckPolicy string

// Ack policies. AckFlowControl is valid on the wire (nats.go ≥ 1.49 knows
// it; it serves stream sourcing) but is not part of Strata's subset.
const (
	AckNone        AckPolicy = "none"
	AckAll         AckPolicy = "all"
	AckExplicit    AckPolicy = "explicit"
	AckFlowControl AckPolicy = "flow_control"
)

// ReplayPolicy is a consumer's "replay_policy".
type ReplayPolicy string

// Replay policies.
const (
	ReplayInstant  ReplayPolicy = "instant"
	ReplayOriginal ReplayPolicy = "original"
)

// PriorityPolicy is a consumer's "priority_policy". PriorityNone is "" and
// is omitted from JSON: nats.go fails to decode "none" (spec §2.1), and
// jsm.go fails to decode "".
type PriorityPolicy string

// Priority policies.
const (
	PriorityNone        PriorityPolicy = ""
	PriorityPinned      PriorityPolicy = "pinned_client"
	PriorityOverflow    PriorityPolicy = "overflow"
	PriorityPrioritized PriorityPolicy = "prioritized"
)

// ConsumerAction is the "action" of a consumer create request.
type ConsumerAction string

// Consumer actions: "" creates or updates; "create" fails with
// ErrConsumerAlreadyExists (10148) if a different consumer exists;
// "update" fails with ErrConsumerDoesNotExist (10149) if none exists.
const (
	ActionCreateOrUpdate ConsumerAction = ""
	ActionCreate         ConsumerAction = "create"
	ActionUpdate         ConsumerAction = "update"
)

var (
	retentionValues   = []RetentionPolicy{RetentionLimits, RetentionInterest, RetentionWorkQueue}
	storageValues     = []StorageType{StorageFile, StorageMemory}
	discardValues     = []DiscardPolicy{DiscardOld, DiscardNew}
	compressionValues = []Compression{CompressionNone, CompressionS2}
	persistValues     = []PersistMode{"", PersistDefault, PersistAsync}
	deliverValues     = []DeliverPolicy{DeliverAll, DeliverLast, DeliverNew, DeliverByStartSeq, DeliverByStartTime, DeliverLastPerSubject}
	ackValues         = []AckPolicy{AckNone, AckAll, AckExplicit, AckFlowControl}
	replayValues      = []ReplayPolicy{ReplayInstant, ReplayOriginal}
	priorityValues    = []PriorityPolicy{PriorityNone, PriorityPinned, PriorityOverflow, PriorityPrioritized}
	actionValues      = []ConsumerAction{ActionCreateOrUpdate, ActionCreate, ActionUpdate}
)

func validate[T ~string](field string, v T, allowed []T) error {
	if slices.Contains(allowed, v) {
		return nil
	}
	return fmt.Errorf("jsapi: invalid %s %q", field, string(v))
}

// unmarshalEnum decodes a JSON string into dst, accepting allowed values,
// "" and the given aliases (alias → canonical value). null leaves dst as is.
func unmarshalEnum[T ~string](field string, b []byte, dst *T, allowed []T, aliases ...T) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("jsapi: %s: %w", field, err)
	}
	v := T(s)
	for i := 0; i+1 < len(aliases); i += 2 {
		if v == aliases[i] {
			v = aliases[i+1]
		}
	}
	if v != "" {
		if err := validate(field, v, allowed); err != nil {
			return err
		}
	}
	*dst = v
	return nil
}

// Validate reports whether p is a value nats.go decodes.
func (p RetentionPolicy) Validate() error { return validate("retention", p, retentionValues) }

// Validate reports whether t is a value nats.go decodes.
func (t StorageType) Validate() error { return validate("storage", t, storageValues) }

// Validate reports whether p is a value nats.go decodes.
func (p DiscardPolicy) Validate() error { return validate("discard", p, discardValues) }

// Validate reports whether c is a value nats.go decodes.
func (c Compression) Validate() error { return validate("compression", c, compressionValues) }

// Validate reports whether m is a value nats.go decodes ("" is omitted).
func (m PersistMode) Validate() error { return validate("persist_mode", m, persistValues) }

// Validate reports whether p is a value nats.go decodes.
func (p DeliverPolicy) Validate() error { return validate("deliver_policy", p, deliverValues) }

// Validate reports whether p is a value nats.go decodes.
func (p AckPolicy) Validate() error { return validate("ack_policy", p, ackValues) }

// Validate reports whether p is a value nats.go decodes.
func (p ReplayPolicy) Validate() error { return validate("replay_policy", p, replayValues) }

// Validate reports whether p is a value nats.go decodes; PriorityNone ("")
// is valid and must be omitted (the field is omitempty).
func (p PriorityPolicy) Validate() error { return validate("priority_policy", p, priorityValues) }

// Validate reports whether a is a known action.
func (a ConsumerAction) Validate() error { return validate("action", a, actionValues) }

// UnmarshalJSON implements json.Unmarshaler (see the enum rules above).
func (p *RetentionPolicy) UnmarshalJSON(b []byte) error {
	return unmarshalEnum("retention", b, p, retentionValues)
}

// UnmarshalJSON implements json.Unmarshaler (see the enum rules above).
func (t *StorageType) UnmarshalJSON(b []byte) error {
	return unmarshalEnum("storage", b, t, storageValues)
}

// UnmarshalJSON implements json.Unmarshaler (see the enum rules above).
func (p *DiscardPolicy) UnmarshalJSON(b []byte) error {
	return unmarshalEnum("discard", b, p, discardValues)
}

// UnmarshalJSON implements json.Unmarshaler (see the enum rules above).
func (c *Compression) UnmarshalJSON(b []byte) error {
	return unmarshalEnum("compression", b, c, compressionValues)
}

// UnmarshalJSON implements json.Unmarshaler (see the enum rules above).
func (m *PersistMode) UnmarshalJSON(b []byte) error {
	return unmarshalEnum("persist_mode", b, m, persistValues)
}

// UnmarshalJSON implements json.Unmarshaler; "undefined" means "all".
func (p *DeliverPolicy) UnmarshalJSON(b []byte) error {
	return unmarshalEnum("deliver_policy", b, p, deliverValues, "undefined", DeliverAll)
}

// UnmarshalJSON implements json.Unmarshaler (see the enum rules above).
func (p *AckPolicy) UnmarshalJSON(b []byte) error {
	return unmarshalEnum("ack_policy", b, p, ackValues)
}

// UnmarshalJSON implements json.Unmarshaler (see the enum rules above).
func (p *ReplayPolicy) UnmarshalJSON(b []byte) error {
	return unmarshalEnum("replay_policy", b, p, replayValues)
}

// UnmarshalJSON implements json.Unmarshaler; "none" means PriorityNone.
func (p *PriorityPolicy) UnmarshalJSON(b []byte) error {
	return unmarshalEnum("priority_policy", b, p, priorityValues, "none", PriorityNone)
}

// UnmarshalJSON implements json.Unmarshaler (see the enum rules above).
func (a *ConsumerAction) UnmarshalJSON(b []byte) error {
	return unmarshalEnum("action", b, a, actionValues)
}
