package wire

import (
	"fmt"
	"strings"

	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/tenancy"
)

// SubjectPrefix starts every replication subject.
const SubjectPrefix = "$STRATA.REPL."

// Subject is the replication subject of topic t:
// "$STRATA.REPL.<tenant>.<namespace>.<topic>".
func Subject(t tenancy.Name) string {
	return SubjectPrefix + t.Tenant + "." + t.Namespace + "." + t.Topic
}

// ParseSubject returns the topic a replication subject names. Errors
// (wrapping replicator.ErrInvalid): not under SubjectPrefix, not exactly
// three tokens after it, or a token that is not [A-Za-z0-9_-]+.
func ParseSubject(subject string) (tenancy.Name, error) {
	rest, ok := strings.CutPrefix(subject, SubjectPrefix)
	if !ok {
		return tenancy.Name{}, fmt.Errorf("%w: subject %q is not under %s", replicator.ErrInvalid, subject, SubjectPrefix)
	}
	toks := strings.Split(rest, ".")
	if len(toks) != 3 {
		return tenancy.Name{}, fmt.Errorf("%w: replication subject %q: want %s<tenant>.<namespace>.<topic>", replicator.ErrInvalid, subject, SubjectPrefix)
	}
	t := tenancy.Name{Tenant: toks[0], Namespace: toks[1], Topic: toks[2]}
	if err := t.Validate(); err != nil {
		return tenancy.Name{}, fmt.Errorf("%w: replication subject %q: %w", replicator.ErrInvalid, subject, err)
	}
	return t, nil
}
