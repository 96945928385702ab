package replicator

import (
	"errors"
	"fmt"
	"time"
)

// TopicID names a topic mesh-wide by (tenant, namespace, topic), as the
// replication subject does (never by a client's subject). Each part is a
// token of [A-Za-z0-9_-]+ (ARCHITECTURE §3 "Topics").
type TopicID struct {
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
	Topic     string `json:"topic"`
}

// String returns "tenant/namespace/topic".
func (t TopicID) String() string { return t.Tenant + "/" + t.Namespace + "/" + t.Topic }

// Validate returns an error wrapping ErrInvalid that names every part
// that is not a token of [A-Za-z0-9_-]+.
func (t TopicID) Validate() error {
	var errs []error
	for _, p := range []struct{ name, v string }{{"tenant", t.Tenant}, {"namespace", t.Namespace}, {"topic", t.Topic}} {
		if !isToken(p.v) {
			errs = append(errs, fmt.Errorf("%w: %s %q is not a token of [A-Za-z0-9_-]+", ErrInvalid, p.name, p.v))
		}
	}
	return errors.Join(errs...)
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
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
func (o Origin) Stream(topic TopicID) Stream {
	return Stream{Topic: topic, Region: o.Region, Incarnation: o.Incarnation}
}

// Stream is one origin's sequence of messages in a topic: the key of a
// receiver's high-water mark (topic, origin region, incarnation).
type Stream struct {
	Topic       TopicID `json:"topic"`
	Region      string  `json:"region"`
	Incarnation string  `json:"incarnation"`
}

// String returns "tenant/namespace/topic@region/incarnation".
func (s Stream) String() string { return s.Topic.String() + "@" + s.Region + "/" + s.Incarnation }

// validate checks that the stream is fully named.
func (s Stream) validate() error {
	err := s.Topic.Validate()
	if s.Region == "" {
		err = errors.Join(err, fmt.Errorf("%w: empty origin region", ErrInvalid))
	}
	if s.Incarnation == "" {
		err = errors.Join(err, fmt.Errorf("%w: empty incarnation", ErrInvalid))
	}
	return err
}
