package region

import (
	"context"
	"path/filepath"
	"sync"
	"time"

	"github.com/stratamesh/strata/admin"
	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/tiered"
	"github.com/stratamesh/strata/tiered/blob"
	"github.com/stratamesh/strata/tiered/blob/blobopen"
	"github.com/stratamesh/strata/tiered/blob/fsblob"
	"github.com/stratamesh/strata/topology"
)

// regionTier is a broker's handle on its region's tier (ARCHITECTURE §6),
// opened on first use.
type regionTier struct {
	once  sync.Once
	store blob.Store
	err   error
}

// TierConfig is the blob store configuration of a region's tier
// (topology regions[].tier): an fs tier without a dir lives under
// <data-dir>/<region>/tier, shared by the region's brokers.
func TierConfig(t topology.Tier, dataDir, region string) blob.Config {
	cfg := blob.Config{Kind: t.Kind, Bucket: t.Bucket, Prefix: t.Prefix}
	switch t.Kind {
	case topology.TierFS, "":
		cfg.Kind, cfg.Dir = blob.KindFS, t.Dir
		if cfg.Dir == "" {
			cfg.Dir = filepath.Join(dataDir, region, "tier")
		}
	case topology.TierS3:
		cfg.Region, cfg.Endpoint, cfg.PathStyle = t.Region, t.Endpoint, t.PathStyle
	case topology.TierGCS:
		cfg.Endpoint = t.Endpoint
	}
	return cfg
}

// tierStore opens the region's tier once.
func (n *Node) tierStore(ctx context.Context) (blob.Store, error) {
	n.tier.once.Do(func() {
		n.tier.store, n.tier.err = blobopen.Open(ctx, TierConfig(n.region.Tier, n.cfg.DataDir, n.cfg.Region))
		// Temp files of uploads a crash interrupted (an fs tier's; an
		// hour is longer than any upload takes, so the region's other
		// brokers' uploads in progress are safe).
		if fs, ok := n.tier.store.(*fsblob.Store); ok {
			if k, err := fs.SweepTemp(ctx, time.Hour); err != nil {
				n.logger.Warn("sweeping the tier's temp files failed", "err", err)
			} else if k > 0 {
				n.logger.Info("removed interrupted uploads from the tier", "files", k)
			}
		}
	})
	return n.tier.store, n.tier.err
}

// managedTier is the region's tier as the brokers' managed ledgers use
// it, with one block cache for every topic.
func (n *Node) managedTier(ctx context.Context) (mledger.Tier, error) {
	st, err := n.tierStore(ctx)
	if err != nil {
		return nil, err
	}
	return mledger.NewTier(st, tiered.NewBlockCache(tiered.DefaultCacheBytes), tiered.Config{}), nil
}

// closeTier closes the tier's store, if opened.
func (n *Node) closeTier() error {
	if n.tier.store == nil {
		return nil
	}
	return n.tier.store.Close()
}

// tierInfo names the region's tier in admin answers: its kind and where
// its objects go (a directory, or bucket/prefix).
func (n *Node) tierInfo() admin.TierInfo {
	c := TierConfig(n.region.Tier, n.cfg.DataDir, n.cfg.Region)
	where := c.Dir
	if c.Bucket != "" {
		where = c.Bucket + "/" + c.Prefix
	}
	return admin.TierInfo{Kind: c.Kind, Where: where}
}
