package jetstream

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/broker/jsapi"
	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/replicator"
)

// Defaults of Config.
const (
	DefaultLeaseTTL       = 3 * time.Second
	DefaultCursorPersist  = 100 * time.Millisecond
	DefaultParkTimeout    = 10 * time.Second
	DefaultAPIConcurrency = 64
	// Bundle ownership (Config.PlacementInterval and after).
	DefaultBundles           = 4
	DefaultPlacementInterval = 250 * time.Millisecond
	DefaultAcquireGrace      = 2 * time.Second
	DefaultLoadThreshold     = 1
	DefaultHandoverTimeout   = 10 * time.Second
)

// Namespace is what the service needs of a namespace's policies
// (ARCHITECTURE §5; tenancy's Policies, decoded by the region).
type Namespace struct {
	// AutoCreateTopics lets a publish on "t.ns.topic" create the topic.
	AutoCreateTopics bool
	// Retention of auto-created topics (JetStream's model): mode limits,
	// interest or workqueue, and limits (0 = unlimited).
	Retention         string
	MaxAge            time.Duration
	MaxBytes, MaxMsgs int64
	DuplicateWindow   time.Duration
	// Bundles is the number of hash bundles the namespace's topics are
	// split into, each owned by one broker (default 4).
	Bundles int
	// Replication lists the regions the namespace's topics are mirrored
	// across (ARCHITECTURE §4). When it names Config.Region, each topic's
	// owner runs a replicator cursor to every other region listed.
	Replication []string
	// ReplicationEpochs is, per region of Replication, the epoch it was
	// added in ("" or absent: since the namespace was seeded). A
	// replicator cursor's persisted position of another epoch is void
	// (repl_decom.go).
	ReplicationEpochs map[string]string
	// Parked are the regions a pending decommission removed from
	// Replication, with their epochs there: their cursors' positions
	// (of that epoch) are kept and hold the retained messages back until
	// the decommission is confirmed (deleted) or cancelled (resumed).
	Parked map[string]string
	// Offload is the namespace's offload policy (ARCHITECTURE §6): closed
	// ledgers move to the region's tier past its threshold. Nil: only on
	// request (admin offload).
	Offload *mledger.OffloadPolicy
	// MaxConsumers bounds the consumers per topic (0: unlimited).
	MaxConsumers int
	// SubscriptionExpiry deletes a durable consumer inactive this long
	// (0: never; a consumer's own inactive_threshold comes first).
	SubscriptionExpiry time.Duration
	// BacklogQuota bounds each subscription's backlog (Pulsar's backlog
	// quota); nil: none. Replicator and internal cursors are exempt.
	BacklogQuota *BacklogQuota
}

// BacklogQuota is a namespace's per-subscription backlog limit: Size in
// bytes and Age of the oldest unacknowledged message (0: that bound
// off), and Policy, what happens past either: tenancy.BacklogHold
// ("producer_request_hold": publishes wait, up to a bound, then are
// refused), tenancy.BacklogReject ("producer_exception": refused) or
// tenancy.BacklogEvictOld ("consumer_backlog_eviction": the
// subscription's oldest messages are acknowledged for it).
type BacklogQuota struct {
	Size   int64
	Age    time.Duration
	Policy string
}

// Config configures a Service.
type Config struct {
	// Name is this broker's name, unique in the region (the broker's
	// ServerName); it is the value of the ownership elections it wins and
	// the address of its internal subjects. Required.
	Name string
	// Store is the region's metadata store; Ledgers its ledger client.
	// Required.
	Store   *meta.Store
	Ledgers *ledger.Client
	// Ensemble, WriteQuorum and AckQuorum are the BookKeeper replication
	// of new ledgers (E >= Qw >= Qa >= 1). Required.
	Ensemble, WriteQuorum, AckQuorum int
	// Rollover closes a topic's open ledger and opens the next when any
	// limit is reached (entries, bytes, age; 0 = that limit off).
	RolloverEntries, RolloverBytes int64
	RolloverAge                    time.Duration
	// Tier is the region's tier for offloaded ledgers (package tiered);
	// nil: none.
	Tier mledger.Tier
	// Policies is where the tenants and namespaces are, and their
	// policies: the namespaces publishes may auto-create topics in and
	// streams may live in. It changes at run time; the caller calls
	// PoliciesChanged after each change. Nil: no namespaces.
	Policies Policies
	// Quotas, when set, enforces tenant quotas (publish rate and bytes at
	// the origin, storage, topics, consumers). Nil: none.
	Quotas Quotas
	// AccountSpaces says that tenants' clients log in to accounts of their
	// own (broker.JWTAuth): the broker's own messages for a topic's core
	// subscribers (replicated copies, advisories) are published in the
	// topic's tenant's subject space (broker.AccountSubject). False: one
	// subject space for everyone (auth off).
	AccountSpaces bool
	// DefaultTenant and DefaultNamespace are where streams created
	// through the JetStream API live when the connection has no tenant
	// (the topology's defaults.jetstream).
	DefaultTenant, DefaultNamespace string
	// LeaseTTL is the broker's ownership lease: after a crash, its topics
	// move to another broker within about this long. Default 3 s (etcd's
	// floor is 2 s).
	LeaseTTL time.Duration
	// CursorPersist is how often a consumer's changed cursor is written to
	// etcd (an AckSync persists at once). Default 100 ms: a crash loses at
	// most this much of acks, which then cause redelivery.
	CursorPersist time.Duration
	// ParkTimeout bounds how long a message for a topic with no owner
	// (during a takeover) waits for one before it is dropped (the client
	// retries). Default 10 s. A JetStream publish parked for a topic its
	// owner cannot open for want of writable bookies is answered with
	// that error (10077) after 1 s instead.
	ParkTimeout time.Duration
	// PlacementInterval is how often a broker reviews bundle ownership
	// besides whenever the ownership keys change. Default 250 ms.
	PlacementInterval time.Duration
	// AcquireGrace: a bundle left without an owner this long is acquired
	// by whichever broker gets there first, not only by the one placement
	// picks (when brokers disagree for a while). Default 2 s.
	AcquireGrace time.Duration
	// LoadThreshold is how many more bundles than the least loaded live
	// broker a broker keeps before it hands one over (load shedding).
	// Default 1: an even spread.
	LoadThreshold int
	// HandoverTimeout bounds closing a bundle's topics when it is handed
	// over (unload, shedding, SIGTERM); after it the next owner recovers
	// what was not closed. Default 10 s.
	HandoverTimeout time.Duration
	// MemberDown reports whether the membership layer (the region's Serf
	// pool) considers broker name's run instance dead (failed; not a broker
	// that left gracefully, which hands its bundles over itself). A live broker
	// then revokes that broker's ownership lease so that its bundles move
	// at once instead of after LeaseTTL. Nil: only lease expiry moves
	// them.
	MemberDown func(name, instance string) bool
	// Instance identifies this broker's process run (e.g. a random id,
	// also given to the membership layer), recorded in its registration
	// and passed to MemberDown so that a failure of an earlier run is not
	// taken for this one's. Optional.
	Instance string
	// Region is this broker's region (ARCHITECTURE §4): the origin of
	// the messages published here. "" records no origins and replicates
	// nothing (tests of a single region).
	Region string
	// RemoteBrokers returns the NATS URLs of the live brokers of region
	// (the Serf WAN pool's members tagged with it): where replicator
	// cursors send. Nil: nothing is replicated out.
	RemoteBrokers func(region string) []string
	// LinkOptions are the replication links' extra nats.go options (how
	// they log in to the remote region: link.Config.Options).
	LinkOptions []nats.Option
	// LinkTLS, when set, is the client config of the replication links to
	// other regions' brokers (link.Config.TLS). Nil: plaintext.
	LinkTLS *tls.Config
	// Replicator tunes replicator cursors (send window, batching,
	// backoff, stall time); zero fields take replicator's defaults.
	Replicator replicator.Config
	// RelayDelay is how long another region must stay behind what this
	// region holds of a stream before this region relays its copies
	// there (repl_relay.go). Default 5 s: longer costs latency on a cut
	// link; shorter may relay copies the origin was about to deliver
	// (harmless duplicates, but double traffic).
	RelayDelay time.Duration
	// SubSyncInterval is how often a replicated subscription ships its
	// ack set to the other regions. Default 1 s: a consumer that moves
	// region gets at most about this much of acks again.
	SubSyncInterval time.Duration
	// Backlog tunes the namespaces' backlog quotas (backlog.go).
	Backlog BacklogConfig
	// TestHooks enables the audit's test hooks (testhooks.go): removing
	// a message from this region's copy, freezing a replicator cursor.
	// Off (false) in production; region sets it from STRATA_TEST_HOOKS=1.
	TestHooks bool

	// CursorDrop tunes the deletion of replicator cursor positions of
	// regions that left a replication list (repl_decom.go).
	CursorDrop CursorDropConfig
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.CursorPersist == 0 {
		c.CursorPersist = DefaultCursorPersist
	}
	if c.ParkTimeout == 0 {
		c.ParkTimeout = DefaultParkTimeout
	}
	if c.PlacementInterval <= 0 {
		c.PlacementInterval = DefaultPlacementInterval
	}
	if c.AcquireGrace <= 0 {
		c.AcquireGrace = DefaultAcquireGrace
	}
	if c.LoadThreshold <= 0 {
		c.LoadThreshold = DefaultLoadThreshold
	}
	if c.HandoverTimeout <= 0 {
		c.HandoverTimeout = DefaultHandoverTimeout
	}
	if c.SubSyncInterval <= 0 {
		c.SubSyncInterval = DefaultSubSyncInterval
	}
	c.Backlog = c.Backlog.withDefaults()
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Policies == nil {
		c.Policies = noPolicies{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("jetstream: Config.Name is required"))
	}
	if c.Store == nil || c.Ledgers == nil {
		errs = append(errs, errors.New("jetstream: Config.Store and Config.Ledgers are required"))
	}
	if !(c.Ensemble >= c.WriteQuorum && c.WriteQuorum >= c.AckQuorum && c.AckQuorum >= 1) {
		errs = append(errs, errors.New("jetstream: need ensemble >= write_quorum >= ack_quorum >= 1"))
	}
	if (c.DefaultTenant == "") != (c.DefaultNamespace == "") {
		errs = append(errs, errors.New("jetstream: DefaultTenant and DefaultNamespace are set together (defaults.jetstream)"))
	}
	return errors.Join(errs...)
}

// limits turns a stream configuration into the managed ledger's limits.
func (c Config) limits(sc *jsapi.StreamConfig) mledger.Limits {
	l := mledger.Limits{
		MaxMsgs: sc.MaxMsgs, MaxBytes: sc.MaxBytes, MaxAge: sc.MaxAge,
		MaxMsgSize: sc.MaxMsgSize, DiscardNew: sc.Discard == "new",
		DuplicateWindow: sc.Duplicates,
		RolloverEntries: c.RolloverEntries, RolloverBytes: c.RolloverBytes, RolloverAge: c.RolloverAge,
	}
	return l
}
