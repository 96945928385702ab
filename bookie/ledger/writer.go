package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/stratamesh/strata/bookie/ledger/core"
)

// CreateOptions describes a new ledger.
type CreateOptions struct {
	// Ensemble E, WriteQuorum Qw, AckQuorum Qa: E ≥ Qw ≥ Qa ≥ 1. Each
	// entry is stored on Qw of the E bookies (striping) and confirmed
	// once Qa of them have it durably.
	Ensemble, WriteQuorum, AckQuorum int
	// Password protects the ledger: the master key the bookies check on
	// adds and fences is derived from it, and OpenForTakeover needs it.
	// May be empty.
	Password []byte
	// Custom are properties stored with the metadata, opaque to the
	// client (Client.Custom reads them back).
	Custom map[string]string
}

// Create creates an OPEN ledger on E writable bookies chosen by
// Config.Placement, under a new id (allocated in etcd; unique in the
// region, increasing, from 1), and returns its writer. Errors:
// ErrInvalidOptions (quorums), ErrNotEnoughBookies (saying how many are
// writable and needed), etcd's.
func (c *Client) Create(ctx context.Context, o CreateOptions) (*Writer, error) {
	ctx, end, err := c.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	if !(o.Ensemble >= o.WriteQuorum && o.WriteQuorum >= o.AckQuorum && o.AckQuorum >= 1) {
		return nil, fmt.Errorf("%w: need E ≥ Qw ≥ Qa ≥ 1, have E=%d Qw=%d Qa=%d", ErrInvalidOptions, o.Ensemble, o.WriteQuorum, o.AckQuorum)
	}
	regs, err := c.choose(ctx, o.Ensemble, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("ledger: create: %w", err)
	}
	seg := core.Segment{FirstEntry: 0}
	for _, r := range regs {
		seg.Ensemble = append(seg.Ensemble, core.BookieID(r.ID))
		seg.Instances = append(seg.Instances, r.Instance)
	}
	rec := record{
		Metadata: core.Metadata{
			EnsembleSize: o.Ensemble, WriteQuorum: o.WriteQuorum, AckQuorum: o.AckQuorum,
			State: core.StateOpen, LastEntryID: core.NoEntry, DigestType: DigestCRC32C,
			MasterKey: masterKey(o.Password), Segments: []core.Segment{seg},
		},
		Custom: maps.Clone(o.Custom),
	}
	rec, err = c.createRecord(ctx, rec)
	if err != nil {
		return nil, err
	}
	w, err := c.startWriter(rec)
	if err != nil {
		return nil, err
	}
	c.log.Info("ledger created", "ledger", rec.LedgerID, "ensemble", seg.Ensemble,
		"e", o.Ensemble, "qw", o.WriteQuorum, "qa", o.AckQuorum)
	return w, nil
}

// Writer is the single writer of an OPEN ledger (BookKeeper's
// LedgerHandle): appends are striped over the ensemble, confirmed at Qa
// acks in entry order, and failed bookies are replaced by ensemble
// changes. Safe for concurrent use. One goroutine owns its core.Writer;
// see the package doc.
type Writer struct {
	c        *Client
	id       int64
	log      *slog.Logger
	key      []byte
	custom   map[string]string
	maxEntry int

	lac  atomic.Int64
	mdMu sync.Mutex
	md   core.Metadata // last committed

	in   *mailbox[any] // events for the owner
	flow *flow
	cbq  *callbackQueue

	stateMu sync.Mutex
	stopped bool // the owner has exited: appends fail at once

	stopOnce sync.Once
	stop     chan struct{}  // closed by abort
	done     chan struct{}  // closed when the owner exits
	wg       sync.WaitGroup // the owner, its sessions and helpers (not the callback goroutine: Client.callbacks)

	closeOnce sync.Once
	result    closeResult // set by the owner before done closes
}

type closeResult struct {
	md  core.Metadata
	err error
}

// appendEv is an append on its way to the owner.
type appendEv struct {
	frame []byte // FrameHeaderSize + payload; header sealed at first send
	size  int64  // payload bytes (held in flow)
	done  func(int64, error)
	err   error // refused before reaching the owner (too large)
}

// closeEv asks the owner to close the ledger once its appends complete.
type closeEv struct{ ctx context.Context }

func (c *Client) startWriter(rec record) (*Writer, error) {
	cw, err := core.NewWriter(rec.Metadata)
	if err != nil {
		return nil, err
	}
	w := &Writer{
		c: c, id: rec.LedgerID, log: c.log.With("ledger", rec.LedgerID),
		key: rec.MasterKey, custom: rec.Custom, maxEntry: c.cfg.MaxEntrySize,
		md: rec.Metadata.Clone(), in: newMailbox[any](), flow: newFlow(c.cfg.MaxPendingBytes),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	w.lac.Store(core.NoEntry)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClientClosed
	}
	c.writers[w] = struct{}{}
	w.cbq = startCallbackQueue(&c.callbacks)
	c.mu.Unlock()
	l := newWriterLoop(w, cw)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer close(w.done)
		l.run()
	}()
	return w, nil
}

// ID is the ledger id.
func (w *Writer) ID() int64 { return w.id }

// LAC is the LastAddConfirmed: every entry up to it is confirmed
// (NoEntry, -1, before the first).
func (w *Writer) LAC() int64 { return w.lac.Load() }

// Metadata is the ledger's metadata as last committed by this writer
// (its ensemble changes; after Close, the CLOSED record).
func (w *Writer) Metadata() core.Metadata {
	w.mdMu.Lock()
	defer w.mdMu.Unlock()
	return w.md.Clone()
}

// Custom is the ledger's custom properties.
func (w *Writer) Custom() map[string]string { return maps.Clone(w.custom) }

// AppendAsync appends payload (copied: the caller may reuse it) as the
// next entry. done is called exactly once per call, in entry order (the
// order of AppendAsync calls), from a goroutine of the writer that runs
// callbacks one at a time: with the entry id once Qa bookies of its
// write set have it durably and every earlier entry is confirmed, or with
// an error (then the entry may or may not be stored; recovery decides,
// the same way for every reader). Errors: ErrEntryTooLarge (the writer
// goes on), the error that ended the writer (ErrFenced, ErrRecovering,
// ErrLedgerClosed, ErrMetadataConflict, ErrUnauthorized,
// ErrNotEnoughBookies, wrapped), ErrWriterClosed. A slow done delays
// later callbacks only, never the writer. AppendAsync blocks while
// Config.MaxPendingBytes are unconfirmed (back-pressure). After Close has
// returned, done runs before AppendAsync returns.
func (w *Writer) AppendAsync(payload []byte, done func(entryID int64, err error)) {
	_ = w.appendAsync(context.Background(), payload, done)
}

// AppendFrameAsync is AppendAsync for an entry the caller builds in place
// and gives away, which saves AppendAsync's copy: frame is
// FrameHeaderSize bytes (any content: the writer fills them) followed by
// the payload. The writer owns frame from the call on and keeps it
// unchanged once its header is written; the caller must not touch it
// again.
func (w *Writer) AppendFrameAsync(frame []byte, done func(entryID int64, err error)) {
	if len(frame) < FrameHeaderSize {
		panic(fmt.Sprintf("ledger: AppendFrameAsync: %d-byte frame, shorter than its %d-byte header", len(frame), FrameHeaderSize))
	}
	_ = w.appendFrame(context.Background(), frame[FrameHeaderSize:], frame, done)
}

// Append appends payload and waits until it is confirmed (see
// AppendAsync), returning its entry id. If ctx ends first it returns
// ctx's error; the entry may still be confirmed later.
func (w *Writer) Append(ctx context.Context, payload []byte) (int64, error) {
	type result struct {
		id  int64
		err error
	}
	ch := make(chan result, 1)
	if err := w.appendAsync(ctx, payload, func(id int64, err error) { ch <- result{id, err} }); err != nil {
		return core.NoEntry, err
	}
	select {
	case r := <-ch:
		return r.id, r.err
	case <-ctx.Done():
		return core.NoEntry, fmt.Errorf("ledger %d: append: %w (the entry may still be confirmed)", w.id, ctx.Err())
	}
}

// appendAsync is AppendAsync; it returns an error, without calling done,
// only if ctx ends while waiting for room.
func (w *Writer) appendAsync(ctx context.Context, payload []byte, done func(int64, error)) error {
	return w.appendFrame(ctx, payload, nil, done)
}

// appendFrame appends payload, in frame (payload's frame, given away) or
// copied into a new one if frame is nil.
func (w *Writer) appendFrame(ctx context.Context, payload, frame []byte, done func(int64, error)) error {
	if done == nil {
		done = func(int64, error) {}
	}
	ev := &appendEv{done: done}
	if len(payload) > w.maxEntry {
		ev.err = fmt.Errorf("%w: ledger %d: %d bytes (at most %d)", ErrEntryTooLarge, w.id, len(payload), w.maxEntry)
	} else {
		err := w.flow.acquire(ctx, int64(len(payload)))
		switch {
		case err == nil:
			ev.size = int64(len(payload))
		case !errors.Is(err, errFlowClosed):
			return fmt.Errorf("ledger %d: append: %w", w.id, err)
		}
		ev.frame = frame
		if frame == nil {
			ev.frame = newFrame(payload)
		}
	}
	w.stateMu.Lock()
	if !w.stopped {
		w.in.push(ev)
		w.stateMu.Unlock()
		return nil
	}
	w.stateMu.Unlock()
	w.flow.release(ev.size)
	err := ev.err
	if err == nil {
		err = w.stoppedErr()
	}
	if !w.cbq.push(func() { done(core.NoEntry, err) }) {
		done(core.NoEntry, err)
	}
	return nil
}

// stoppedErr is what appends get once the owner has exited.
func (w *Writer) stoppedErr() error {
	if err := w.result.err; err != nil && !errors.Is(err, ErrWriterClosed) {
		return fmt.Errorf("%w: ledger %d: %w", ErrWriterClosed, w.id, err)
	}
	return fmt.Errorf("%w: ledger %d", ErrWriterClosed, w.id)
}

// Close waits for every append to be confirmed, then closes the ledger:
// a CAS of its metadata to CLOSED with LastEntryID = LAC and Length =
// payload bytes through it, conditioned on the version this writer
// committed. It returns the CLOSED metadata. Later appends fail with
// ErrWriterClosed.
//
// If ctx ends first, Close gives up: unconfirmed appends fail with
// ErrWriterClosed and the ledger stays OPEN (the next owner recovers it);
// the error wraps ctx's. If the writer had ended (fenced, ...), Close
// returns that error and the metadata it last knew. A CAS that finds the
// ledger IN_RECOVERY or CLOSED returns ErrRecovering or ErrLedgerClosed:
// every confirmed entry is safe (recovery never closes below the LAC).
// Every append's done has been queued when Close returns, but callbacks
// may still be running (a callback may call Close); Client.Close waits
// for them. Idempotent: later calls return the first result.
func (w *Writer) Close(ctx context.Context) (core.Metadata, error) {
	w.closeOnce.Do(func() {
		w.stateMu.Lock()
		if !w.stopped {
			w.in.push(&closeEv{ctx: ctx})
		}
		w.stateMu.Unlock()
		<-w.done
		w.wg.Wait()
		w.c.mu.Lock()
		delete(w.c.writers, w)
		w.c.mu.Unlock()
	})
	return w.result.md.Clone(), w.result.err
}

// abort stops the writer without closing the ledger (Client.Close).
func (w *Writer) abort() {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
	w.wg.Wait()
}
