package wire

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/tenancy"
)

// Replicated subscriptions (ARCHITECTURE §4): every sync interval a
// region ships each replicated consumer's ack set (or what changed of
// it) to the other regions of the topic's replication list, as a request
// on
//
//	$STRATA.RSUB.<tenant>.<namespace>.<topic>
//
// whose payload is a SubSync and whose reply is a SubSyncReply (JSON).
// The receiving region creates the consumer from Config if it lacks it
// and merges Set into its own.

// SubSyncPrefix starts every subscription-sync subject.
const SubSyncPrefix = "$STRATA.RSUB."

// SubSyncSubject is the subscription-sync subject of topic t.
func SubSyncSubject(t tenancy.Name) string {
	return SubSyncPrefix + t.Tenant + "." + t.Namespace + "." + t.Topic
}

// ParseSubSyncSubject returns the topic a subscription-sync subject
// names; errors as ParseSubject's.
func ParseSubSyncSubject(subject string) (tenancy.Name, error) {
	rest, ok := strings.CutPrefix(subject, SubSyncPrefix)
	if !ok {
		return tenancy.Name{}, fmt.Errorf("%w: subject %q is not under %s", replicator.ErrInvalid, subject, SubSyncPrefix)
	}
	return ParseSubject(SubjectPrefix + rest)
}

// SubSync is one consumer's ack set shipped to another region.
type SubSync struct {
	// Origin is the region that ships it.
	Origin string `json:"origin"`
	// Consumer is the durable consumer's name.
	Consumer string `json:"consumer"`
	// Config is the consumer's configuration (JetStream ConsumerConfig
	// JSON): the receiver creates the consumer from it when it lacks it.
	Config json.RawMessage `json:"config"`
	// Set is the ack set, or the part that changed since the last one
	// the receiver acknowledged (replicator.SubSet binary form).
	Set []byte `json:"set"`
}

// SubSyncReply answers a SubSync once the set is merged and persisted.
type SubSyncReply struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// EncodeSubSync returns s's encoding (JSON; Set in base64).
func EncodeSubSync(s *SubSync) []byte {
	b, _ := json.Marshal(s)
	return b
}

// DecodeSubSync parses a SubSync and checks it: a region and consumer
// name that are tokens, a JSON object config, and a set that decodes.
// Errors wrap replicator.ErrInvalid and name the field.
func DecodeSubSync(p []byte) (*SubSync, *replicator.SubSet, error) {
	var s SubSync
	if err := json.Unmarshal(p, &s); err != nil {
		return nil, nil, fmt.Errorf("%w: subscription sync: %v", replicator.ErrInvalid, err)
	}
	if !tenancy.ValidToken(s.Origin) || !tenancy.ValidToken(s.Consumer) {
		return nil, nil, fmt.Errorf("%w: subscription sync: origin %q or consumer %q is not a token of [A-Za-z0-9_-]+", replicator.ErrInvalid, s.Origin, s.Consumer)
	}
	var cfg map[string]any
	if err := json.Unmarshal(s.Config, &cfg); err != nil || cfg == nil {
		return nil, nil, fmt.Errorf("%w: subscription sync: config is not a JSON object", replicator.ErrInvalid)
	}
	set, err := replicator.DecodeSubSet(s.Set)
	if err != nil {
		return nil, nil, fmt.Errorf("subscription sync: set: %w", err)
	}
	return &s, set, nil
}
