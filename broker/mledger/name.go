package mledger

import (
	"strings"

	"github.com/stratamesh/strata/tenancy"
)

// TopicsPrefix holds one key per topic, relative to the region's Store
// prefix: TopicKey(n) = "topics/<tenant>/<namespace>/<topic>".
const TopicsPrefix = "topics/"

// TopicKey is the metadata key of topic n, "topics/tenant/namespace/topic".
func TopicKey(n tenancy.Name) string { return TopicsPrefix + n.String() }

// ParseTopicKey is TopicKey's inverse: ok is false for a key that is not
// a valid topic's.
func ParseTopicKey(key string) (tenancy.Name, bool) {
	rest, ok := strings.CutPrefix(key, TopicsPrefix)
	if !ok {
		return tenancy.Name{}, false
	}
	n, err := tenancy.ParseName(rest)
	return n, err == nil
}
