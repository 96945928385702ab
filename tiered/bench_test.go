package tiered

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkSequentialRead reads a 32 MiB ledger (2,048 entries of 16 KiB)
// from the in-memory fake store through a fresh Reader and cache per
// iteration, 64 entries per Read, as a consumer catching up would; bytes/s
// are payload bytes. With and without read-ahead, and with block sizes of
// 256 KiB and 1 MiB.
//
//	go test -run '^$' -bench SequentialRead -benchmem ./tiered/
func BenchmarkSequentialRead(b *testing.B) {
	src := newSource(1, 2047, 0)
	src.fixed = 16 << 10
	store := newMemStore()
	mustOffload(b, store, src, "bench", Config{})
	for _, blockSize := range []int64{256 << 10, 1 << 20} {
		for _, ahead := range []int{0, DefaultReadAheadBlocks} {
			b.Run(fmt.Sprintf("block=%dKiB/ahead=%d", blockSize>>10, ahead), func(b *testing.B) {
				cfg := smallConfig(DefaultIndexInterval, blockSize, ahead)
				b.SetBytes(2048 * 16 << 10)
				ctx := context.Background()
				for b.Loop() {
					r, err := OpenWith(ctx, store, "bench", NewBlockCache(DefaultCacheBytes), cfg)
					if err != nil {
						b.Fatal(err)
					}
					for first := int64(0); first <= 2047; first += 64 {
						if _, err := r.Read(ctx, first, first+63); err != nil {
							b.Fatal(err)
						}
					}
					r.Close()
				}
			})
		}
	}
}
