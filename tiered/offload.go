package tiered

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/stratamesh/strata/bookie/ledger"
)

// EntrySource is where Offload reads the ledger: entries first..last in
// order (*ledger.Reader satisfies it, reading up to the ledger's recorded
// end without fencing).
type EntrySource interface {
	Read(ctx context.Context, first, last int64) ([]ledger.Entry, error)
}

// OffloadOptions say which ledger Offload writes and how.
type OffloadOptions struct {
	// LedgerID is the ledger's id (≥ 0), recorded in the index and in
	// every frame's CRC.
	LedgerID int64
	// LastEntryID is the closed ledger's last entry id (its metadata's
	// LastEntryID). Below 0 (an empty ledger): ErrEmptyLedger.
	LastEntryID int64
	// Length is the ledger's length in bytes (the sum of its payloads, its
	// metadata's Length), if known: then the data object's exact size
	// (Length + 16 per entry) is given to the store's Put, and an offload
	// whose entries do not add up to it fails with ErrSourceMismatch. ≤ 0:
	// unknown (Put gets size -1).
	Length int64
	// Config holds the knobs (IndexInterval, ReadChunkEntries,
	// ReadChunkBytes, CleanupTimeout); zero means DefaultConfig().
	Config Config
	// Progress, if set, is called from Offload's goroutine after each
	// chunk handed to the store, with the entries and data-object bytes
	// done so far. It must not block for long.
	Progress func(entries, bytes int64)
	// Now stamps Offloaded.Time; nil means time.Now.
	Now func() time.Time
}

// Offloaded is what a successful Offload wrote, for the caller to record
// in the ledger's metadata.
type Offloaded struct {
	// LedgerID is the ledger's id.
	LedgerID int64
	// DataObject and IndexObject are the objects' names in the store.
	DataObject, IndexObject string
	// DataBytes is the data object's size, IndexBytes the index object's,
	// in bytes.
	DataBytes, IndexBytes int64
	// Entries is the number of entries (LastEntryID+1); PayloadBytes the
	// sum of their payload sizes (the ledger's Length).
	Entries, PayloadBytes int64
	// IndexInterval is the index's N.
	IndexInterval int
	// IndexCRC is the CRC32C the index object carries (IndexCRC), to
	// recognise it later.
	IndexCRC uint32
	// Time is when the offload was verified (OffloadOptions.Now).
	Time time.Time
}

// Offload writes a closed ledger read from src to store as base's data
// object and index object (the offload format of format.go; base is the
// caller's, e.g. prefix/region/tenant/namespace/topic/<ledger>-<uuid>, and
// must not name objects that exist). It streams the entries, a chunk at a
// time, into the data object through a pipe, puts the index, then
// verifies: it reads the index object back and checks it is the one
// written, and reads the last entry through the tiered read path and
// checks its length and CRC32C against what was written.
//
// On any failure (the source failing or returning other entries than
// asked for, a put failing, verification, ctx ending) it deletes both
// objects, with a fresh context bounded by Config.CleanupTimeout, and
// returns the error (a failed delete is joined to it). Errors:
// ErrInvalid, ErrEmptyLedger, ErrEntryTooLarge, ErrSourceMismatch,
// ErrVerify, and the source's, store's and ctx's errors.
//
// Offload decides nothing about when to offload or what happens to the
// bookie copy: that is the caller's policy.
func Offload(ctx context.Context, src EntrySource, store ObjectStore, base string, opts OffloadOptions) (Offloaded, error) {
	cfg := opts.Config.orDefault()
	if err := cfg.Validate(); err != nil {
		return Offloaded{}, err
	}
	switch {
	case base == "":
		return Offloaded{}, fmt.Errorf("%w: empty base name", ErrInvalid)
	case opts.LedgerID < 0:
		return Offloaded{}, fmt.Errorf("%w: ledger id %d", ErrInvalid, opts.LedgerID)
	case opts.LastEntryID < 0:
		return Offloaded{}, fmt.Errorf("%w: ledger %d (last entry id %d)", ErrEmptyLedger, opts.LedgerID, opts.LastEntryID)
	}
	o := &offload{ctx: ctx, src: src, store: store, base: base, opts: opts, cfg: cfg}
	res, err := o.run()
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.CleanupTimeout)
		defer cancel()
		if derr := Delete(cctx, store, base); derr != nil {
			err = errors.Join(err, fmt.Errorf("tiered: cleanup after failed offload: %w", derr))
		}
		return Offloaded{}, fmt.Errorf("tiered: offload ledger %d to %s: %w", opts.LedgerID, base, err)
	}
	return res, nil
}

// offload is one Offload's state.
type offload struct {
	ctx   context.Context
	src   EntrySource
	store ObjectStore
	base  string
	opts  OffloadOptions
	cfg   Config

	offsets      []int64 // index points so far
	written      int64   // data-object bytes so far
	payloadBytes int64
	lastLen      int64  // the last entry's payload length
	lastCRC      uint32 // and its payload's CRC32C
}

func (o *offload) run() (Offloaded, error) {
	if err := o.writeData(); err != nil {
		return Offloaded{}, err
	}
	ix := Index{
		LedgerID: o.opts.LedgerID, Entries: o.opts.LastEntryID + 1, DataBytes: o.written,
		Interval: o.cfg.IndexInterval, Offsets: o.offsets,
	}
	index, err := EncodeIndex(ix)
	if err != nil {
		return Offloaded{}, err
	}
	name := IndexObjectName(o.base)
	if err := o.store.Put(o.ctx, name, bytes.NewReader(index), int64(len(index))); err != nil {
		return Offloaded{}, fmt.Errorf("put %s: %w", name, err)
	}
	if err := o.verify(index); err != nil {
		return Offloaded{}, err
	}
	now := time.Now
	if o.opts.Now != nil {
		now = o.opts.Now
	}
	return Offloaded{
		LedgerID: o.opts.LedgerID, DataObject: DataObjectName(o.base), IndexObject: name,
		DataBytes: o.written, IndexBytes: int64(len(index)),
		Entries: ix.Entries, PayloadBytes: o.payloadBytes,
		IndexInterval: o.cfg.IndexInterval, IndexCRC: IndexCRC(index), Time: now(),
	}, nil
}

// writeData streams the frames into the data object: this goroutine reads
// the source and writes the pipe, another runs the store's Put reading it.
// Whatever fails, the Put has returned before writeData does.
func (o *offload) writeData() error {
	size := int64(-1)
	entries := o.opts.LastEntryID + 1
	if o.opts.Length > 0 {
		size = o.opts.Length + entries*FrameHeaderSize
	}
	name := DataObjectName(o.base)
	pr, pw := io.Pipe()
	putDone := make(chan error, 1)
	go func() {
		err := o.store.Put(o.ctx, name, pr, size)
		// Unblock the writer if Put returned without reading everything.
		pr.CloseWithError(errors.Join(err, errPutReturned))
		putDone <- err
	}()
	err := o.writeFrames(pw, size)
	if err != nil {
		pw.CloseWithError(err) // the Put fails with err
	} else {
		pw.Close()
	}
	putErr := <-putDone
	switch {
	case err != nil && !errors.Is(err, errPutReturned):
		return err
	case putErr != nil:
		return fmt.Errorf("put %s: %w", name, putErr)
	}
	return err // nil, or a Put that returned nil without reading everything
}

// errPutReturned is what writes to the pipe get once the Put has returned.
var errPutReturned = errors.New("tiered: the store's Put returned before the data was written")

// writeFrames reads the ledger in chunks and writes its frames to w,
// recording index points; size is the data object's announced size (-1:
// unknown).
func (o *offload) writeFrames(w io.Writer, size int64) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	last := o.opts.LastEntryID
	n := int64(o.cfg.IndexInterval)
	chunk := int64(o.cfg.ReadChunkEntries)
	var hdr [FrameHeaderSize]byte
	for first := int64(0); first <= last; {
		if err := o.ctx.Err(); err != nil {
			return err
		}
		hi := min(first+chunk-1, last)
		es, err := o.src.Read(o.ctx, first, hi)
		if err != nil {
			return fmt.Errorf("read entries %d..%d: %w", first, hi, err)
		}
		if int64(len(es)) != hi-first+1 {
			return fmt.Errorf("%w: asked for entries %d..%d, got %d entries", ErrSourceMismatch, first, hi, len(es))
		}
		var chunkBytes int64
		for i, e := range es {
			id := first + int64(i)
			switch {
			case e.ID != id:
				return fmt.Errorf("%w: asked for entry %d, got %d", ErrSourceMismatch, id, e.ID)
			case len(e.Payload) > MaxEntryBytes:
				return fmt.Errorf("%w: entry %d has %d bytes, the format carries at most %d", ErrEntryTooLarge, id, len(e.Payload), MaxEntryBytes)
			}
			frame := int64(FrameHeaderSize + len(e.Payload))
			if size >= 0 && o.written+frame > size {
				return fmt.Errorf("%w: entries through %d exceed the ledger length %d", ErrSourceMismatch, id, o.opts.Length)
			}
			if id%n == 0 {
				o.offsets = append(o.offsets, o.written)
			}
			putFrameHeader(hdr[:], o.opts.LedgerID, id, e.Payload)
			if _, err := bw.Write(hdr[:]); err != nil {
				return err
			}
			if _, err := bw.Write(e.Payload); err != nil {
				return err
			}
			o.written += frame
			o.payloadBytes += int64(len(e.Payload))
			chunkBytes += int64(len(e.Payload))
			if id == last {
				o.lastLen, o.lastCRC = int64(len(e.Payload)), crc32.Checksum(e.Payload, castagnoli)
			}
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		first = hi + 1
		if o.opts.Progress != nil {
			o.opts.Progress(first, o.written)
		}
		// Aim the next read at ReadChunkBytes of payload.
		avg := max(chunkBytes/int64(len(es)), 1)
		chunk = min(max(o.cfg.ReadChunkBytes/avg, 1), int64(o.cfg.ReadChunkEntries))
	}
	if size >= 0 && o.written != size {
		return fmt.Errorf("%w: entries add up to %d payload bytes, the ledger length is %d", ErrSourceMismatch, o.payloadBytes, o.opts.Length)
	}
	return nil
}

// verify reads back the index object and the last entry.
func (o *offload) verify(index []byte) error {
	got, ix, err := readIndexObject(o.ctx, o.store, IndexObjectName(o.base))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrVerify, err)
	}
	if !bytes.Equal(got, index) {
		return fmt.Errorf("%w: index object read back differs from the one written", ErrVerify)
	}
	// A private cache: nothing read before can stand in for the object.
	cfg := o.cfg
	cfg.ReadAheadBlocks = 0
	r := newReader(o.store, o.base, ix, nil, cfg)
	defer r.Close()
	last := ix.LastEntryID()
	es, err := r.Read(o.ctx, last, last)
	if err != nil {
		return fmt.Errorf("%w: read back entry %d: %w", ErrVerify, last, err)
	}
	p := es[0].Payload
	if int64(len(p)) != o.lastLen || crc32.Checksum(p, castagnoli) != o.lastCRC {
		return fmt.Errorf("%w: entry %d read back has %d bytes, CRC32C %08x; written %d bytes, %08x",
			ErrVerify, last, len(p), crc32.Checksum(p, castagnoli), o.lastLen, o.lastCRC)
	}
	return nil
}
