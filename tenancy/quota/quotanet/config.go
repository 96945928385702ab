package quotanet

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/stratamesh/strata/broker"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/tenancy/quota"
)

// Bus is the broker's internal messaging (broker.Server implements it):
// subscriptions and publishes of the broker itself, reaching every broker
// of the region over its routes.
type Bus interface {
	SubscribeInternal(subject string, fn broker.InternalHandler) (func(), error)
	PublishInternal(subject, reply, hdr, payload []byte)
}

// Clock is the drivers' time. It must never jump: leases are compared
// with it (quota's package doc), so a wall clock stepped by NTP would
// stretch or cut them. NewClock's is the wall time at its creation plus
// the monotonic time since, without a monotonic reading of its own, so
// that times made from Unix nanoseconds (echoed sends) compare with it
// on the same scale.
type Clock func() time.Time

// NewClock is a Clock starting at time.Now() and advancing with the
// monotonic clock: one per process, shared by its Agent and Coordinator.
func NewClock() Clock {
	start := time.Now()
	wall := start.Round(0) // adding to it is cheaper than Add then Round, per publish
	return func() time.Time { return wall.Add(time.Since(start)) }
}

// Config configures a broker's Agent and Coordinator (one of each per
// broker process, with the same Config).
type Config struct {
	// Region is the broker's region; Regions every region of the mesh
	// (Region included): a rate's static share is the limit ÷
	// len(Regions). Required; tokens.
	Region  string
	Regions []string
	// BrokerID is the broker's id in the topology (unique in the
	// region): its subject and its name on the wire ("broker/<id>").
	// Required; a token.
	BrokerID string
	// Brokers is the number of brokers of the region in the topology: a
	// broker's static share is the region's ÷ Brokers. Required (≥ 1).
	Brokers int
	// Store is the region's metadata store, where the Coordinator
	// campaigns (election "quota/coordinator"). Required by
	// NewCoordinator; the Agent does not use it.
	Store *meta.Store
	// WAN publishes data on subject to any broker of another region (the
	// region's links to it, logged in as the mesh's system user); it must
	// not block and returns an error when the region is unreachable now.
	// Nil: this coordinator exchanges nothing with other regions, which
	// then count it as unreachable.
	WAN func(region, subject string, data []byte) error
	// Interval is how often brokers report and coordinators split
	// (default quota.DefaultInterval, 250 ms). Shorter converges faster
	// and costs more messages.
	Interval time.Duration
	// LeaseTTL bounds the quota leases between brokers and coordinators
	// (default quota.DefaultLeaseTTL, 3 s): a broker cut off from every
	// coordinator is back at its static share within LeaseTTL.
	LeaseTTL time.Duration
	// ElectionTTL is the etcd lease of the Coordinator's candidacy
	// (default 3 s, at least meta.MinLeaseTTL): a coordinator whose
	// process dies is replaced about ElectionTTL later.
	ElectionTTL time.Duration
	// Clock is the time (default NewClock()). Agent and Coordinator of
	// one process should share it.
	Clock  Clock
	Logger *slog.Logger
}

// DefaultElectionTTL is Config.ElectionTTL's default.
const DefaultElectionTTL = 3 * time.Second

// election is the etcd election of a region's coordinator (relative to
// the region's prefix).
const election = "quota/coordinator"

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = quota.DefaultInterval
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = quota.DefaultLeaseTTL
	}
	if c.ElectionTTL <= 0 {
		c.ElectionTTL = DefaultElectionTTL
	}
	if c.Clock == nil {
		c.Clock = NewClock()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate returns every problem with c.
func (c Config) Validate() error {
	var errs []error
	if err := tenancy.CheckToken("region", c.Region); err != nil {
		errs = append(errs, fmt.Errorf("quotanet: Config.Region: %w", err))
	}
	for _, r := range c.Regions {
		if err := tenancy.CheckToken("region", r); err != nil {
			errs = append(errs, fmt.Errorf("quotanet: Config.Regions: %w", err))
		}
	}
	if !slices.Contains(c.Regions, c.Region) {
		errs = append(errs, fmt.Errorf("quotanet: Config.Regions %v does not hold Config.Region %q", c.Regions, c.Region))
	}
	if err := tenancy.CheckToken("broker id", c.BrokerID); err != nil {
		errs = append(errs, fmt.Errorf("quotanet: Config.BrokerID: %w", err))
	}
	if c.Brokers < 1 {
		errs = append(errs, fmt.Errorf("quotanet: Config.Brokers is %d: want the region's broker count (≥ 1)", c.Brokers))
	}
	if c.Interval < 0 || c.LeaseTTL < 0 {
		errs = append(errs, fmt.Errorf("quotanet: Config.Interval %v and LeaseTTL %v must not be negative", c.Interval, c.LeaseTTL))
	}
	if c.Interval > 0 && c.LeaseTTL > 0 && c.LeaseTTL < 4*c.Interval {
		errs = append(errs, fmt.Errorf("quotanet: Config.LeaseTTL %v is under 4 intervals (%v): leases would lapse between reports", c.LeaseTTL, 4*c.Interval))
	}
	if c.ElectionTTL != 0 && c.ElectionTTL < meta.MinLeaseTTL {
		errs = append(errs, fmt.Errorf("quotanet: Config.ElectionTTL %v is below etcd's minimum %v", c.ElectionTTL, meta.MinLeaseTTL))
	}
	return errors.Join(errs...)
}
