package tenancy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Tenant owns namespaces, admins and mesh-wide quotas (ARCHITECTURE §5).
type Tenant struct {
	Name string `json:"name"`
	// Admins are the tenant-admin principals (names; tokens are issued to
	// them with `strata admin tokens create --tenant`).
	Admins []string `json:"admins,omitempty"`
	Quotas Quotas   `json:"quotas"`
}

// Quotas are a tenant's mesh-wide limits, all regions together; 0 means
// unlimited (ARCHITECTURE §5, issue 25).
//
//   - PublishRate (messages/s) and PublishBytes (bytes/s, payload and
//     headers) count a message once, in the region where it was first
//     published (its origin); replicated copies are not charged again.
//   - Storage (bytes) counts what the tenant's topics hold on bookies
//     and in tiers, every region's copy counted.
//   - Topics, Connections (client connections) and Consumers (durable and
//     ephemeral) are counts, mesh-wide.
//
// Regions optionally caps the two rates in single regions (see
// RegionQuotas); the counts and storage have mesh-wide limits only.
type Quotas struct {
	PublishRate  int64 `json:"publish_rate"`
	PublishBytes int64 `json:"publish_bytes"`
	Storage      int64 `json:"storage"`
	Topics       int64 `json:"topics"`
	Connections  int64 `json:"connections"`
	Consumers    int64 `json:"consumers"`
	// Regions are per-region caps by region name (nil or absent: none).
	// Each must name a region of the mesh (ValidateIn).
	Regions map[string]RegionQuotas `json:"regions,omitempty"`
}

// MaxQuota is the largest quota value: 2^53, the largest integer the
// quota core (float64 arithmetic) holds exactly.
const MaxQuota = 1 << 53

// RegionQuotas caps a tenant's publish rates in one region: that region
// never gets more than the cap of the mesh-wide limit, whatever its
// demand; the rest of the limit stays for the other regions. 0 is no cap
// beyond the mesh-wide limit. A cap needs the mesh-wide limit of its
// quota (a cap of an unlimited quota would be ignored, so it is refused)
// and is at most that limit. Units: messages/s, bytes/s.
//
// Only the rates have per-region caps: they are split between regions by
// leases, so a region's share can be held under a cap; storage and the
// counts are checked against their mesh-wide use, where a per-region cap
// would not bound anything.
type RegionQuotas struct {
	PublishRate  int64 `json:"publish_rate"`
	PublishBytes int64 `json:"publish_bytes"`
}

// MaxRegionQuotas bounds the per-region caps of one tenant.
const MaxRegionQuotas = 64

// Namespace is tenant/name and its policies.
type Namespace struct {
	Tenant   string   `json:"tenant"`
	Name     string   `json:"name"`
	Policies Policies `json:"policies"`
	// ReplicationEpochs is, per region of the replication list, the
	// stamp of the write that added it (absent: listed since the
	// namespace was seeded). Set by the store on every write, never by
	// a client; replicator cursor positions of another epoch are void
	// (decom.go).
	ReplicationEpochs map[string]HLC `json:"replication_epochs,omitempty"`
	// Parked are the regions a pending decommission took out of the
	// list, with their epochs: their replicator cursors keep their
	// positions (decom.go). Kept by every write until the decommission
	// is confirmed or cancelled, never set by a client.
	Parked map[string]HLC `json:"parked,omitempty"`
}

// NS is the namespace's name.
func (n Namespace) NS() NSName { return NSName{Tenant: n.Tenant, Namespace: n.Name} }

// Retention modes (JetStream's model).
const (
	RetentionLimits    = "limits"
	RetentionInterest  = "interest"
	RetentionWorkQueue = "workqueue"
)

// Backlog quota policies (Pulsar's).
const (
	BacklogHold     = "producer_request_hold"
	BacklogReject   = "producer_exception"
	BacklogEvictOld = "consumer_backlog_eviction"
)

// Defaults of Policies.
const (
	DefaultBundles     = 4
	DefaultDedupWindow = 2 * Minute // JetStream's duplicate window
)

// Policies are a namespace's policies (ARCHITECTURE §5, Pulsar's
// namespace policies in JetStream's terms). Every field applies to the
// namespace's existing topics too, not only to new ones.
type Policies struct {
	// Replication lists the regions the namespace's topics are mirrored
	// across (ARCHITECTURE §4). At least one region.
	Replication []string `json:"replication"`
	// Retention of the namespace's topics (those not created through the
	// JetStream API with limits of their own).
	Retention Retention `json:"retention"`
	// BacklogQuota limits a subscription's backlog; nil: none.
	BacklogQuota *BacklogQuota `json:"backlog_quota"`
	// Offload moves closed ledgers to the region's tier; nil: only on
	// request.
	Offload *Offload `json:"offload"`
	// MessageTTL drops messages older than this (0: never).
	MessageTTL Duration `json:"message_ttl"`
	// DedupWindow is the Nats-Msg-Id duplicate window (0: off).
	DedupWindow Duration `json:"dedup_window"`
	// Bundles is the number of hash bundles the topics are split into
	// (≥ 1; changing it moves topics between bundles, not data).
	Bundles int `json:"bundles"`
	// AutoCreateTopics lets a publish on "tenant.namespace.topic" create
	// the topic.
	AutoCreateTopics bool `json:"auto_create_topics"`
	// MaxConsumers bounds the consumers (subscriptions) per topic (0:
	// unlimited).
	MaxConsumers int `json:"max_consumers"`
	// SubscriptionExpiry deletes a subscription inactive this long (0:
	// never).
	SubscriptionExpiry Duration `json:"subscription_expiry"`
}

// Retention follows JetStream: a zero limit is unlimited.
type Retention struct {
	Mode     string   `json:"mode"` // limits | interest | workqueue
	Time     Duration `json:"time"`
	Size     int64    `json:"size"`     // bytes
	Messages int64    `json:"messages"` // count
}

// BacklogQuota is Pulsar's backlog quota: size in bytes, time as age of
// the oldest unacknowledged message, and what happens when exceeded.
type BacklogQuota struct {
	Size   int64    `json:"size"`
	Time   Duration `json:"time"`
	Policy string   `json:"policy"`
}

// Offload moves closed ledgers to the tier once a topic's bookie data
// exceeds Threshold bytes (0: as soon as a ledger closes); the bookie
// copies go DeletionLag later.
type Offload struct {
	Threshold   int64    `json:"threshold"`
	DeletionLag Duration `json:"deletion_lag"`
}

// DefaultPolicies are a new namespace's policies in a mesh of regions:
// replicated across all of them, unlimited limits retention, dedup over
// two minutes, 4 bundles, topics auto-created.
func DefaultPolicies(regions []string) Policies {
	return Policies{
		Replication:      slices.Clone(regions),
		Retention:        Retention{Mode: RetentionLimits},
		DedupWindow:      DefaultDedupWindow,
		Bundles:          DefaultBundles,
		AutoCreateTopics: true,
	}
}

// FieldError is a validation error about one field, named by its JSON
// path ("policies.retention.mode").
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Limits of names (a tenant or namespace name is a token of a NATS
// subject, and every stored message's subject starts with both) and of a
// tenant's admins.
const (
	MaxNameLen      = 64
	MaxAdmins       = 100
	MaxAdminNameLen = 128
)

func checkName(field, what, name string) error {
	switch {
	case !ValidToken(name):
		return fieldErr(field, "%q is not a valid %s name: want [A-Za-z0-9_-]+", name, what)
	case len(name) > MaxNameLen:
		return fieldErr(field, "a %s name is at most %d characters, not %d", what, MaxNameLen, len(name))
	}
	return nil
}

// Validate checks t without knowing the mesh's regions: per-region caps
// need valid region names only. Errors are FieldErrors joined
// (errors.Join).
func (t *Tenant) Validate() error { return t.ValidateIn(nil) }

// ValidateIn checks t against the mesh's regions: names, admins, every
// quota 0 or more, and each per-region cap (quotas.regions.R) naming one
// of regions (nil: any valid region name), of a quota that has a
// mesh-wide limit, at most that limit. Errors are FieldErrors named by
// their JSON path ("quotas.regions.eu-north"), joined, regions in name
// order.
func (t *Tenant) ValidateIn(regions []string) error {
	var errs []error
	if err := checkName("name", "tenant", t.Name); err != nil {
		errs = append(errs, err)
	}
	if len(t.Admins) > MaxAdmins {
		errs = append(errs, fieldErr("admins", "at most %d admins, not %d", MaxAdmins, len(t.Admins)))
	}
	for i, a := range t.Admins {
		if i >= MaxAdmins {
			break
		}
		if a == "" || len(a) > MaxAdminNameLen || strings.IndexFunc(a, func(r rune) bool { return r <= ' ' || r == 0x7f || r == utf8.RuneError }) >= 0 {
			errs = append(errs, fieldErr(fmt.Sprintf("admins[%d]", i), "an admin name is 1 to %d printable characters without spaces", MaxAdminNameLen))
		}
	}
	q := t.Quotas
	for _, f := range []struct {
		name string
		v    int64
	}{{"publish_rate", q.PublishRate}, {"publish_bytes", q.PublishBytes}, {"storage", q.Storage},
		{"topics", q.Topics}, {"connections", q.Connections}, {"consumers", q.Consumers}} {
		if f.v < 0 {
			errs = append(errs, fieldErr("quotas."+f.name, "must be 0 (unlimited) or more, got %d", f.v))
		}
		if f.v > MaxQuota {
			errs = append(errs, fieldErr("quotas."+f.name, "at most %d (2^53), got %d", int64(MaxQuota), f.v))
		}
	}
	errs = append(errs, q.validateRegions(regions)...)
	return errors.Join(errs...)
}

// validateRegions checks the per-region caps (ValidateIn).
func (q Quotas) validateRegions(regions []string) []error {
	if len(q.Regions) > MaxRegionQuotas {
		return []error{fieldErr("quotas.regions", "at most %d regions, not %d", MaxRegionQuotas, len(q.Regions))}
	}
	names := make([]string, 0, len(q.Regions))
	for r := range q.Regions {
		names = append(names, r)
	}
	slices.Sort(names)
	var errs []error
	for _, r := range names {
		f := "quotas.regions." + r
		switch {
		case regions != nil && !slices.Contains(regions, r):
			errs = append(errs, fieldErr(f, "no such region in the topology (regions: %s)", strings.Join(regions, ", ")))
			continue
		case regions == nil && (!ValidToken(r) || len(r) > MaxNameLen):
			errs = append(errs, fieldErr(f, "%q is not a valid region name", r))
			continue
		}
		c := q.Regions[r]
		for _, v := range []struct {
			name       string
			cap, limit int64
		}{{"publish_rate", c.PublishRate, q.PublishRate}, {"publish_bytes", c.PublishBytes, q.PublishBytes}} {
			switch {
			case v.cap < 0:
				errs = append(errs, fieldErr(f+"."+v.name, "must be 0 (no cap) or more, got %d", v.cap))
			case v.cap > 0 && v.limit == 0:
				errs = append(errs, fieldErr(f+"."+v.name, "a per-region cap needs a mesh-wide limit: quotas.%s is 0 (unlimited)", v.name))
			case v.cap > v.limit && v.limit > 0:
				errs = append(errs, fieldErr(f+"."+v.name, "%d is over the mesh-wide limit quotas.%s (%d)", v.cap, v.name, v.limit))
			}
		}
	}
	return errs
}

// Validate checks n against the mesh's regions; errors are FieldErrors
// joined.
func (n *Namespace) Validate(regions []string) error {
	var errs []error
	if err := checkName("tenant", "tenant", n.Tenant); err != nil {
		errs = append(errs, err)
	}
	if err := checkName("name", "namespace", n.Name); err != nil {
		errs = append(errs, err)
	}
	if err := n.Policies.Validate(regions); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Validate checks the policies against the mesh's regions (nil regions:
// any region name is accepted); errors are FieldErrors named
// "policies.…", joined.
func (p *Policies) Validate(regions []string) error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fieldErr("policies."+field, format, args...))
	}
	if len(p.Replication) == 0 {
		add("replication", "must name at least one region")
	}
	seen := map[string]bool{}
	for i, r := range p.Replication {
		f := fmt.Sprintf("replication[%d]", i)
		switch {
		case regions != nil && !slices.Contains(regions, r):
			add(f, "unknown region %q (regions: %v)", r, regions)
		case regions == nil && !ValidToken(r):
			add(f, "%q is not a valid region name", r)
		case seen[r]:
			add(f, "region %q is listed twice", r)
		}
		seen[r] = true
	}
	switch p.Retention.Mode {
	case RetentionLimits, RetentionInterest, RetentionWorkQueue:
	default:
		add("retention.mode", "%q: want limits, interest or workqueue", p.Retention.Mode)
	}
	nonNeg := func(field string, v int64) {
		if v < 0 {
			add(field, "must be 0 (unlimited) or more, got %d", v)
		}
	}
	nonNeg("retention.time", int64(p.Retention.Time))
	nonNeg("retention.size", p.Retention.Size)
	nonNeg("retention.messages", p.Retention.Messages)
	if b := p.BacklogQuota; b != nil {
		nonNeg("backlog_quota.size", b.Size)
		nonNeg("backlog_quota.time", int64(b.Time))
		switch b.Policy {
		case BacklogHold, BacklogReject, BacklogEvictOld:
		default:
			add("backlog_quota.policy", "%q: want %s, %s or %s", b.Policy, BacklogHold, BacklogReject, BacklogEvictOld)
		}
	}
	if o := p.Offload; o != nil {
		nonNeg("offload.threshold", o.Threshold)
		nonNeg("offload.deletion_lag", int64(o.DeletionLag))
	}
	nonNeg("message_ttl", int64(p.MessageTTL))
	nonNeg("dedup_window", int64(p.DedupWindow))
	nonNeg("subscription_expiry", int64(p.SubscriptionExpiry))
	nonNeg("max_consumers", int64(p.MaxConsumers))
	if p.Bundles < 1 || p.Bundles > 1024 {
		add("bundles", "must be 1 to 1024, got %d", p.Bundles)
	}
	return errors.Join(errs...)
}
