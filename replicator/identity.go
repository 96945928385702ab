package replicator

import (
	"errors"
	"fmt"
	"time"

	"github.com/stratamesh/strata/tenancy"
)

// validateTopic returns nil, or an error wrapping both ErrInvalid and
// tenancy.ErrInvalidName that names every part of t that is not a token.
func validateTopic(t tenancy.Name) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// Origin is the identity every stored entry carries in its envelope
// (ARCHITECTURE §4): where and when a message was first published. It is
// the same in every region that holds a copy.
type Origin struct {
	// Region is the region the message was published in.
	Region string `json:"region"`
	// Incarnation is the topic incarnation's UUID at the origin, made when
	// the topic is created there: a topic deleted and re-created, or a
	// region rebuilt from an empty data dir, gets a new one, so its
	// sequences never collide with the old ones.
	Incarnation string `json:"incarnation"`
	// Seq is the origin sequence: 1-based and gap-free per topic, region
	// and incarnation (the n-th message that region originated).
	Seq uint64 `json:"seq"`
	// Time is the origin's publish time.
	Time time.Time `json:"time"`
}

// Stream returns the key of o's origin stream in topic.
func (o Origin) Stream(topic tenancy.Name) Stream {
	return Stream{Topic: topic, Region: o.Region, Incarnation: o.Incarnation}
}

// Stream is one origin's sequence of messages in a topic: the key of a
// receiver's high-water mark (topic, origin region, incarnation).
type Stream struct {
	Topic       tenancy.Name `json:"topic"`
	Region      string       `json:"region"`
	Incarnation string       `json:"incarnation"`
}

// String returns "tenant/namespace/topic@region/incarnation".
func (s Stream) String() string { return s.Topic.String() + "@" + s.Region + "/" + s.Incarnation }

// validate checks that the stream is fully named.
func (s Stream) validate() error {
	err := validateTopic(s.Topic)
	if s.Region == "" {
		err = errors.Join(err, fmt.Errorf("%w: empty origin region", ErrInvalid))
	}
	if s.Incarnation == "" {
		err = errors.Join(err, fmt.Errorf("%w: empty incarnation", ErrInvalid))
	}
	return err
}
