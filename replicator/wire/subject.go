package wire

import (
	"fmt"
	"strings"

	"github.com/stratamesh/strata/replicator"
)

// SubjectPrefix starts every replication subject.
const SubjectPrefix = "$STRATA.REPL."

// Subject is the replication subject of topic t:
// "$STRATA.REPL.<tenant>.<namespace>.<topic>".
func Subject(t replicator.TopicID) string {
	return SubjectPrefix + t.Tenant + "." + t.Namespace + "." + t.Topic
}

// ParseSubject returns the topic a replication subject names. Errors
// (wrapping replicator.ErrInvalid): not under SubjectPrefix, not exactly
// three tokens after it, or a token that is not [A-Za-z0-9_-]+.
func ParseSubject(subject string) (replicator.TopicID, error) {
	rest, ok := strings.CutPrefix(subject, SubjectPrefix)
	if !ok {
		return replicator.TopicID{}, fmt.Errorf("%w: subject %q is not under %s", replicator.ErrInvalid, subject, SubjectPrefix)
	}
	toks := strings.Split(rest, ".")
	if len(toks) != 3 {
		return replicator.TopicID{}, fmt.Errorf("%w: replication subject %q: want %s<tenant>.<namespace>.<topic>", replicator.ErrInvalid, subject, SubjectPrefix)
	}
	t := replicator.TopicID{Tenant: toks[0], Namespace: toks[1], Topic: toks[2]}
	if err := t.Validate(); err != nil {
		return replicator.TopicID{}, fmt.Errorf("replication subject %q: %w", subject, err)
	}
	return t, nil
}
