package tiered

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stratamesh/strata/bookie/ledger"
	"pgregory.net/rapid"
)

// fataler is what helpers need of *testing.T, *testing.B and *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// mustOffload offloads src to store under base with cfg, failing t on error.
func mustOffload(t fataler, store *memStore, src *fakeSource, base string, cfg Config) Offloaded {
	t.Helper()
	res, err := Offload(context.Background(), src, store, base, OffloadOptions{LedgerID: 42, LastEntryID: src.last, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// mustOpen opens base, closing the Reader at the end of the test.
func mustOpen(t testing.TB, store ObjectStore, base string, cache *BlockCache, cfg Config) *Reader {
	t.Helper()
	r, err := OpenWith(context.Background(), store, base, cache, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// checkEntries fails t unless es are src's entries first..last.
func checkEntries(t fataler, src *fakeSource, es []ledger.Entry, first, last int64) {
	t.Helper()
	if int64(len(es)) != last-first+1 {
		t.Fatalf("read %d..%d: %d entries", first, last, len(es))
	}
	for i, e := range es {
		id := first + int64(i)
		if e.ID != id || !bytes.Equal(e.Payload, src.payload(id)) {
			t.Fatalf("read %d..%d: entry %d has id %d and %d bytes, want %d bytes", first, last, id, e.ID, len(e.Payload), len(src.payload(id)))
		}
	}
}

func smallConfig(interval int, blockSize int64, ahead int) Config {
	cfg := DefaultConfig()
	cfg.IndexInterval, cfg.BlockSize, cfg.ReadAheadBlocks = interval, blockSize, ahead
	return cfg
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		entries   int64
		maxSize   int
		interval  int
		blockSize int64
		ahead     int
	}{
		{1, 64 << 10, 64, 1 << 20, 4},
		{1, 0, 1, 4 << 10, 0}, // one empty entry
		{100, 64 << 10, 64, 1 << 20, 4},
		{100, 64 << 10, 1, 4 << 10, 2},
		{100, 64 << 10, 7, 64 << 10, 0},
		{10_000, 64 << 10, 64, 64 << 10, 4},
	} {
		t.Run(fmt.Sprintf("entries=%d/interval=%d/block=%d/ahead=%d", tc.entries, tc.interval, tc.blockSize, tc.ahead), func(t *testing.T) {
			store := newMemStore()
			src := newSource(uint64(tc.entries), tc.entries-1, tc.maxSize)
			cfg := smallConfig(tc.interval, tc.blockSize, tc.ahead)
			res := mustOffload(t, store, src, "p/r/t/n/topic/42-u1", cfg)
			if res.Entries != tc.entries || res.PayloadBytes != src.length() || res.DataBytes != src.length()+16*tc.entries {
				t.Fatalf("Offloaded %+v; want %d entries, %d payload bytes", res, tc.entries, src.length())
			}
			r := mustOpen(t, store, "p/r/t/n/topic/42-u1", nil, cfg)
			if r.ID() != 42 || r.LastEntry() != tc.entries-1 || r.Length() != src.length() {
				t.Fatalf("ID %d LastEntry %d Length %d", r.ID(), r.LastEntry(), r.Length())
			}
			es, err := r.Read(context.Background(), 0, tc.entries-1)
			if err != nil {
				t.Fatal(err)
			}
			checkEntries(t, src, es, 0, tc.entries-1)
			// And sequentially in chunks, as a consumer would.
			for first := int64(0); first < tc.entries; first += 50 {
				last := min(first+49, tc.entries-1)
				es, err := r.Read(context.Background(), first, last)
				if err != nil {
					t.Fatal(err)
				}
				checkEntries(t, src, es, first, last)
			}
		})
	}
}

func TestReadRangeShapes(t *testing.T) {
	store := newMemStore()
	src := newSource(3, 299, 8<<10)
	cfg := smallConfig(16, 4<<10, 2)
	mustOffload(t, store, src, "b", cfg)
	r := mustOpen(t, store, "b", nil, cfg)
	ctx := context.Background()
	read := func(first, last int64) {
		t.Helper()
		es, err := r.Read(ctx, first, last)
		if err != nil {
			t.Fatalf("read %d..%d: %v", first, last, err)
		}
		checkEntries(t, src, es, first, last)
	}
	for id := int64(0); id <= 299; id++ { // every single entry, forwards
		read(id, id)
	}
	for id := int64(299); id >= 0; id -= 7 { // and some backwards (no read-ahead pattern)
		read(id, id)
	}
	for _, rg := range [][2]int64{
		{0, 299}, {0, 15}, {15, 16}, {16, 16}, {15, 17}, {16, 31}, {17, 47}, {31, 32},
		{1, 298}, {288, 299}, {299, 299}, {250, 299},
	} {
		read(rg[0], rg[1])
	}
	// Ranges across block boundaries: find entries whose frames straddle blocks.
	ix := r.Index()
	off, straddling := int64(0), 0
	for id := int64(0); id <= 299; id++ {
		end := off + FrameHeaderSize + int64(len(src.payload(id)))
		if off/cfg.BlockSize != (end-1)/cfg.BlockSize {
			straddling++
			read(id, id)
			read(max(id-1, 0), min(id+1, 299))
		}
		off = end
	}
	if straddling == 0 || off != ix.DataBytes {
		t.Fatalf("%d straddling entries, data %d of %d bytes", straddling, off, ix.DataBytes)
	}
	for _, rg := range [][2]int64{{300, 300}, {0, 300}, {299, 1 << 40}} {
		es, err := r.Read(ctx, rg[0], rg[1])
		if !errors.Is(err, ErrBeyondEnd) || !errors.Is(err, ledger.ErrBeyondLAC) || es != nil {
			t.Fatalf("read %d..%d: %v, %v; want ErrBeyondEnd", rg[0], rg[1], len(es), err)
		}
	}
	for _, rg := range [][2]int64{{-1, 0}, {5, 4}, {-3, -1}} {
		es, err := r.Read(ctx, rg[0], rg[1])
		if !errors.Is(err, ErrInvalid) || !errors.Is(err, ledger.ErrInvalidOptions) || es != nil {
			t.Fatalf("read %d..%d: %v, %v; want ErrInvalid", rg[0], rg[1], len(es), err)
		}
	}
}

// TestReadProperty: random ledgers, configurations and ranges read through
// a Reader equal the source.
func TestReadProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		entries := rapid.Int64Range(1, 300).Draw(t, "entries")
		maxSize := rapid.SampledFrom([]int{0, 100, 5000, 64 << 10}).Draw(t, "maxSize")
		cfg := smallConfig(rapid.IntRange(1, 70).Draw(t, "interval"),
			rapid.SampledFrom([]int64{4 << 10, 5000, 64 << 10}).Draw(t, "blockSize"),
			rapid.IntRange(0, 5).Draw(t, "ahead"))
		src := newSource(rapid.Uint64().Draw(t, "seed"), entries-1, maxSize)
		store := newMemStore()
		mustOffload(t, store, src, "b", cfg)
		cache := NewBlockCache(rapid.Int64Range(0, 256<<10).Draw(t, "cacheBytes"))
		r, err := OpenWith(context.Background(), store, "b", cache, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for range rapid.IntRange(1, 20).Draw(t, "reads") {
			first := rapid.Int64Range(0, entries-1).Draw(t, "first")
			last := rapid.Int64Range(first, min(first+rapid.Int64Range(0, 100).Draw(t, "span"), entries-1)).Draw(t, "last")
			es, err := r.Read(context.Background(), first, last)
			if err != nil {
				t.Fatalf("read %d..%d: %v", first, last, err)
			}
			checkEntries(t, src, es, first, last)
			if s := cache.Stats(); s.Bytes > s.MaxBytes {
				t.Fatalf("cache holds %d bytes, max %d", s.Bytes, s.MaxBytes)
			}
		}
	})
}

func TestCacheBoundAndHitsThroughReaders(t *testing.T) {
	store := newMemStore()
	src := newSource(5, 999, 16<<10)
	cfg := smallConfig(64, 4<<10, 3)
	mustOffload(t, store, src, "b", cfg)
	cache := NewBlockCache(10 * cfg.BlockSize)
	r := mustOpen(t, store, "b", cache, cfg)
	for first := int64(0); first <= 999; first += 10 {
		es, err := r.Read(context.Background(), first, first+9)
		if err != nil {
			t.Fatal(err)
		}
		checkEntries(t, src, es, first, first+9)
		if s := cache.Stats(); s.Bytes > 10*cfg.BlockSize {
			t.Fatalf("cache holds %d bytes, bound %d", s.Bytes, 10*cfg.BlockSize)
		}
	}
	if s := cache.Stats(); s.Evictions == 0 {
		t.Fatalf("a ledger larger than the cache evicted nothing: %+v", s)
	}
	// A second Reader of the same object over a cache holding it all reads nothing more.
	big := NewBlockCache(1 << 30)
	r1 := mustOpen(t, store, "b", big, cfg)
	if _, err := r1.Read(context.Background(), 0, 999); err != nil {
		t.Fatal(err)
	}
	before, _ := store.counters()
	r2 := mustOpen(t, store, "b", big, cfg)
	hits := big.Stats().Hits
	es, err := r2.Read(context.Background(), 0, 999)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, src, es, 0, 999)
	after, _ := store.counters()
	blocks := (r2.Index().DataBytes + cfg.BlockSize - 1) / cfg.BlockSize
	if after-before != 1 || big.Stats().Hits-hits != blocks { // the one range read is r2's index
		t.Fatalf("second reader: %d range reads (want 1, the index), %d hits (want %d)", after-before, big.Stats().Hits-hits, blocks)
	}
}

// TestReadAheadReducesRangeReads scans a ledger entry by entry with and
// without read-ahead and compares the store's range reads.
func TestReadAheadReducesRangeReads(t *testing.T) {
	src := newSource(6, 599, 0)
	src.fixed = 1000 // ~600 KB: ~147 blocks of 4 KiB
	scan := func(ahead int) (rangeReads int64, stats ReaderStats) {
		store := newMemStore()
		cfg := smallConfig(64, 4<<10, ahead)
		mustOffload(t, store, src, "b", cfg)
		r := mustOpen(t, store, "b", NewBlockCache(1<<30), cfg)
		before, _ := store.counters()
		for id := int64(0); id <= src.last; id++ {
			es, err := r.Read(context.Background(), id, id)
			if err != nil {
				t.Fatal(err)
			}
			checkEntries(t, src, es, id, id)
		}
		after, _ := store.counters()
		return after - before, r.Stats()
	}
	blocks := (600*(1000+FrameHeaderSize) + 4<<10 - 1) / (4 << 10)
	without, s0 := scan(0)
	if without != int64(blocks) || s0.ReadAheads != 0 || s0.RangeReads != without {
		t.Fatalf("without read-ahead: %d range reads (%+v), want one per block (%d)", without, s0, blocks)
	}
	with, s4 := scan(4)
	if with > without/2 || s4.ReadAheads == 0 || s4.RangeReads != with {
		t.Fatalf("with read-ahead of 4: %d range reads (%+v), without %d: want at most half", with, s4, without)
	}
	t.Logf("sequential scan of %d blocks: %d range reads without read-ahead, %d with 4 blocks", blocks, without, with)
}

func TestCorruptDataOnRead(t *testing.T) {
	src := newSource(7, 199, 4<<10)
	cfg := smallConfig(16, 4<<10, 2)
	ctx := context.Background()
	frameOffset := func(id int64) int64 {
		var off int64
		for i := range id {
			off += FrameHeaderSize + int64(len(src.payload(i)))
		}
		return off
	}
	// Entry 100 must have a payload to flip.
	victim := int64(100)
	for len(src.payload(victim)) == 0 {
		victim++
	}
	for _, tc := range []struct {
		name string
		at   int64 // byte of the data object to flip
	}{
		{"payload", frameOffset(victim) + FrameHeaderSize + int64(len(src.payload(victim)))/2},
		{"crc", frameOffset(victim) + 13},
		{"length", frameOffset(victim) + 9},
		{"entry id", frameOffset(victim) + 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newMemStore()
			mustOffload(t, store, src, "b", cfg)
			store.set(func(s *memStore) { s.objects[DataObjectName("b")][tc.at] ^= 0x10 })
			r := mustOpen(t, store, "b", nil, cfg)
			for _, rg := range [][2]int64{{victim, victim}, {0, 199}, {victim - 1, victim + 1}} {
				es, err := r.Read(ctx, rg[0], rg[1])
				if !errors.Is(err, ErrCorrupt) || es != nil {
					t.Fatalf("read %d..%d over a flipped byte: %d entries, %v; want ErrCorrupt", rg[0], rg[1], len(es), err)
				}
			}
			// Entries before the damage, in other index intervals, still read.
			last := victim/16*16 - 1
			es, err := r.Read(ctx, 0, last)
			if err != nil {
				t.Fatal(err)
			}
			checkEntries(t, src, es, 0, last)
		})
	}
}

func TestTruncatedDataObject(t *testing.T) {
	store := newMemStore()
	src := newSource(8, 99, 4<<10)
	cfg := smallConfig(16, 4<<10, 0)
	mustOffload(t, store, src, "b", cfg)
	store.set(func(s *memStore) {
		d := s.objects[DataObjectName("b")]
		s.objects[DataObjectName("b")] = d[:len(d)-1]
	})
	r := mustOpen(t, store, "b", nil, cfg)
	if _, err := r.Read(context.Background(), 99, 99); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read from a truncated object: %v; want ErrCorrupt", err)
	}
}

func TestOpenErrors(t *testing.T) {
	store := newMemStore()
	src := newSource(9, 9, 100)
	mustOffload(t, store, src, "b", Config{})
	ctx := context.Background()
	if _, err := Open(ctx, store, "missing", nil); !errors.Is(err, errNotFound) {
		t.Fatalf("open missing: %v", err)
	}
	if _, err := Open(ctx, store, "", nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("open empty base: %v", err)
	}
	bad := DefaultConfig()
	bad.BlockSize = 10
	if _, err := OpenWith(ctx, store, "b", nil, bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("open with bad config: %v", err)
	}
	store.set(func(s *memStore) { s.objects[IndexObjectName("b")][20] ^= 1 })
	if _, err := Open(ctx, store, "b", nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open corrupt index: %v", err)
	}
	store.set(func(s *memStore) { s.failRead[IndexObjectName("b")] = errors.New("boom") })
	if _, err := Open(ctx, store, "b", nil); err == nil || errors.Is(err, ErrCorrupt) {
		t.Fatalf("open failing store: %v", err)
	}
}

func TestReaderCloseAndErrors(t *testing.T) {
	store := newMemStore()
	src := newSource(10, 499, 8<<10)
	cfg := smallConfig(64, 4<<10, 4)
	mustOffload(t, store, src, "b", cfg)
	ctx := context.Background()

	// Close right after a read that started read-ahead: goleak (TestMain)
	// checks its goroutines are gone.
	r, err := OpenWith(ctx, store, "b", nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(ctx, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	if _, err := r.Read(ctx, 1, 400); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}

	// A failing store surfaces its error; once it recovers, reads work.
	r = mustOpen(t, store, "b", nil, cfg)
	boom := errors.New("boom")
	store.set(func(s *memStore) { s.failRead[DataObjectName("b")] = boom })
	if _, err := r.Read(ctx, 0, 100); !errors.Is(err, boom) {
		t.Fatalf("read from a failing store: %v", err)
	}
	store.set(func(s *memStore) { delete(s.failRead, DataObjectName("b")) })
	es, err := r.Read(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, src, es, 0, 100)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Read(cctx, 200, 300); !errors.Is(err, context.Canceled) {
		t.Fatalf("read with a cancelled context: %v", err)
	}
}

func TestConcurrentReads(t *testing.T) {
	store := newMemStore()
	src := newSource(11, 999, 8<<10)
	cfg := smallConfig(32, 4<<10, 3)
	mustOffload(t, store, src, "b", cfg)
	cache := NewBlockCache(64 << 10)
	readers := []*Reader{mustOpen(t, store, "b", cache, cfg), mustOpen(t, store, "b", cache, cfg)}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			r := readers[g%2]
			for i := int64(0); i < 40; i++ {
				first := (int64(g)*97 + i*31) % 1000
				if g%2 == 0 {
					first = min(i*25, 999) // sequential readers
				}
				last := min(first+int64(g)*3, 999)
				es, err := r.Read(context.Background(), first, last)
				if err == nil && (int64(len(es)) != last-first+1 || !bytes.Equal(es[0].Payload, src.payload(first))) {
					err = fmt.Errorf("read %d..%d: wrong entries", first, last)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if s := cache.Stats(); s.Bytes > s.MaxBytes || s.Hits == 0 {
		t.Fatalf("cache %+v", s)
	}
}
