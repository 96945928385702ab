package tiered

import (
	"container/list"
	"sync"
)

// BlockCache holds blocks of data objects, least recently used first out,
// bounded by the bytes of the blocks it holds. One cache is shared by all
// the Readers of a region's tier (of one ObjectStore: it is keyed by
// object name, block size and block number). Safe for concurrent use.
//
// Blocks are immutable once added: an object name must never be reused for
// other content while a cache may hold its blocks (offload names carry a
// UUID); Drop forgets an object's blocks when one is deleted.
type BlockCache struct {
	mu       sync.Mutex
	maxBytes int64
	bytes    int64
	lru      *list.List // of *cacheItem, most recently used at the front
	items    map[blockKey]*list.Element
	stats    CacheStats
}

// blockKey names a block: bytes [index·size, (index+1)·size) of object.
type blockKey struct {
	object string
	size   int64
	index  int64
}

type cacheItem struct {
	key  blockKey
	data []byte
}

// CacheStats are a BlockCache's counters.
type CacheStats struct {
	// Hits and Misses count lookups (a Reader looks a block up once each
	// time its reads move into it).
	Hits, Misses int64
	// Adds counts blocks added; Evictions blocks dropped to stay within
	// MaxBytes; Rejected blocks not kept because one alone exceeds it.
	Adds, Evictions, Rejected int64
	// Bytes and Blocks are what the cache holds now; Bytes ≤ MaxBytes
	// always.
	Bytes, Blocks int64
	// MaxBytes is the bound given to NewBlockCache.
	MaxBytes int64
}

// NewBlockCache returns a cache holding at most maxBytes bytes of blocks
// (≤ 0: it keeps nothing, every lookup misses). DefaultCacheBytes is a
// reasonable size for a region.
func NewBlockCache(maxBytes int64) *BlockCache {
	return &BlockCache{maxBytes: max(maxBytes, 0), lru: list.New(), items: map[blockKey]*list.Element{}}
}

// get returns the block for k and marks it most recently used.
func (c *BlockCache) get(k blockKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.lru.MoveToFront(el)
		c.stats.Hits++
		return el.Value.(*cacheItem).data, true
	}
	c.stats.Misses++
	return nil, false
}

// has reports whether k is held, without touching order or counters.
func (c *BlockCache) has(k blockKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.items[k]
	return ok
}

// add keeps data as block k (replacing an older copy), evicting least
// recently used blocks until the cache is within its bound. A block larger
// than the bound is not kept.
func (c *BlockCache) add(k blockKey, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.remove(el)
	}
	size := int64(len(data))
	if size > c.maxBytes {
		c.stats.Rejected++
		return
	}
	for c.bytes+size > c.maxBytes {
		c.remove(c.lru.Back())
		c.stats.Evictions++
	}
	c.items[k] = c.lru.PushFront(&cacheItem{key: k, data: data})
	c.bytes += size
	c.stats.Adds++
}

func (c *BlockCache) remove(el *list.Element) {
	it := c.lru.Remove(el).(*cacheItem)
	delete(c.items, it.key)
	c.bytes -= int64(len(it.data))
}

// Drop forgets every block of object (call it after deleting the object).
// It takes time linear in the blocks held.
func (c *BlockCache) Drop(object string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, el := range c.items {
		if k.object == object {
			c.remove(el)
		}
	}
}

// Stats returns the cache's counters.
func (c *BlockCache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Bytes, s.Blocks, s.MaxBytes = c.bytes, int64(len(c.items)), c.maxBytes
	return s
}
