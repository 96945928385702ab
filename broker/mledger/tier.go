package mledger

import (
	"context"

	"github.com/stratamesh/strata/tiered"
)

// NewTier is the Tier of a blob store (package tiered's offload format,
// offloader and tiered reader): copies are written with cfg, whose zero
// fields take tiered.DefaultConfig's values (ReadAheadBlocks < 0 turns
// read-ahead off), and read through cache, a block cache shared by every
// topic of the store (nil: a cache of tiered.DefaultCacheBytes).
func NewTier(store tiered.ObjectStore, cache *tiered.BlockCache, cfg tiered.Config) Tier {
	if cache == nil {
		cache = tiered.NewBlockCache(tiered.DefaultCacheBytes)
	}
	d := tiered.DefaultConfig()
	if cfg.IndexInterval > 0 {
		d.IndexInterval = cfg.IndexInterval
	}
	if cfg.ReadChunkEntries > 0 {
		d.ReadChunkEntries = cfg.ReadChunkEntries
	}
	if cfg.ReadChunkBytes > 0 {
		d.ReadChunkBytes = cfg.ReadChunkBytes
	}
	if cfg.BlockSize > 0 {
		d.BlockSize = cfg.BlockSize
	}
	if cfg.ReadAheadBlocks != 0 {
		d.ReadAheadBlocks = max(cfg.ReadAheadBlocks, 0)
	}
	if cfg.CleanupTimeout > 0 {
		d.CleanupTimeout = cfg.CleanupTimeout
	}
	return &blobTier{store: store, cache: cache, cfg: d}
}

type blobTier struct {
	store tiered.ObjectStore
	cache *tiered.BlockCache
	cfg   tiered.Config
}

func (t *blobTier) Offload(ctx context.Context, src EntryReader, id, lastEntry, _ int64, base string, progress OffloadProgress) (int64, error) {
	res, err := tiered.Offload(ctx, src, t.store, base, tiered.OffloadOptions{
		LedgerID: id, LastEntryID: lastEntry, Config: t.cfg, Progress: progress,
	})
	if err != nil {
		return 0, err
	}
	return res.DataBytes, nil
}

func (t *blobTier) Open(ctx context.Context, base string) (TierReader, error) {
	return tiered.OpenWith(ctx, t.store, base, t.cache, t.cfg)
}

func (t *blobTier) Delete(ctx context.Context, base string) error {
	err := tiered.Delete(ctx, t.store, base)
	t.cache.Drop(tiered.DataObjectName(base))
	return err
}
