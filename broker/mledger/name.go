package mledger

import (
	"fmt"
	"strings"

	"github.com/stratamesh/strata/replicator"
)

// TopicsPrefix holds one key per topic, relative to the region's Store
// prefix: Name.Key() = "topics/<tenant>/<namespace>/<topic>".
const TopicsPrefix = "topics/"

// Name is a topic's name: tenant/namespace/topic, each a token of
// [A-Za-z0-9_-]+ (ARCHITECTURE §3).
type Name struct{ Tenant, Namespace, Topic string }

// String is "tenant/namespace/topic".
func (n Name) String() string { return n.Tenant + "/" + n.Namespace + "/" + n.Topic }

// TopicID is the topic's mesh-wide name, as the replicator names it.
func (n Name) TopicID() replicator.TopicID {
	return replicator.TopicID{Tenant: n.Tenant, Namespace: n.Namespace, Topic: n.Topic}
}

// Key is the topic's metadata key, "topics/tenant/namespace/topic".
func (n Name) Key() string { return TopicsPrefix + n.String() }

// Validate reports a token that is empty or has a character outside
// [A-Za-z0-9_-].
func (n Name) Validate() error {
	for _, p := range [...]struct{ what, tok string }{{"tenant", n.Tenant}, {"namespace", n.Namespace}, {"topic", n.Topic}} {
		if !validToken(p.tok) {
			return fmt.Errorf("mledger: invalid %s %q: want [A-Za-z0-9_-]+", p.what, p.tok)
		}
	}
	return nil
}

// ParseKey is Key's inverse: ok is false for a key that is not a topic's.
func ParseKey(key string) (Name, bool) {
	rest, ok := strings.CutPrefix(key, TopicsPrefix)
	if !ok {
		return Name{}, false
	}
	return ParseName(rest)
}

// ParseName is String's inverse: ok is false unless s is three valid
// tokens "tenant/namespace/topic".
func ParseName(s string) (Name, bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return Name{}, false
	}
	n := Name{Tenant: parts[0], Namespace: parts[1], Topic: parts[2]}
	if n.Validate() != nil {
		return Name{}, false
	}
	return n, true
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
