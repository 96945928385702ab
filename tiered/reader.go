package tiered

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/stratamesh/strata/bookie/ledger"
)

// Reader reads an offloaded ledger from its data object with ranged GETs,
// through a BlockCache, reading ahead on sequential patterns. It has the
// contract of ledger.Reader.Read for a closed ledger. Safe for concurrent
// use; Close it to stop its read-ahead.
type Reader struct {
	store   ObjectStore
	data    string // data object name
	ix      Index
	cfg     Config
	cache   *BlockCache
	nblocks int64

	bg     context.Context // read-ahead's context, cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // read-ahead goroutines

	mu        sync.Mutex
	closed    bool
	inflight  map[int64]*fetch // block → the fetch bringing it
	lastBlock int64            // the block reads last moved into (-1: none)
	ahead     int              // read-ahead fetches running
	stats     ReaderStats
}

// ReaderStats are a Reader's counters.
type ReaderStats struct {
	// RangeReads counts ranged GETs of the data object, ReadAheads those
	// of them made by read-ahead.
	RangeReads, ReadAheads int64
	// BytesFetched counts the bytes those GETs returned.
	BytesFetched int64
}

// fetch is one ranged GET of blocks first..last; done is closed once
// blocks or err is set.
type fetch struct {
	first, last int64
	ahead       bool // made by read-ahead
	blocks      [][]byte
	err         error
	done        chan struct{}
}

// Open reads and validates the index object of base (IndexObjectName) and
// returns a Reader of its data object with DefaultConfig. cache is shared
// by the region's Readers; nil gives the Reader a private cache of
// ReadAheadBlocks+2 blocks. Errors: ErrInvalid for an empty base, the
// store's (e.g. the object does not exist), ErrCorrupt for an index that
// fails DecodeIndex.
func Open(ctx context.Context, store ObjectStore, base string, cache *BlockCache) (*Reader, error) {
	return OpenWith(ctx, store, base, cache, Config{})
}

// OpenWith is Open with cfg (BlockSize and ReadAheadBlocks matter here;
// the zero Config means DefaultConfig). Errors as Open's, and ErrInvalid
// for a cfg that fails Validate.
func OpenWith(ctx context.Context, store ObjectStore, base string, cache *BlockCache, cfg Config) (*Reader, error) {
	cfg = cfg.orDefault()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if base == "" {
		return nil, fmt.Errorf("%w: empty base name", ErrInvalid)
	}
	_, ix, err := readIndexObject(ctx, store, IndexObjectName(base))
	if err != nil {
		return nil, err
	}
	return newReader(store, base, ix, cache, cfg), nil
}

// newReader returns a Reader of base's data object described by ix.
func newReader(store ObjectStore, base string, ix Index, cache *BlockCache, cfg Config) *Reader {
	if cache == nil {
		cache = NewBlockCache(int64(cfg.ReadAheadBlocks+2) * cfg.BlockSize)
	}
	bg, cancel := context.WithCancel(context.Background())
	return &Reader{
		store: store, data: DataObjectName(base), ix: ix, cfg: cfg, cache: cache,
		nblocks: (ix.DataBytes + cfg.BlockSize - 1) / cfg.BlockSize,
		bg:      bg, cancel: cancel,
		inflight: map[int64]*fetch{}, lastBlock: -1,
	}
}

// ID is the ledger's id.
func (r *Reader) ID() int64 { return r.ix.LedgerID }

// LastEntry is the id of the ledger's last entry.
func (r *Reader) LastEntry() int64 { return r.ix.LastEntryID() }

// Length is the ledger's length: the sum of its entries' payload sizes in
// bytes (the Length of its metadata).
func (r *Reader) Length() int64 { return r.ix.PayloadBytes() }

// Index returns the ledger's decoded index (its Offsets are shared: do
// not modify them).
func (r *Reader) Index() Index { return r.ix }

// Stats returns the Reader's counters.
func (r *Reader) Stats() ReaderStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Close stops read-ahead and waits for its goroutines. Reads after Close
// fail with ErrClosed; reads running meanwhile may finish or fail so.
// Idempotent; always nil.
func (r *Reader) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	return nil
}

// Read returns entries first..last in order, each payload a fresh copy.
// Errors: ErrInvalid for first < 0 or last < first, ErrBeyondEnd (which
// is also ledger.ErrBeyondLAC) for last past LastEntry, with nothing read;
// ErrCorrupt when a frame fails its checks (its bytes are never
// returned); the store's errors; ErrClosed after Close; ctx's error.
func (r *Reader) Read(ctx context.Context, first, last int64) ([]ledger.Entry, error) {
	switch {
	case first < 0 || last < first:
		return nil, fmt.Errorf("%w: ledger %d: read %d..%d", ErrInvalid, r.ix.LedgerID, first, last)
	case last > r.ix.LastEntryID():
		return nil, fmt.Errorf("%w: ledger %d: read up to %d, last entry %d", ErrBeyondEnd, r.ix.LedgerID, last, r.ix.LastEntryID())
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := int64(r.ix.Interval)
	id, off := first/n*n, r.ix.Offsets[first/n]
	out := make([]ledger.Entry, 0, min(last-first+1, 1024))
	cur := cursor{r: r, block: -1}
	var hdr [FrameHeaderSize]byte
	for ; id <= last; id++ {
		bound := r.ix.frameBound(id)
		if id%n == 0 && off != r.ix.Offsets[id/n] {
			return nil, fmt.Errorf("%w: ledger %d: frames before entry %d end at offset %d, index says %d",
				ErrCorrupt, r.ix.LedgerID, id, off, r.ix.Offsets[id/n])
		}
		if off+FrameHeaderSize > bound {
			return nil, fmt.Errorf("%w: ledger %d: no room for entry %d's frame at offset %d (bound %d)", ErrCorrupt, r.ix.LedgerID, id, off, bound)
		}
		if err := cur.copyAt(ctx, hdr[:], off); err != nil {
			return nil, err
		}
		h := parseFrameHeader(hdr[:])
		if err := h.check(r.ix.LedgerID, id, off, bound); err != nil {
			return nil, err
		}
		if id >= first {
			payload := make([]byte, h.length)
			if err := cur.copyAt(ctx, payload, off+FrameHeaderSize); err != nil {
				return nil, err
			}
			if err := checkPayload(r.ix.LedgerID, hdr[:], h, payload); err != nil {
				return nil, err
			}
			out = append(out, ledger.Entry{ID: id, Payload: payload})
		}
		off += FrameHeaderSize + h.length
	}
	if last == r.ix.LastEntryID() && off != r.ix.DataBytes {
		return nil, fmt.Errorf("%w: ledger %d: frames end at offset %d, data length %d", ErrCorrupt, r.ix.LedgerID, off, r.ix.DataBytes)
	}
	return out, nil
}

// cursor copies bytes of the data object out of blocks, keeping the block
// it is in.
type cursor struct {
	r     *Reader
	block int64
	data  []byte
}

// copyAt fills dst with the bytes at off; off+len(dst) must not pass the
// data length (Read's frame checks ensure it).
func (c *cursor) copyAt(ctx context.Context, dst []byte, off int64) error {
	bs := c.r.cfg.BlockSize
	for len(dst) > 0 {
		if b := off / bs; b != c.block {
			data, err := c.r.block(ctx, b)
			if err != nil {
				return err
			}
			c.block, c.data = b, data
		}
		i := off - c.block*bs
		if i >= int64(len(c.data)) { // only if a cache holds another object under this name
			return fmt.Errorf("%w: ledger %d: block %d of %s has %d bytes, want byte %d", ErrCorrupt, c.r.ix.LedgerID, c.block, c.r.data, len(c.data), i)
		}
		n := copy(dst, c.data[i:])
		dst, off = dst[n:], off+int64(n)
	}
	return nil
}

// key is block b's cache key.
func (r *Reader) key(b int64) blockKey {
	return blockKey{object: r.data, size: r.cfg.BlockSize, index: b}
}

// blockLen is the size of block b: BlockSize, less for the last block.
func (r *Reader) blockLen(b int64) int64 {
	return min(r.cfg.BlockSize, r.ix.DataBytes-b*r.cfg.BlockSize)
}

// block returns block b (immutable: callers copy out of it), from the
// cache, from a fetch in flight, or fetched now.
func (r *Reader) block(ctx context.Context, b int64) ([]byte, error) {
	r.readAhead(b)
	waited := false
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return nil, fmt.Errorf("%w: ledger %d", ErrClosed, r.ix.LedgerID)
		}
		if data, ok := r.cache.get(r.key(b)); ok {
			r.mu.Unlock()
			return data, nil
		}
		f := r.inflight[b]
		if f != nil && !waited {
			r.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if f.err == nil {
				return f.blocks[b-f.first], nil
			}
			waited = true // that fetch failed (maybe only its context): fetch it here
			continue
		}
		f = &fetch{first: b, last: b, done: make(chan struct{})}
		if r.inflight[b] == nil {
			r.inflight[b] = f
		}
		r.mu.Unlock()
		f.blocks, f.err = r.fetchBlocks(ctx, f)
		r.finish(f)
		if f.err != nil {
			return nil, f.err
		}
		return f.blocks[0], nil
	}
}

// present reports whether block i is cached or in flight. r.mu held.
func (r *Reader) present(i int64) bool {
	return r.inflight[i] != nil || r.cache.has(r.key(i))
}

// readAhead notes that reads moved into block b. When b continues the
// previous block (or is block 0 of a fresh Reader) and fewer than half of
// the ReadAheadBlocks blocks after b are cached or in flight, it fetches
// the next missing run among them with one ranged GET in the background.
func (r *Reader) readAhead(b int64) {
	k := int64(r.cfg.ReadAheadBlocks)
	r.mu.Lock()
	defer r.mu.Unlock()
	sequential := b == r.lastBlock || b == r.lastBlock+1
	r.lastBlock = b
	if !sequential || k == 0 || r.closed || int64(r.ahead) >= k {
		return
	}
	end := min(b+k, r.nblocks-1)
	lo := b + 1
	for lo <= end && r.present(lo) {
		lo++
	}
	if lo > end || lo-(b+1) >= (k+1)/2 {
		return
	}
	hi := lo
	for hi+1 <= end && !r.present(hi+1) {
		hi++
	}
	f := &fetch{first: lo, last: hi, ahead: true, done: make(chan struct{})}
	for i := lo; i <= hi; i++ {
		r.inflight[i] = f
	}
	r.ahead++
	r.wg.Go(func() {
		f.blocks, f.err = r.fetchBlocks(r.bg, f)
		r.finish(f)
	})
}

// finish publishes f's outcome: its blocks go to the cache, it leaves the
// in-flight table, and its waiters wake.
func (r *Reader) finish(f *fetch) {
	r.mu.Lock()
	for i := f.first; i <= f.last; i++ {
		if f.err == nil {
			r.cache.add(r.key(i), f.blocks[i-f.first])
		}
		if r.inflight[i] == f {
			delete(r.inflight, i)
		}
	}
	if f.ahead {
		r.ahead--
	}
	r.mu.Unlock()
	close(f.done)
}

// fetchBlocks reads f's blocks with one ranged GET. The object must be
// as long as the index says: a short answer is ErrCorrupt.
func (r *Reader) fetchBlocks(ctx context.Context, f *fetch) ([][]byte, error) {
	bs, lo, hi := r.cfg.BlockSize, f.first, f.last
	off, end := lo*bs, min((hi+1)*bs, r.ix.DataBytes)
	r.mu.Lock()
	r.stats.RangeReads++
	if f.ahead {
		r.stats.ReadAheads++
	}
	r.mu.Unlock()
	rc, err := r.store.NewRangeReader(ctx, r.data, off, end-off)
	if err != nil {
		return nil, fmt.Errorf("tiered: ledger %d: read %s bytes %d..%d: %w", r.ix.LedgerID, r.data, off, end, err)
	}
	defer rc.Close()
	blocks := make([][]byte, 0, hi-lo+1)
	for b := lo; b <= hi; b++ {
		buf := make([]byte, r.blockLen(b))
		n, err := io.ReadFull(rc, buf)
		r.mu.Lock()
		r.stats.BytesFetched += int64(n)
		r.mu.Unlock()
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return nil, fmt.Errorf("%w: ledger %d: %s ends before byte %d, index says %d bytes", ErrCorrupt, r.ix.LedgerID, r.data, b*bs+int64(n), r.ix.DataBytes)
		case err != nil:
			return nil, fmt.Errorf("tiered: ledger %d: read %s bytes %d..%d: %w", r.ix.LedgerID, r.data, off, end, err)
		}
		blocks = append(blocks, buf)
	}
	return blocks, nil
}
