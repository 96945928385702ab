package topology

import (
	"path/filepath"
	"time"
)

// Mesh is a whole topology file after decoding, defaulting and validation.
// Field names follow docs/topology.md; the yaml tags are the file's
// keys. Every field that the file may omit has its default filled in by Parse
// (see applyDefaults in defaults.go), so code that consumes a Mesh never
// re-applies defaults.
type Mesh struct {
	// Name is the mesh name (required; a token).
	Name string `yaml:"mesh"`
	// DataDir is the default data directory for `strata up` when --data-dir
	// is not given. Empty means "./strata-data".
	DataDir string `yaml:"data_dir"`
	// Defaults apply to every region that does not override them.
	Defaults Defaults `yaml:"defaults"`
	// Regions are the mesh's regions, at least one, names unique.
	Regions []Region `yaml:"regions"`
	// Tenants and their namespaces.
	Tenants []Tenant `yaml:"tenants"`
	// Auth turns authorization on; nil: off (anyone may call the admin
	// API).
	Auth *Auth `yaml:"auth"`
	// TLS turns TLS on for every listener and link of the mesh (see
	// TLS); nil: every listener is plaintext and etcd takes anonymous
	// clients.
	TLS *TLS `yaml:"tls"`
}

// EnvSuperuserTokenSHA256 is the environment variable a node reads the
// superuser token's hash from when Auth.SuperuserTokenSHA256 is empty
// (`strata up` sets it for its nodes).
const EnvSuperuserTokenSHA256 = "STRATA_SUPERUSER_TOKEN_SHA256"

// Auth is the mesh's authorization (ARCHITECTURE §5 "Credentials").
type Auth struct {
	// Enabled makes every admin API route (but /healthz and /readyz)
	// need "Authorization: Bearer <token>": the mesh
	// superuser's token or an admin token made with `strata admin
	// tokens create`.
	Enabled bool `yaml:"enabled"`
	// SuperuserTokenSHA256 is the hex SHA-256 of the superuser's token.
	// Empty: the environment's STRATA_SUPERUSER_TOKEN_SHA256, which
	// `strata up` sets for its nodes from a token it makes and keeps in
	// <data-dir>/superuser.token.
	SuperuserTokenSHA256 string `yaml:"superuser_token_sha256"`
	// NATS turns NATS decentralized auth on (issue 24): the mesh is the
	// NATS operator, each tenant an account, and every NATS client must
	// log in with a user's credentials (.creds). Nil: NATS clients need no
	// credentials. It needs Enabled (account seeds travel between regions
	// only in configuration batches sealed with the superuser token's
	// hash).
	NATS *NATSAuth `yaml:"nats"`
}

// NATSAuth names the mesh's NATS signing keys: nkey seed files, each
// holding one seed ("SO…", "SA…"; decorated files are read too). A
// relative path is relative to the data directory (`strata up` writes
// both there when they are missing). Every broker of the mesh must read
// the same two seeds.
type NATSAuth struct {
	// OperatorSeedFile holds the operator's seed: it signs the tenants'
	// account JWTs; brokers trust its public key.
	OperatorSeedFile string `yaml:"operator_seed_file"`
	// SystemAccountSeedFile holds the system account's seed: it signs
	// the users the mesh's own connections (replication and configuration
	// links) and the superuser's tools log in as. It is not a tenant.
	SystemAccountSeedFile string `yaml:"system_account_seed_file"`
}

// Files returns the seed files' paths, relative ones joined to dataDir.
func (n *NATSAuth) Files(dataDir string) (operator, system string) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dataDir, p)
	}
	return abs(n.OperatorSeedFile), abs(n.SystemAccountSeedFile)
}

// NATSAuth returns the mesh's NATS auth settings, nil when NATS clients
// need no credentials.
func (m *Mesh) NATSAuth() *NATSAuth {
	if m.Auth == nil || !m.Auth.Enabled {
		return nil
	}
	return m.Auth.NATS
}

// Defaults are applied to regions (ledger, rollover) and to connections
// without a tenant (jetstream). After Parse, Ledger and Rollover are never
// nil (the built-in defaults fill them); JetStream is nil when not set.
type Defaults struct {
	Ledger    *Ledger    `yaml:"ledger"`
	Rollover  *Rollover  `yaml:"rollover"`
	JetStream *JetStream `yaml:"jetstream"`
}

// JetStream names where streams created through the JetStream API live when
// the connection has no tenant (auth off).
type JetStream struct {
	Tenant    string `yaml:"tenant"`
	Namespace string `yaml:"namespace"`
}

// Ledger holds BookKeeper's replication parameters for new ledgers:
// ensemble size E, write quorum Qw and ack quorum Qa, with E ≥ Qw ≥ Qa ≥ 1.
type Ledger struct {
	Ensemble    int `yaml:"ensemble"`
	WriteQuorum int `yaml:"write_quorum"`
	AckQuorum   int `yaml:"ack_quorum"`
}

// Rollover bounds a managed ledger's open ledger: it is closed and a new
// one opened when any limit is reached. Zero means no limit for that field.
// MaxEntries counts messages (a ledger entry holds a batch of them).
type Rollover struct {
	MaxEntries int64    `yaml:"max_entries"`
	MaxSize    Size     `yaml:"max_size"`
	MaxAge     Duration `yaml:"max_age"`
}

// Ownership tunes bundle ownership in a region (ARCHITECTURE §3
// "Ownership"). Zero fields take the defaults.
type Ownership struct {
	// LeaseTTL is a broker's ownership lease: when a broker dies, its
	// bundles move within this long at the latest (sooner when Serf
	// declares it failed). Default 3s; at least 2s (etcd's floor).
	LeaseTTL Duration `yaml:"lease_ttl"`
	// LoadThreshold is how many more bundles than the least loaded broker
	// a broker keeps before it hands one over. Default 1 (an even spread).
	LoadThreshold int `yaml:"load_threshold"`
}

// Replicator tunes a region's replicator cursors (ARCHITECTURE §4
// "Geo-replication"). Zero fields take the defaults.
type Replicator struct {
	// StallAfter is how long a cursor with a backlog may go without
	// progress before it is reported stalled (it keeps retrying).
	// Default 60s; at least 1s.
	StallAfter Duration `yaml:"stall_after"`
	// BackoffMax caps the wait between a failing cursor's retries.
	// Default 5s; at least 100ms.
	BackoffMax Duration `yaml:"backoff_max"`
	// SyncInterval is how often a replicated subscription ships its
	// acknowledgements to the other regions. Default 1s; at least 100ms.
	SyncInterval Duration `yaml:"sync_interval"`
	// ConfigSyncInterval is how often a broker ships the region's whole
	// configuration (tenants, namespaces, policies, tokens) to the other
	// regions (changes go at once): a region back from a partition
	// converges within about this long. Default 3s.
	ConfigSyncInterval Duration `yaml:"config_sync_interval"`
}

// Failover tunes client failover toward the region's brokers (docs/
// architecture.md "Client failover"): when the brokers of this region send
// the guests they hold home. Zero fields take the defaults.
type Failover struct {
	// SwitchBackDelay is how long another region must have been reachable
	// from here and caught up (the replication toward it), without
	// interruption, before this region's brokers close that region's
	// guests so they reconnect home; any loss on the way starts the delay
	// again. Default 30s; at least 100ms.
	SwitchBackDelay Duration `yaml:"switch_back_delay"`
	// CaughtUpLag is the replication lag toward a region, in age of its
	// oldest unacknowledged message, at or under which it counts as
	// caught up. Default 2s.
	CaughtUpLag Duration `yaml:"caught_up_lag"`
}

// Region is one Pulsar-style cluster of the mesh.
type Region struct {
	// Name is the region name (required; a token; unique in the mesh).
	Name string `yaml:"name"`
	// Brokers is the number of brokers (ids b1..bN) when Nodes lists none.
	// Default 1; 0 when Nodes lists brokers. Use NodesOf to get the nodes.
	Brokers int `yaml:"brokers"`
	// Bookies is the number of bookies (ids k1..kN) when Nodes lists none.
	// Default ensemble+1, so an ensemble change has a spare bookie; 0 when
	// Nodes lists bookies.
	Bookies int `yaml:"bookies"`
	// Nodes lists explicit nodes for real deployments. For each role, either
	// the count or explicit nodes may be given, never both.
	Nodes []Node `yaml:"nodes"`
	// Ledger is the region's ledger defaults (from defaults.ledger, else
	// E=3, Qw=2, Qa=2).
	Ledger *Ledger `yaml:"ledger"`
	// Rollover is the region's ledger rollover (from defaults.rollover).
	Rollover *Rollover `yaml:"rollover"`
	// Ownership tunes how the region's brokers own namespace bundles
	// (optional; defaults below).
	Ownership Ownership `yaml:"ownership"`
	// Replicator tunes the replicator cursors of the region's brokers
	// (optional; defaults above).
	Replicator Replicator `yaml:"replicator"`
	// Failover tunes when the region's brokers send other regions'
	// clients home (optional; defaults above).
	Failover Failover `yaml:"failover"`
	// Metadata is "embedded" (one etcd node per region run by strata) or a
	// list of external etcd endpoints.
	Metadata Metadata `yaml:"metadata"`
	// Tier is where closed ledgers are offloaded. Default {kind: fs} under
	// the data dir.
	Tier Tier `yaml:"tier"`
	// WANJoin are Serf WAN seeds (host:port) in other regions. `strata up`
	// fills them in for local meshes.
	WANJoin []string `yaml:"wan_join"`
}

// Node roles.
const (
	RoleBroker = "broker"
	RoleBookie = "bookie"
	RoleMeta   = "meta"
)

// Node is an explicit node of a region. Ports that are zero are chosen
// freely at start (bind port 0) and reported in mesh.json.
type Node struct {
	ID          string `yaml:"id"`
	Role        string `yaml:"role"` // broker | bookie | meta
	Host        string `yaml:"host"`
	NATSPort    int    `yaml:"nats_port"`
	GRPCPort    int    `yaml:"grpc_port"`
	AdminPort   int    `yaml:"admin_port"`
	SerfLANPort int    `yaml:"serf_lan_port"`
	SerfWANPort int    `yaml:"serf_wan_port"`
	ClientPort  int    `yaml:"client_port"` // meta: etcd client port
	PeerPort    int    `yaml:"peer_port"`   // meta: etcd peer port
	DataDir     string `yaml:"data_dir"`
	// JournalDir (bookies only) puts the bookie's journal on its own
	// device, as BookKeeper's journalDirectories do: every add waits for
	// a journal fsync, and on a disk shared with the entry logs each one
	// also flushes their writes. Default: the journal/ directory inside
	// the node's data directory.
	JournalDir string `yaml:"journal_dir"`
}

// Metadata is a region's metadata store: embedded etcd run by strata, or
// external etcd endpoints.
type Metadata struct {
	// Embedded is true for `metadata: embedded` (the default) and for a
	// mapping without etcd endpoints (embedded etcd with a custom prefix).
	Embedded bool `yaml:"-"`
	// Etcd are external etcd client URLs (http:// or https://).
	Etcd []string `yaml:"etcd"`
	// Prefix is the key prefix in etcd. Default "/strata".
	Prefix string `yaml:"prefix"`
}

// Tier kinds.
const (
	TierFS  = "fs"
	TierS3  = "s3"
	TierGCS = "gcs"
)

// Tier is a region's offload target (ARCHITECTURE §6).
type Tier struct {
	Kind      string `yaml:"kind"` // fs | s3 | gcs; default fs
	Bucket    string `yaml:"bucket"`
	Prefix    string `yaml:"prefix"`
	Region    string `yaml:"region"`
	Endpoint  string `yaml:"endpoint"`
	PathStyle bool   `yaml:"path_style"`
	Dir       string `yaml:"dir"`
}

// Tenant owns namespaces and mesh-wide quotas.
type Tenant struct {
	Name       string      `yaml:"name"`
	Admins     []string    `yaml:"admins"`
	Quotas     Quotas      `yaml:"quotas"`
	Namespaces []Namespace `yaml:"namespaces"`
}

// Quotas are mesh-wide limits for a tenant, all regions together. Zero means
// unlimited. The rates count a message once, at its origin region; storage
// counts every region's copy (tenancy.Quotas says what each counts).
type Quotas struct {
	PublishRate  MsgRate  `yaml:"publish_rate"`  // messages per second
	PublishBytes ByteRate `yaml:"publish_bytes"` // bytes per second
	Storage      Size     `yaml:"storage"`       // bytes, bookies + tier, all regions
	Topics       int64    `yaml:"topics"`
	Connections  int64    `yaml:"connections"`
	Consumers    int64    `yaml:"consumers"`
	// Regions caps the publish rates in single regions, by region name
	// (each a region of this file): {us-east: {publish_rate: 600/s}}.
	Regions map[string]RegionQuotas `yaml:"regions"`
}

// RegionQuotas caps a tenant's publish rates in one region (0: no cap
// beyond the mesh-wide limit). A cap needs the mesh-wide limit of its
// quota and is at most that limit. Storage and the counts have no
// per-region caps (tenancy.RegionQuotas says why).
type RegionQuotas struct {
	PublishRate  MsgRate  `yaml:"publish_rate"`
	PublishBytes ByteRate `yaml:"publish_bytes"`
}

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

// Namespace holds the policies of tenant/namespace.
type Namespace struct {
	Name string `yaml:"name"`
	// Replication lists the regions topics are mirrored to. Default: all.
	Replication []string  `yaml:"replication"`
	Retention   Retention `yaml:"retention"`
	// BacklogQuota is nil when not set (no backlog quota).
	BacklogQuota *BacklogQuota `yaml:"backlog_quota"`
	// Offload is nil when not set (never offload).
	Offload    *Offload `yaml:"offload"`
	MessageTTL Duration `yaml:"message_ttl"`
	// Dedup turns Nats-Msg-Id deduplication on (nil: on) over DedupWindow
	// (0: JetStream's two minutes).
	Dedup       *bool    `yaml:"dedup"`
	DedupWindow Duration `yaml:"dedup_window"`
	// MaxConsumers bounds the consumers per topic (0: unlimited).
	MaxConsumers int `yaml:"max_consumers"`
	// SubscriptionExpiry deletes subscriptions inactive this long (0:
	// never).
	SubscriptionExpiry Duration `yaml:"subscription_expiry"`
	// Bundles is the number of hash bundles. Default 4.
	Bundles int `yaml:"bundles"`
	// AutoCreateTopics defaults to true.
	AutoCreateTopics *bool `yaml:"auto_create_topics"`
}

// Retention follows JetStream: an omitted limit is unlimited. Messages -1
// also means unlimited.
type Retention struct {
	Mode     string   `yaml:"mode"` // limits (default) | interest | workqueue
	Time     Duration `yaml:"time"`
	Size     Size     `yaml:"size"`
	Messages int64    `yaml:"messages"`
}

// BacklogQuota limits a subscription's backlog. Policy defaults to
// producer_request_hold.
type BacklogQuota struct {
	Size   Size     `yaml:"size"`
	Time   Duration `yaml:"time"`
	Policy string   `yaml:"policy"`
}

// Offload moves closed ledgers to the region's tier once the topic's data on
// bookies exceeds Threshold bytes (0 = as soon as a ledger closes); bookie
// copies are deleted DeletionLag later.
type Offload struct {
	Threshold   Size     `yaml:"threshold"`
	DeletionLag Duration `yaml:"deletion_lag"`
}

// Size is a byte count, written with units B KB MB GB TB (powers of 1000)
// or KiB MiB GiB TiB (powers of 1024); a bare integer is bytes.
type Size int64

// Duration is a time span written with units ms s m h d, e.g. 500ms, 90s,
// 5m, 4h, 7d, or combined like 1h30m; a bare number needs a unit.
type Duration time.Duration

// MsgRate is messages per second, written "5000/s".
type MsgRate int64

// ByteRate is bytes per second, written "10MiB/s".
type ByteRate int64
