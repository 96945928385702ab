package tiered

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestBlockCacheLRU(t *testing.T) {
	c := NewBlockCache(300)
	k := func(i int64) blockKey { return blockKey{object: "o", size: 100, index: i} }
	block := func(n int) []byte { return make([]byte, n) }
	c.add(k(0), block(100))
	c.add(k(1), block(100))
	c.add(k(2), block(100))
	if _, ok := c.get(k(0)); !ok { // 0 becomes most recent; 1 is next out
		t.Fatal("block 0 missing")
	}
	c.add(k(3), block(100))
	if c.has(k(1)) || !c.has(k(0)) || !c.has(k(2)) || !c.has(k(3)) {
		t.Fatal("wrong block evicted")
	}
	if _, ok := c.get(k(1)); ok {
		t.Fatal("evicted block found")
	}
	c.add(k(4), block(301)) // larger than the whole cache: not kept
	c.add(k(5), block(250)) // evicts until it fits
	s := c.Stats()
	want := CacheStats{Hits: 1, Misses: 1, Adds: 5, Evictions: 4, Rejected: 1, Bytes: 250, Blocks: 1, MaxBytes: 300}
	if s != want {
		t.Fatalf("stats %+v, want %+v", s, want)
	}
	// Same name, other block size: another key.
	c.add(blockKey{object: "o", size: 50, index: 5}, block(50))
	if !c.has(k(5)) || !c.has(blockKey{object: "o", size: 50, index: 5}) {
		t.Fatal("keys by block size collide")
	}
	c.add(blockKey{object: "p", size: 100, index: 0}, block(0))
	c.Drop("o")
	if s := c.Stats(); s.Blocks != 1 || s.Bytes != 0 {
		t.Fatalf("after Drop: %+v", s)
	}
	if z := NewBlockCache(0); z.Stats().MaxBytes != 0 {
		t.Fatal("zero cache")
	} else if z.add(k(0), block(1)); z.has(k(0)) {
		t.Fatal("a zero cache kept a block")
	}
}

// TestBlockCacheModel checks the cache against a naive LRU (a slice in
// recency order) under random operations: the same blocks held, and never
// more than maxBytes.
func TestBlockCacheModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxBytes := rapid.Int64Range(0, 1000).Draw(t, "maxBytes")
		c := NewBlockCache(maxBytes)
		type blk struct {
			k    blockKey
			size int64
		}
		var model []blk // most recent last
		modelBytes := func() (n int64) {
			for _, b := range model {
				n += b.size
			}
			return n
		}
		find := func(k blockKey) int { return slices.IndexFunc(model, func(b blk) bool { return b.k == k }) }
		var hits, misses int64
		for i := range rapid.IntRange(1, 100).Draw(t, "ops") {
			k := blockKey{object: fmt.Sprint("o", rapid.IntRange(0, 2).Draw(t, "obj")), size: 10, index: rapid.Int64Range(0, 6).Draw(t, "index")}
			if rapid.Bool().Draw(t, "add") {
				size := rapid.Int64Range(0, 400).Draw(t, "size")
				c.add(k, make([]byte, size))
				if j := find(k); j >= 0 {
					model = slices.Delete(model, j, j+1)
				}
				if size <= maxBytes {
					for modelBytes()+size > maxBytes {
						model = model[1:]
					}
					model = append(model, blk{k, size})
				}
			} else {
				_, ok := c.get(k)
				j := find(k)
				if ok != (j >= 0) {
					t.Fatalf("op %d: get %v = %v, model %v", i, k, ok, j >= 0)
				}
				if ok {
					hits++
					b := model[j]
					model = append(slices.Delete(model, j, j+1), b)
				} else {
					misses++
				}
			}
			s := c.Stats()
			if s.Bytes > maxBytes || s.Bytes != modelBytes() || s.Blocks != int64(len(model)) {
				t.Fatalf("op %d: cache holds %d bytes in %d blocks (max %d); model %d bytes in %d", i, s.Bytes, s.Blocks, maxBytes, modelBytes(), len(model))
			}
			if s.Hits != hits || s.Misses != misses {
				t.Fatalf("op %d: hits %d misses %d, want %d %d", i, s.Hits, s.Misses, hits, misses)
			}
		}
		for _, b := range model {
			if !c.has(b.k) {
				t.Fatalf("model block %v missing", b.k)
			}
		}
	})
}
