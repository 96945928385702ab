package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/stratamesh/strata/bookie/ledger/core"
	"github.com/stratamesh/strata/internal/meta"
)

// Keys in etcd, relative to the Store's (region's) prefix.
const (
	// LedgersPrefix holds one key per ledger: LedgerKey(id) → the
	// ledger's record (JSON: core.Metadata's fields plus "custom"). The
	// record's Version is the key's mod revision.
	LedgersPrefix = "ledgers/"
	// LedgerIDKey holds the next ledger id to allocate (decimal text;
	// absent: 1). Create allocates and creates in one transaction.
	LedgerIDKey = "ledger-ids/next"
)

// LedgerKey is the etcd key of ledger id's metadata: zero-padded so that
// keys sort by id.
func LedgerKey(id int64) string { return fmt.Sprintf("%s%020d", LedgersPrefix, id) }

// record is a ledger's value in etcd: the core's metadata, with the
// caller's custom properties beside it (opaque to the client; set at
// Create, never changed).
type record struct {
	core.Metadata
	Custom map[string]string `json:"custom,omitempty"`
}

func decodeRecord(kv meta.KV) (record, error) {
	var r record
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return record{}, fmt.Errorf("ledger: metadata %s: %w", kv.Key, err)
	}
	if err := r.Validate(); err != nil {
		return record{}, fmt.Errorf("ledger: metadata %s: %w", kv.Key, err)
	}
	r.Version = kv.ModRevision
	return r, nil
}

// getRecord reads ledger id's record (ErrNoLedger if absent).
func (c *Client) getRecord(ctx context.Context, id int64) (record, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	kv, err := c.cfg.Store.Get(ctx, LedgerKey(id))
	if errors.Is(err, meta.ErrNotFound) {
		return record{}, nil, fmt.Errorf("%w: ledger %d", ErrNoLedger, id)
	}
	if err != nil {
		return record{}, nil, fmt.Errorf("ledger %d: read metadata: %w", id, err)
	}
	r, err := decodeRecord(kv)
	return r, kv.Value, err
}

// casRecord writes r if the stored record is still at r.Version. It
// returns the new version, or (0, current) when the record changed. When
// the outcome of a write is unknown (timeout, lost connection) it reads
// the record back: its own value stored means committed; the old version
// still there means try again. It retries with backoff until ctx ends
// (then the error is ctx's, and the outcome may be unknown).
func (c *Client) casRecord(ctx context.Context, r record) (int64, *record, error) {
	val, err := json.Marshal(r)
	if err != nil {
		return 0, nil, fmt.Errorf("ledger %d: encode metadata: %w", r.LedgerID, err)
	}
	key := LedgerKey(r.LedgerID)
	wait := 50 * time.Millisecond
	for {
		octx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
		rev, err := c.cfg.Store.CAS(octx, key, val, r.Version)
		cancel()
		if err == nil {
			return rev, nil, nil
		}
		if ctx.Err() != nil || errors.Is(err, meta.ErrClosed) {
			return 0, nil, fmt.Errorf("ledger %d: write metadata (outcome unknown): %w", r.LedgerID, err)
		}
		cur, stored, gerr := c.getRecord(ctx, r.LedgerID)
		switch {
		case errors.Is(gerr, ErrNoLedger):
			return 0, nil, gerr
		case gerr != nil:
			c.log.Warn("ledger metadata: cannot read back after a failed write; retrying", "ledger", r.LedgerID, "err", gerr)
		case bytes.Equal(stored, val):
			return cur.Version, nil, nil
		case cur.Version != r.Version || errors.Is(err, meta.ErrConflict):
			return 0, &cur, nil
		}
		if !sleepCtx(ctx, wait) {
			return 0, nil, fmt.Errorf("ledger %d: write metadata (outcome unknown): %w", r.LedgerID, ctx.Err())
		}
		wait = min(2*wait, time.Second)
	}
}

// createRecord allocates the next ledger id and stores r under it, in
// one transaction conditioned on the counter's revision and on the
// ledger key being absent (an id taken otherwise is skipped).
func (c *Client) createRecord(ctx context.Context, r record) (record, error) {
	st := c.cfg.Store
	for {
		octx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
		next, rev := int64(1), int64(0)
		kv, err := st.Get(octx, LedgerIDKey)
		switch {
		case err == nil:
			next, err = strconv.ParseInt(string(kv.Value), 10, 64)
			if err != nil || next < 1 {
				cancel()
				return record{}, fmt.Errorf("ledger: id counter %s holds %q", LedgerIDKey, kv.Value)
			}
			rev = kv.ModRevision
		case errors.Is(err, meta.ErrNotFound):
		default:
			cancel()
			return record{}, fmt.Errorf("ledger: allocate id: %w", err)
		}
		r.LedgerID = next
		val, err := json.Marshal(r)
		if err != nil {
			cancel()
			return record{}, fmt.Errorf("ledger: encode metadata: %w", err)
		}
		counter := []byte(strconv.FormatInt(next+1, 10))
		trev, err := st.Txn(octx, []meta.Cond{{Key: LedgerIDKey, ModRevision: rev}, {Key: LedgerKey(next), ModRevision: 0}},
			meta.OpPut(LedgerIDKey, counter), meta.OpPut(LedgerKey(next), val))
		if err == nil {
			cancel()
			r.Version = trev
			return r, nil
		}
		var ce *meta.ConflictError
		if !errors.As(err, &ce) {
			cancel()
			return record{}, fmt.Errorf("ledger: create ledger %d: %w", next, err)
		}
		if ce.Key == LedgerKey(next) {
			// The id is taken (written by hand?): move the counter past it.
			_, _ = st.Txn(octx, []meta.Cond{{Key: LedgerIDKey, ModRevision: rev}}, meta.OpPut(LedgerIDKey, counter))
		}
		cancel()
		if ctx.Err() != nil {
			return record{}, ctx.Err()
		}
	}
}

// sleepCtx waits d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
