package wire

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/stratamesh/strata/replicator"
	"github.com/stratamesh/strata/tenancy"
)

// Tombstones (ARCHITECTURE §4): a topic deleted or purged in one region
// is deleted or purged in every other region of its replication list,
// by a request on
//
//	$STRATA.RDEL.<tenant>.<namespace>.<topic>
//
// whose payload is a Tombstone and whose reply is a SubSyncReply-shaped
// {"ok":…,"error":…}. A region that got a deletion keeps the tombstone
// so that batches of the deleted incarnations arriving late never
// re-create the topic.

// TombstonePrefix starts every tombstone subject.
const TombstonePrefix = "$STRATA.RDEL."

// TombstoneSubject is the tombstone subject of topic t.
func TombstoneSubject(t tenancy.Name) string {
	return TombstonePrefix + t.Tenant + "." + t.Namespace + "." + t.Topic
}

// ParseTombstoneSubject returns the topic a tombstone subject names;
// errors as ParseSubject's.
func ParseTombstoneSubject(subject string) (tenancy.Name, error) {
	rest, ok := strings.CutPrefix(subject, TombstonePrefix)
	if !ok {
		return tenancy.Name{}, fmt.Errorf("%w: subject %q is not under %s", replicator.ErrInvalid, subject, TombstonePrefix)
	}
	return ParseSubject(SubjectPrefix + rest)
}

// Tombstone kinds: a deletion, a purge, and — sent the same way — a
// stream created or reconfigured through the API, so the other regions
// have it (with no messages yet) or apply the change.
const (
	TombDelete = "delete"
	TombPurge  = "purge"
	TombCreate = "create"
	TombUpdate = "update"
)

// Tombstone is a topic's deletion or purge in its origin region.
type Tombstone struct {
	Kind   string `json:"kind"`   // delete or purge
	Origin string `json:"origin"` // the region where it happened
	// Streams are the origin streams ("region/incarnation") the deleting
	// region knew: its own incarnation and every one replicated into it.
	// Batches of these are dropped afterwards (deletes only).
	Streams []string  `json:"streams,omitempty"`
	At      time.Time `json:"at"`
	// Definition is the topic's definition (create and update: its
	// stream name and configuration, JSON).
	Definition json.RawMessage `json:"definition,omitempty"`
}

// DecodeTombstone parses and checks a tombstone. Errors wrap
// replicator.ErrInvalid: not JSON, an unknown kind, an origin that is not
// a token, a stream that is not "region/incarnation".
func DecodeTombstone(p []byte) (*Tombstone, error) {
	var tb Tombstone
	if err := json.Unmarshal(p, &tb); err != nil {
		return nil, fmt.Errorf("%w: tombstone: %v", replicator.ErrInvalid, err)
	}
	switch tb.Kind {
	case TombDelete, TombPurge:
	case TombCreate, TombUpdate:
		var def map[string]any
		if err := json.Unmarshal(tb.Definition, &def); err != nil || def == nil {
			return nil, fmt.Errorf("%w: tombstone %s: the definition is not a JSON object", replicator.ErrInvalid, tb.Kind)
		}
	default:
		return nil, fmt.Errorf("%w: tombstone kind %q (want delete, purge, create or update)", replicator.ErrInvalid, tb.Kind)
	}
	if !tenancy.ValidToken(tb.Origin) {
		return nil, fmt.Errorf("%w: tombstone origin %q", replicator.ErrInvalid, tb.Origin)
	}
	for _, s := range tb.Streams {
		if r, inc, ok := strings.Cut(s, "/"); !ok || r == "" || inc == "" {
			return nil, fmt.Errorf("%w: tombstone stream %q (want region/incarnation)", replicator.ErrInvalid, s)
		}
	}
	return &tb, nil
}

// EncodeTombstone returns tb's JSON.
func EncodeTombstone(tb *Tombstone) []byte {
	b, _ := json.Marshal(tb)
	return b
}
