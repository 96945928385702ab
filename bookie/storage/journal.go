package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamesh/strata/internal/vfs"
)

// Pos is a position in the journal: a file id and a byte offset in it.
// Positions the engine keeps (checkpoints, batch ends) always fall on
// batch boundaries.
type Pos struct {
	File uint64
	Off  int64
}

// Less orders positions in journal order.
func (p Pos) Less(q Pos) bool {
	return p.File < q.File || (p.File == q.File && p.Off < q.Off)
}

type opKind uint8

const (
	opAdd opKind = iota + 1
	opFence
	opDelete
)

// op is one request travelling through the journal: its records are
// encoded into the pending batch at submit, and after the batch's fsync
// the engine applies it and calls done.
type op struct {
	kind   opKind
	ledger int64
	entry  int64
	lac    int64
	rec    []byte  // opAdd: the stored entry (also the journal record body)
	recCRC uint32  // opAdd: recordCRC(recAdd, rec)
	key    []byte  // master key: opFence's body; opAdd's when newKey
	newKey bool    // opAdd: journal a master-key record first
	st     *ledger // the ledger state the op was admitted against
	done   func(error)
}

type journalConfig struct {
	fs          vfs.FS
	dir         string
	clock       Clock
	log         *slog.Logger
	policy      groupPolicy
	maxPending  int   // bytes pending before submitters wait
	maxFileSize int64 // rotate past this
	prealloc    int64 // zero-filled reserve chunk (0: none; see reserve)
	noSync      bool
	salt        journalSalt // of batch-header CRCs (journal_format.go)
}

// journalStats are cumulative counters, read with atomic loads.
type journalStats struct {
	batches   atomic.Int64
	records   atomic.Int64
	adds      atomic.Int64
	bytes     atomic.Int64
	syncNanos atomic.Int64
	rotations atomic.Int64
	recycled  atomic.Int64 // journal files made from a spare
	zeroed    atomic.Int64 // bytes the reserve zero-filled ahead of the writer
}

// journal is the write-ahead log. Submitters (holding the engine lock,
// which orders their records) append encoded records to the pending batch;
// the writer goroutine decides with groupPolicy when to take the batch,
// writes it with one write and fsyncs; the acker goroutine then hands the
// batch's ops to onDurable, in batch order, while the writer is already
// writing the next batch. The writer owns the file; neither goroutine
// holds mu while doing I/O or calling onDurable.
type journal struct {
	cfg       journalConfig
	onDurable func(ops []*op, end Pos, err error)
	stats     journalStats

	mu            sync.Mutex
	space         sync.Cond // signalled when the pending batch is taken
	pend          []byte    // batch header space + encoded records
	pendOps       []*op
	pendRecs      int
	pendFirst     time.Time
	pendWhileBusy bool
	inflight      int // batches taken and not yet acked
	closing       bool
	kick          chan struct{} // wakes the writer (capacity 1)
	acks          chan ackBatch // writer → acker, in batch order
	done          chan struct{} // closed when both goroutines have exited
	freeOps       [][]*op       // op slices back from the acker, for reuse
	pendLen       atomic.Int64  // len(pend), for waitSpace's fast path
	spares        sparePool     // purged files kept for reuse (journal_recycle.go)

	// Owned by the writer goroutine (and by close after it exits).
	f      vfs.File
	fileID uint64
	off    int64
	res    *reserve // nil: batches are appended
	seq    uint64
	broken error // set when a failed batch could not be rolled back
	spare  []byte
}

// ackBatch is a written (or failed) batch on its way to onDurable.
type ackBatch struct {
	ops []*op
	end Pos
	err error
}

const (
	journalDir   = "journal"
	journalExt   = ".jnl"
	logsDir      = "logs"
	entryLogExt  = ".log"
	indexDirName = "index"
)

func idFileName(id uint64, ext string) string { return fmt.Sprintf("%016x%s", id, ext) }

// parseIDFileName returns the id of a file named by idFileName with ext.
func parseIDFileName(name, ext string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, ext)
	if !ok || len(base) != 16 {
		return 0, false
	}
	id, err := strconv.ParseUint(base, 16, 64)
	return id, err == nil
}

// startJournal creates journal file fileID and starts the writer.
func startJournal(cfg journalConfig, fileID, seq uint64, onDurable func([]*op, Pos, error)) (*journal, error) {
	j := &journal{
		cfg:       cfg,
		onDurable: onDurable,
		pend:      make([]byte, batchHeaderSize, 64<<10),
		kick:      make(chan struct{}, 1),
		acks:      make(chan ackBatch, 4),
		done:      make(chan struct{}),
		seq:       seq,
	}
	j.space.L = &j.mu
	if err := j.findSpares(); err != nil {
		return nil, err
	}
	f, size, err := j.createFile(fileID)
	if err != nil {
		return nil, err
	}
	j.f, j.fileID, j.off = f, fileID, fileHeaderSize
	if cfg.prealloc > 0 && !cfg.noSync {
		j.res = startReserve(cfg.fs, j.path(fileID), size, cfg.prealloc, cfg.maxFileSize, cfg.log, &j.stats.zeroed)
	}
	ackerDone := make(chan struct{})
	go j.runAcker(ackerDone)
	go func() {
		j.run()
		close(j.acks)
		<-ackerDone
		close(j.done)
	}()
	return j, nil
}

func (j *journal) path(id uint64) string {
	return filepath.Join(j.cfg.dir, idFileName(id, journalExt))
}

// createFile makes journal file id holding its header, durable (file and
// directory entry) before it is used, from a spare when there is one (see
// recycle), and returns it with its size.
func (j *journal) createFile(id uint64) (vfs.File, int64, error) {
	if spare := j.takeSpare(); spare != "" {
		f, size, err := j.recycle(spare, id)
		if err == nil {
			j.stats.recycled.Add(1)
			return f, size, nil
		}
		j.cfg.log.Warn("journal: cannot recycle a spare file; creating a new one", "spare", spare, "err", err)
		j.cfg.fs.Remove(spare)
	}
	name := j.path(id)
	f, err := j.cfg.fs.Create(name)
	if err != nil {
		return nil, 0, fmt.Errorf("bookie: create journal file: %w", err)
	}
	_, err = f.WriteAt(encodeFileHeader(id), 0)
	if err == nil && !j.cfg.noSync {
		err = f.Sync()
	}
	if err == nil && !j.cfg.noSync {
		err = j.cfg.fs.SyncDir(j.cfg.dir)
	}
	if err != nil {
		f.Close()
		j.cfg.fs.Remove(name)
		return nil, 0, fmt.Errorf("bookie: create journal file: %w", err)
	}
	return f, fileHeaderSize, nil
}

// waitSpace blocks while the pending batch is over maxPending bytes
// (back-pressure). Call it without holding the engine lock.
func (j *journal) waitSpace() {
	if j.pendLen.Load() < int64(j.cfg.maxPending) {
		return
	}
	j.mu.Lock()
	for len(j.pend) >= j.cfg.maxPending && !j.closing {
		j.space.Wait()
	}
	j.mu.Unlock()
}

// submit appends the records of ops, in order, to the pending batch and
// wakes the writer once. The caller holds the engine lock, so records of
// one ledger enter the journal in the order the engine admitted them. It
// fails only with ErrClosed (then none is submitted).
func (j *journal) submit(ops ...*op) error {
	if len(ops) == 0 {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closing {
		return ErrClosed
	}
	if j.pendRecs == 0 {
		j.pendFirst = j.cfg.clock.Now()
		j.pendWhileBusy = j.inflight > 0
	}
	for _, o := range ops {
		switch o.kind {
		case opAdd:
			if o.newKey {
				j.pend = appendLedgerRecord(j.pend, recMasterKey, o.ledger, o.key)
				j.pendRecs++
			}
			j.pend = appendRecord(j.pend, recAdd, o.recCRC, o.rec)
		case opFence:
			j.pend = appendLedgerRecord(j.pend, recFence, o.ledger, o.key)
		case opDelete:
			j.pend = appendLedgerRecord(j.pend, recDelete, o.ledger, nil)
		}
		j.pendRecs++
	}
	j.pendOps = append(j.pendOps, ops...)
	j.pendLen.Store(int64(len(j.pend)))
	select {
	case j.kick <- struct{}{}:
	default:
	}
	return nil
}

// appendLedgerRecord appends a record whose body is a ledger id followed
// by data (master-key, fence and delete records), without building the
// body separately.
func appendLedgerRecord(dst []byte, t recType, ledger int64, data []byte) []byte {
	var id [8]byte
	binary.BigEndian.PutUint64(id[:], uint64(ledger))
	c := crc32.Update(0, castagnoli, []byte{byte(t)})
	c = crc32.Update(c, castagnoli, id[:])
	c = crc32.Update(c, castagnoli, data)
	var h [recHeaderSize]byte
	binary.BigEndian.PutUint32(h[0:], uint32(8+len(data)))
	binary.BigEndian.PutUint32(h[4:], c)
	h[8] = byte(t)
	dst = append(dst, h[:]...)
	dst = append(dst, id[:]...)
	return append(dst, data...)
}

func (j *journal) state() groupState {
	return groupState{
		count:          j.pendRecs,
		bytes:          len(j.pend) - batchHeaderSize,
		first:          j.pendFirst,
		firstWhileBusy: j.pendWhileBusy,
		closing:        j.closing,
	}
}

// run is the writer goroutine.
func (j *journal) run() {
	timer := j.cfg.clock.NewTimer(time.Hour)
	timer.Stop()
	for {
		buf, ops, recs, ok := j.next(timer)
		if !ok {
			return
		}
		end, err := j.write(buf, recs, ops)
		j.mu.Lock()
		j.spare = buf[:0]
		j.mu.Unlock()
		j.acks <- ackBatch{ops: ops, end: end, err: err}
	}
}

// runAcker is the acker goroutine: it applies and completes each batch,
// in order, then marks it no longer in flight.
func (j *journal) runAcker(done chan<- struct{}) {
	defer close(done)
	for b := range j.acks {
		j.onDurable(b.ops, b.end, b.err)
		clear(b.ops)
		j.mu.Lock()
		j.inflight--
		j.freeOps = append(j.freeOps, b.ops[:0])
		j.mu.Unlock()
	}
}

// next waits until the policy says to write, then takes the pending batch.
// ok is false when the journal is closing and nothing is pending.
func (j *journal) next(timer Timer) (buf []byte, ops []*op, recs int, ok bool) {
	j.mu.Lock()
	for {
		write, wait := j.cfg.policy.decide(j.state(), j.cfg.clock.Now())
		if write {
			break
		}
		if j.closing {
			j.mu.Unlock()
			return nil, nil, 0, false
		}
		j.mu.Unlock()
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-j.kick:
				timer.Stop()
			case <-timer.C():
			}
		} else {
			<-j.kick
		}
		j.mu.Lock()
	}
	buf, ops, recs = j.pend, j.pendOps, j.pendRecs
	if cap(j.spare) >= batchHeaderSize {
		j.pend = j.spare[:batchHeaderSize]
	} else {
		j.pend = make([]byte, batchHeaderSize, 64<<10)
	}
	j.spare = nil
	j.pendOps, j.pendRecs = nil, 0
	if n := len(j.freeOps); n > 0 {
		j.pendOps, j.freeOps = j.freeOps[n-1], j.freeOps[:n-1]
	}
	j.pendLen.Store(int64(len(j.pend)))
	j.inflight++
	j.space.Broadcast()
	j.mu.Unlock()
	return buf, ops, recs, true
}

// write writes one batch at the end of the current file (rotating first
// if it would pass maxFileSize) and fsyncs it. On failure the file is
// truncated back to the previous batch end, so the failed batch cannot
// reappear at replay; if even that fails the journal is broken and every
// later batch fails too.
func (j *journal) write(buf []byte, recs int, ops []*op) (Pos, error) {
	if j.broken != nil {
		return Pos{}, j.broken
	}
	if j.off > fileHeaderSize && j.off+int64(len(buf)) > j.cfg.maxFileSize {
		if err := j.rotate(); err != nil {
			return Pos{}, err
		}
	}
	j.seq++
	putBatchHeader(buf, j.seq, recs, len(buf)-batchHeaderSize, j.fileID, j.cfg.salt)
	if j.res != nil {
		j.res.claim(j.off + int64(len(buf)))
	}
	start := time.Now()
	_, err := j.f.WriteAt(buf, j.off)
	if err == nil && !j.cfg.noSync {
		err = vfs.SyncData(j.f)
	}
	if err != nil {
		j.rollback(err)
		return Pos{}, fmt.Errorf("bookie: journal write: %w", err)
	}
	j.stats.syncNanos.Add(int64(time.Since(start)))
	j.off += int64(len(buf))
	j.stats.batches.Add(1)
	j.stats.records.Add(int64(recs))
	j.stats.bytes.Add(int64(len(buf)))
	adds := 0
	for _, o := range ops {
		if o.kind == opAdd {
			adds++
		}
	}
	j.stats.adds.Add(int64(adds))
	return Pos{File: j.fileID, Off: j.off}, nil
}

// rollback truncates the file back to the end of the last good batch.
func (j *journal) rollback(cause error) {
	truncate := func() error {
		err := j.f.Truncate(j.off)
		if err == nil && !j.cfg.noSync {
			err = j.f.Sync()
		}
		return err
	}
	var err error
	if j.res != nil {
		j.res.exclusive(func() (string, int64) { err = truncate(); return j.path(j.fileID), j.off })
	} else {
		err = truncate()
	}
	if err != nil {
		j.broken = fmt.Errorf("bookie: journal unusable after a failed write: %w", errors.Join(cause, err))
		j.cfg.log.Error("journal broken", "file", j.fileID, "err", j.broken)
	}
}

// rotate moves to a new journal file. The old one is complete and
// synced; it is cut to its last batch (dropping the reserve, or a recycled
// file's old data) and that is made durable before the new file exists,
// because replay takes anything after the last batch of a file that is
// not the newest for corruption.
func (j *journal) rotate() error {
	old, oldOff := j.f, j.off
	var f vfs.File
	var err error
	next := func() (string, int64) {
		if err = j.cut(old, oldOff); err != nil {
			return j.path(j.fileID), oldOff
		}
		var size int64
		if f, size, err = j.createFile(j.fileID + 1); err != nil {
			return j.path(j.fileID), oldOff
		}
		return j.path(j.fileID + 1), size
	}
	if j.res != nil {
		j.res.exclusive(next)
	} else {
		next()
	}
	if err != nil {
		return err
	}
	j.f, j.fileID, j.off = f, j.fileID+1, fileHeaderSize
	old.Close()
	j.stats.rotations.Add(1)
	j.cfg.log.Debug("journal rotated", "file", j.fileID)
	return nil
}

// cut truncates f to end and makes that durable.
func (j *journal) cut(f vfs.File, end int64) error {
	err := f.Truncate(end)
	if err == nil && !j.cfg.noSync {
		err = f.Sync()
	}
	if err != nil {
		return fmt.Errorf("bookie: cut journal file to %d bytes: %w", end, err)
	}
	return nil
}

// close writes and acks what is pending, stops the writer and the acker
// and closes the file.
// Submits after close fail with ErrClosed. Not safe to call twice.
func (j *journal) close() error {
	j.mu.Lock()
	j.closing = true
	j.space.Broadcast()
	select {
	case j.kick <- struct{}{}:
	default:
	}
	j.mu.Unlock()
	<-j.done
	if j.res != nil {
		j.res.stop()
	}
	// The next open starts a new file: this one must end at its last
	// batch (see rotate).
	err := j.cut(j.f, j.off)
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// purge retires the journal files before file id before (all older than
// the checkpoint): see retire. Errors are logged; a file left behind is
// purged later.
func (j *journal) purge(before uint64) {
	names, err := j.cfg.fs.List(j.cfg.dir)
	if err != nil {
		j.cfg.log.Warn("journal purge: list", "err", err)
		return
	}
	for _, n := range names {
		if id, ok := parseIDFileName(n, journalExt); ok && id < before {
			if err := j.retire(id); err != nil {
				j.cfg.log.Warn("journal purge", "file", n, "err", err)
			}
		}
	}
}
