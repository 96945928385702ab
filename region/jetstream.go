package region

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/internal/gossip"
)

// newJetStream builds the broker's JetStream layer from the topology: the
// region's ledger replication and rollover, the tenants' namespaces and
// their policies, and defaults.jetstream. It is started once the broker
// listens (startJetStream).
func (n *Node) newJetStream() (*jetstream.Service, error) {
	lc, err := n.ledgers()
	if err != nil {
		return nil, err
	}
	cfg := jetstream.Config{
		Name:     n.name,
		Store:    n.store,
		Ledgers:  lc,
		Policies: &n.cp.view,
		Logger:   n.logger,
		// Serf's failure detection frees a dead broker's bundles before
		// its lease expires (ARCHITECTURE §3 "Ownership").
		MemberDown: n.memberDown,
		Instance:   n.run,
		// Geo-replication (ARCHITECTURE §4): this region is the origin of
		// what is published here, and replicator cursors find the other
		// regions' brokers in the Serf WAN pool.
		Region:        n.cfg.Region,
		RemoteBrokers: n.remoteBrokers,
		LinkOptions:   n.nauth.natsOptions(),
		// With auth.nats, tenants' clients are in accounts of their own.
		AccountSpaces: n.nauth != nil,
		LinkTLS:       n.clientTLS(),
	}
	hooks, err := envTestHooks()
	if err != nil {
		return nil, err
	}
	// The audit's test hooks, only with STRATA_TEST_HOOKS=1 (or audit, in
	// the list; a test hook: never set it in production).
	cfg.TestHooks = hooks.Admin
	if hooks != (testHooks{}) {
		n.logger.Warn("test hooks enabled ("+TestHooksEnv+"): faults are injected", "hooks", fmt.Sprintf("%+v", hooks))
		cfg.CursorDrop.FailFirst, cfg.CursorDrop.Backoff = hooks.DecomFail, hooks.DecomBackoff
		if hooks.DecomBackoff > 0 {
			cfg.CursorDrop.BackoffMax = 4 * hooks.DecomBackoff
		}
	}
	if n.quota != nil {
		// Tenant quotas (ARCHITECTURE §5): the broker's quota Agent.
		cfg.Quotas = n.quota.agent
	}
	// Tiered storage (ARCHITECTURE §6): the region's tier, opened here so
	// that a misconfigured one stops the broker with a clear error.
	tier, err := n.managedTier(context.Background())
	if err != nil {
		return nil, fmt.Errorf("tier of region %s: %w", n.cfg.Region, err)
	}
	cfg.Tier = tier
	if l := n.region.Ledger; l != nil {
		cfg.Ensemble, cfg.WriteQuorum, cfg.AckQuorum = l.Ensemble, l.WriteQuorum, l.AckQuorum
	}
	if r := n.region.Rollover; r != nil {
		cfg.RolloverEntries, cfg.RolloverBytes, cfg.RolloverAge = r.MaxEntries, int64(r.MaxSize), time.Duration(r.MaxAge)
	}
	if js := n.cfg.Mesh.Defaults.JetStream; js != nil {
		cfg.DefaultTenant, cfg.DefaultNamespace = js.Tenant, js.Namespace
	}
	if o := n.region.Ownership; o.LeaseTTL > 0 || o.LoadThreshold > 0 {
		cfg.LeaseTTL, cfg.LoadThreshold = time.Duration(o.LeaseTTL), o.LoadThreshold
	}
	cfg.Replicator.StallAfter = time.Duration(n.region.Replicator.StallAfter)
	cfg.Replicator.BackoffMax = time.Duration(n.region.Replicator.BackoffMax)
	cfg.SubSyncInterval = time.Duration(n.region.Replicator.SyncInterval)
	if n.cfg.OwnershipLeaseTTL > 0 { // a test's override
		cfg.LeaseTTL = n.cfg.OwnershipLeaseTTL
	}
	return jetstream.New(cfg)
}

// memberDown reports whether the region's Serf pool has declared node
// name's run failed (false while it is alive or suspect, when it left
// gracefully — a stopping broker hands its bundles over itself — when the
// pool does not know it, and when the failure Serf remembers is of an
// earlier run than run).
func (n *Node) memberDown(name, run string) bool {
	pool := n.lanRef.Load()
	if pool == nil {
		return false
	}
	for _, m := range pool.Members() {
		if m.Name == name {
			return m.State == gossip.StateFailed && m.Tags[TagRun] == run
		}
	}
	return false
}

// remoteBrokers returns the NATS URLs of region's live brokers in the
// Serf WAN pool (tags region and nats), for replicator cursors.
func (n *Node) remoteBrokers(region string) []string {
	pool := n.wanRef.Load()
	if pool == nil {
		return nil
	}
	var out []string
	for _, m := range pool.Members() {
		if m.State == gossip.StateAlive && m.Tags["region"] == region && m.Tags["mesh"] == n.cfg.Mesh.Name && m.Tags[TagNATS] != "" {
			out = append(out, m.Tags[TagNATS])
		}
	}
	return out
}

// newRunID returns a random run id (16 hex digits).
func newRunID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startJetStream attaches the JetStream layer to the running broker.
func (n *Node) startJetStream(ctx context.Context) error {
	if n.js == nil {
		return nil
	}
	return n.js.Start(ctx, n.broker)
}
