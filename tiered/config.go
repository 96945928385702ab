package tiered

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of Config.
const (
	DefaultIndexInterval    = 64
	DefaultReadChunkEntries = 64
	DefaultReadChunkBytes   = 1 << 20
	DefaultBlockSize        = 1 << 20
	DefaultReadAheadBlocks  = 4
	DefaultCleanupTimeout   = 10 * time.Second
	// DefaultCacheBytes is a suggested size for a region's shared
	// BlockCache (NewBlockCache): 64 blocks of the default size.
	DefaultCacheBytes = 64 << 20
)

// Config holds the knobs of offload and tiered reads. Start from
// DefaultConfig; a zero Config given to Offload or OpenWith means
// DefaultConfig().
type Config struct {
	// IndexInterval is N: the index object records the offset of every
	// N-th entry (0, N, 2N, …). A read of entry e starts at point e/N and
	// walks at most N−1 frames, so a smaller N means less data read before
	// a random entry and a larger index (16 bytes per point). Written at
	// offload, read from the index afterwards. 1..MaxIndexInterval;
	// default 64.
	IndexInterval int
	// ReadChunkEntries is the most entries Offload asks its source for in
	// one Read. Default 64 (what ledger.Reader fetches per request).
	ReadChunkEntries int
	// ReadChunkBytes is the payload bytes Offload aims at per source
	// Read: after each read it lowers the next read's entry count so that
	// count × average entry size stays near this (at least one entry).
	// Bounds the memory an offload holds. Default 1 MiB.
	ReadChunkBytes int64
	// BlockSize is the unit of tiered reads, in bytes: a Reader fetches
	// the data object in BlockSize-aligned blocks with ranged GETs and
	// caches whole blocks. Larger blocks mean fewer requests and more
	// bytes read around a random entry. Default 1 MiB; at least 4 KiB.
	BlockSize int64
	// ReadAheadBlocks is K: on a sequential read pattern a Reader keeps up
	// to K blocks past the one being read fetched or in flight, fetching
	// the missing ones with one ranged GET in the background when fewer
	// than half remain. 0 disables read-ahead. Memory: up to K blocks per
	// Reader beyond the cache. Default 4.
	ReadAheadBlocks int
	// CleanupTimeout bounds the deletes a failed Offload makes (with a
	// fresh context, since the caller's may be what failed). Default 10 s.
	CleanupTimeout time.Duration
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		IndexInterval:    DefaultIndexInterval,
		ReadChunkEntries: DefaultReadChunkEntries,
		ReadChunkBytes:   DefaultReadChunkBytes,
		BlockSize:        DefaultBlockSize,
		ReadAheadBlocks:  DefaultReadAheadBlocks,
		CleanupTimeout:   DefaultCleanupTimeout,
	}
}

// orDefault is c, or DefaultConfig() for the zero Config.
func (c Config) orDefault() Config {
	if c == (Config{}) {
		return DefaultConfig()
	}
	return c
}

// minBlockSize is the smallest BlockSize Validate accepts.
const minBlockSize = 4 << 10

// Validate reports every problem with c, each wrapping ErrInvalid.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	if c.IndexInterval < 1 || c.IndexInterval > MaxIndexInterval {
		bad("Config.IndexInterval %d: want 1..%d", c.IndexInterval, MaxIndexInterval)
	}
	if c.ReadChunkEntries < 1 {
		bad("Config.ReadChunkEntries %d: want ≥ 1", c.ReadChunkEntries)
	}
	if c.ReadChunkBytes < 1 {
		bad("Config.ReadChunkBytes %d: want ≥ 1", c.ReadChunkBytes)
	}
	if c.BlockSize < minBlockSize {
		bad("Config.BlockSize %d: want ≥ %d bytes", c.BlockSize, minBlockSize)
	}
	if c.ReadAheadBlocks < 0 {
		bad("Config.ReadAheadBlocks %d: want ≥ 0", c.ReadAheadBlocks)
	}
	if c.CleanupTimeout <= 0 {
		bad("Config.CleanupTimeout %v: want > 0", c.CleanupTimeout)
	}
	return errors.Join(errs...)
}
