package tenancy

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Kind is what a configuration record holds.
type Kind string

// Kinds of Record.
const (
	KindTenant    Kind = "tenant"    // key "tenant", value Tenant
	KindNamespace Kind = "namespace" // key "tenant/namespace", value Namespace
	KindToken     Kind = "token"     // key token id, value Token
)

// Record is one replicated configuration object: a tenant, a namespace
// with its policies, an admin token, or a tenant's NATS account, user or
// revocation (account.go). Every region holds a copy of
// every record; copies merge by last-writer-wins on Stamp, and a delete
// is a record too (a tombstone, Deleted with no Value) so that a region
// which missed it cannot bring the object back.
type Record struct {
	Kind    Kind            `json:"kind"`
	Key     string          `json:"key"`
	Stamp   HLC             `json:"stamp"`
	Deleted bool            `json:"deleted,omitempty"`
	Value   json.RawMessage `json:"value,omitempty"`
}

// ID is the record's identity across regions: "kind/key".
func (r Record) ID() string { return string(r.Kind) + "/" + r.Key }

// Newer reports whether r wins over old under last-writer-wins: a later
// stamp. Equal stamps are the same write (one region made it), so the
// merge keeps what it has.
func (r Record) Newer(old Record) bool { return r.Stamp.Compare(old.Stamp) > 0 }

// Check validates a record received from elsewhere: a known kind, a key
// of that kind's shape, a stamp with a region, a value that decodes
// (and is absent exactly when Deleted).
func (r Record) Check() error {
	if r.Stamp.Region == "" || r.Stamp.Wall <= 0 {
		return fmt.Errorf("tenancy: record %s: stamp %v has no region or wall time", r.ID(), r.Stamp)
	}
	if r.Deleted != (len(r.Value) == 0) {
		return fmt.Errorf("tenancy: record %s: a tombstone has no value and a live record has one", r.ID())
	}
	switch r.Kind {
	case KindTenant:
		if !ValidToken(r.Key) {
			return fmt.Errorf("tenancy: record %s: bad tenant name", r.ID())
		}
		if !r.Deleted {
			var t Tenant
			if err := json.Unmarshal(r.Value, &t); err != nil || t.Name != r.Key {
				return fmt.Errorf("tenancy: record %s: bad tenant value", r.ID())
			}
		}
	case KindNamespace:
		n, err := ParseNSName(r.Key)
		if err != nil {
			return fmt.Errorf("tenancy: record %s: %w", r.ID(), err)
		}
		if !r.Deleted {
			var ns Namespace
			if err := json.Unmarshal(r.Value, &ns); err != nil || ns.NS() != n {
				return fmt.Errorf("tenancy: record %s: bad namespace value", r.ID())
			}
		}
	case KindToken:
		if !ValidToken(r.Key) {
			return fmt.Errorf("tenancy: record %s: bad token id", r.ID())
		}
		if !r.Deleted {
			var t Token
			if err := json.Unmarshal(r.Value, &t); err != nil || t.ID != r.Key {
				return fmt.Errorf("tenancy: record %s: bad token value", r.ID())
			}
		}
	case KindAccount, KindUser, KindRevocation:
		return checkCreds(r)
	case KindDecommission:
		return checkDecommission(r)
	default:
		return fmt.Errorf("tenancy: record %s: unknown kind %q", r.ID(), r.Kind)
	}
	return nil
}

// State is one region's copy of the mesh's configuration: every record,
// tombstones included. Merge is commutative, associative and idempotent,
// so regions that have merged the same records hold the same State
// whatever order they came in (a state-based CRDT). Not safe for
// concurrent use.
type State struct {
	recs map[string]Record
}

// NewState returns an empty State.
func NewState() *State { return &State{recs: map[string]Record{}} }

// Merge takes in r: kept when it is newer than the record of the same
// ID (or there is none). It reports whether the state changed.
func (s *State) Merge(r Record) bool {
	old, ok := s.recs[r.ID()]
	if ok && !r.Newer(old) {
		return false
	}
	s.recs[r.ID()] = r
	return true
}

// Get returns the record of kind and key (tombstones too).
func (s *State) Get(kind Kind, key string) (Record, bool) {
	r, ok := s.recs[string(kind)+"/"+key]
	return r, ok
}

// Records returns every record, sorted by ID.
func (s *State) Records() []Record {
	out := make([]Record, 0, len(s.recs))
	for _, r := range s.recs {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// Len is the number of records, tombstones included.
func (s *State) Len() int { return len(s.recs) }

// Tenant returns live tenant name.
func (s *State) Tenant(name string) (Tenant, bool) {
	r, ok := s.Get(KindTenant, name)
	if !ok || r.Deleted {
		return Tenant{}, false
	}
	var t Tenant
	if json.Unmarshal(r.Value, &t) != nil {
		return Tenant{}, false
	}
	return t, true
}

// Tenants returns the live tenants, sorted by name.
func (s *State) Tenants() []Tenant {
	var out []Tenant
	for _, r := range s.Records() {
		if r.Kind == KindTenant {
			if t, ok := s.Tenant(r.Key); ok {
				out = append(out, t)
			}
		}
	}
	return out
}

// Namespace returns namespace n when it is visible: its record is live
// and so is its tenant's. (A namespace created in one region while its
// tenant was deleted in another stays hidden with the tenant: every
// region decides the same.)
func (s *State) Namespace(n NSName) (Namespace, bool) {
	if _, ok := s.Tenant(n.Tenant); !ok {
		return Namespace{}, false
	}
	r, ok := s.Get(KindNamespace, n.String())
	if !ok || r.Deleted {
		return Namespace{}, false
	}
	var ns Namespace
	if json.Unmarshal(r.Value, &ns) != nil {
		return Namespace{}, false
	}
	return ns, true
}

// Namespaces returns the visible namespaces of tenant ("" = all
// tenants), sorted by name.
func (s *State) Namespaces(tenant string) []Namespace {
	var out []Namespace
	for _, r := range s.Records() {
		if r.Kind != KindNamespace || tenant != "" && !strings.HasPrefix(r.Key, tenant+"/") {
			continue
		}
		n, err := ParseNSName(r.Key)
		if err != nil {
			continue
		}
		if ns, ok := s.Namespace(n); ok {
			out = append(out, ns)
		}
	}
	return out
}

// Token returns live token id.
func (s *State) Token(id string) (Token, bool) {
	r, ok := s.Get(KindToken, id)
	if !ok || r.Deleted {
		return Token{}, false
	}
	var t Token
	if json.Unmarshal(r.Value, &t) != nil {
		return Token{}, false
	}
	return t, true
}

// Tokens returns the live tokens, sorted by id.
func (s *State) Tokens() []Token {
	var out []Token
	for _, r := range s.Records() {
		if r.Kind == KindToken {
			if t, ok := s.Token(r.Key); ok {
				out = append(out, t)
			}
		}
	}
	return out
}

// Errors of the write helpers.
var (
	ErrNotFound = errors.New("tenancy: not found")
	ErrNotEmpty = errors.New("tenancy: not empty")
)

// NewRecord makes the live record of v (a Tenant, Namespace, Token,
// Account, User or Revocation)
// stamped st.
func NewRecord(v any, st HLC) (Record, error) {
	var r Record
	switch x := v.(type) {
	case Tenant:
		r = Record{Kind: KindTenant, Key: x.Name}
	case Namespace:
		r = Record{Kind: KindNamespace, Key: x.NS().String()}
	case Token:
		r = Record{Kind: KindToken, Key: x.ID}
	case Account:
		r = Record{Kind: KindAccount, Key: x.Tenant}
	case User:
		r = Record{Kind: KindUser, Key: x.Key()}
	case Revocation:
		r = Record{Kind: KindRevocation, Key: x.Key()}
	case Decommission:
		r = Record{Kind: KindDecommission, Key: x.Region}
	default:
		return Record{}, fmt.Errorf("tenancy: no record kind for %T", v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return Record{}, err
	}
	r.Stamp, r.Value = st, b
	return r, nil
}

// Tombstone is the delete record of kind/key stamped st.
func Tombstone(kind Kind, key string, st HLC) Record {
	return Record{Kind: kind, Key: key, Stamp: st, Deleted: true}
}
