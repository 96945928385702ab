package topology

import (
	"slices"
	"time"
)

// Built-in defaults, used when the file does not say otherwise.
const (
	// DefaultBrokers is a region's broker count when it lists no brokers.
	DefaultBrokers = 1
	// DefaultBundles is a namespace's number of hash bundles.
	DefaultBundles = 4
	// DefaultMetadataPrefix is the etcd key prefix of a region's metadata.
	DefaultMetadataPrefix = "/strata"
)

// DefaultLedger returns the ledger parameters used when neither the region
// nor defaults.ledger sets them: E=3, Qw=2, Qa=2.
func DefaultLedger() Ledger {
	return Ledger{Ensemble: 3, WriteQuorum: 2, AckQuorum: 2}
}

// DefaultRollover returns the rollover used when neither the region nor
// defaults.rollover sets it: 50000 entries, 256MiB or 4h.
func DefaultRollover() Rollover {
	return Rollover{MaxEntries: 50000, MaxSize: 256 * MiB, MaxAge: Duration(4 * time.Hour)}
}

// applyDefaults fills in every field the file left out, so that code using
// a Mesh never re-applies defaults:
//
//   - defaults.ledger and defaults.rollover: the built-ins above;
//   - a region's ledger and rollover: a copy of defaults.ledger and
//     defaults.rollover;
//   - brokers: 1 when the region lists no broker nodes; bookies: ensemble+1
//     when it lists no bookie nodes (with explicit nodes the count stays 0;
//     use NodesOf);
//   - tier kind fs; metadata embedded unless it lists etcd endpoints,
//     prefix "/strata";
//   - a namespace's replication: every region, in file order; retention
//     mode limits; backlog policy producer_request_hold; bundles 4;
//     auto_create_topics true;
//   - tls.nats_client_certs: none.
//
// data_dir is left as written. Fields written as zero stay zero: the checks
// have reported them where zero is not allowed.
func applyDefaults(m *Mesh) {
	if m.Defaults.Ledger == nil {
		l := DefaultLedger()
		m.Defaults.Ledger = &l
	}
	if m.Defaults.Rollover == nil {
		ro := DefaultRollover()
		m.Defaults.Rollover = &ro
	}
	if m.TLS != nil && m.TLS.NATSClientCerts == "" {
		m.TLS.NATSClientCerts = ClientCertsNone
	}
	regions := make([]string, len(m.Regions))
	for i := range m.Regions {
		defaultRegion(&m.Regions[i], &m.Defaults)
		regions[i] = m.Regions[i].Name
	}
	for i := range m.Tenants {
		for j := range m.Tenants[i].Namespaces {
			defaultNamespace(&m.Tenants[i].Namespaces[j], regions)
		}
	}
}

func defaultRegion(r *Region, d *Defaults) {
	if r.Ledger == nil {
		l := *d.Ledger
		r.Ledger = &l
	}
	if r.Rollover == nil {
		ro := *d.Rollover
		r.Rollover = &ro
	}
	if r.Brokers == 0 && !hasRole(r, RoleBroker) {
		r.Brokers = DefaultBrokers
	}
	if r.Bookies == 0 && !hasRole(r, RoleBookie) {
		r.Bookies = r.Ledger.Ensemble + 1
	}
	if r.Tier.Kind == "" {
		r.Tier.Kind = TierFS
	}
	if len(r.Metadata.Etcd) == 0 {
		r.Metadata.Embedded = true
	}
	if r.Metadata.Prefix == "" {
		r.Metadata.Prefix = DefaultMetadataPrefix
	}
}

func defaultNamespace(ns *Namespace, regions []string) {
	if ns.Replication == nil {
		ns.Replication = slices.Clone(regions)
	}
	if ns.Retention.Mode == "" {
		ns.Retention.Mode = RetentionLimits
	}
	if ns.BacklogQuota != nil && ns.BacklogQuota.Policy == "" {
		ns.BacklogQuota.Policy = BacklogHold
	}
	if ns.Bundles == 0 {
		ns.Bundles = DefaultBundles
	}
	if ns.AutoCreateTopics == nil {
		yes := true
		ns.AutoCreateTopics = &yes
	}
}

func hasRole(r *Region, role string) bool {
	for i := range r.Nodes {
		if r.Nodes[i].Role == role {
			return true
		}
	}
	return false
}
