package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/stratamesh/strata/internal/vfs"
)

// Entry logs are named %016x.log (the log id, in hex): a 16-byte header
// (u32 magic "SELG", u32 version, u64 log id) followed by stored entries
// (entry_format.go) back to back, sorted by (ledger, entry) within each
// flush. A log is written by one flush or compaction at a time and is
// immutable once sealed; the index says which of its records are live.
const (
	logHeaderSize = 16
	logMagic      = 0x53454c47 // "SELG"
	logVersion    = 1
)

func encodeLogHeader(id uint64) []byte {
	b := binary.BigEndian.AppendUint32(nil, logMagic)
	b = binary.BigEndian.AppendUint32(b, logVersion)
	return binary.BigEndian.AppendUint64(b, id)
}

func checkLogHeader(b []byte, id uint64) error {
	if len(b) < logHeaderSize || binary.BigEndian.Uint32(b) != logMagic ||
		binary.BigEndian.Uint32(b[4:]) != logVersion || binary.BigEndian.Uint64(b[8:]) != id {
		return fmt.Errorf("%w: entry log %016x has a bad header", ErrCorrupt, id)
	}
	return nil
}

// logMeta is what the engine knows of an entry log: its size and, per
// ledger, the bytes of stored entries written there. Deleting a ledger
// drops it from every log's map, so live() is what compaction would keep
// (an overestimate when entries were overwritten by later copies).
type logMeta struct {
	size    int64
	ledgers map[int64]int64
}

func (m *logMeta) live() int64 {
	var n int64
	for _, b := range m.ledgers {
		n += b
	}
	return n
}

func (m *logMeta) clone() *logMeta {
	c := &logMeta{size: m.size, ledgers: make(map[int64]int64, len(m.ledgers))}
	for l, b := range m.ledgers {
		c.ledgers[l] = b
	}
	return c
}

// errLogGone: the log was retired (compacted away) between the index
// lookup and the read; the reader looks the entry up again.
var errLogGone = errors.New("bookie: entry log retired")

// logFile is an entry log open for reading. refs counts readers inside
// ReadAt; a retired log is closed and removed when the last leaves.
type logFile struct {
	id      uint64
	f       vfs.File
	refs    int
	retired bool
}

// logSet tracks the entry logs: metadata, read handles and retirement.
// Metadata changes are made by the flush, DeleteLedger and compaction,
// which the engine serialises with flushMu; mu guards the maps themselves
// against readers.
type logSet struct {
	fs  vfs.FS
	dir string
	log *slog.Logger

	mu     sync.Mutex
	files  map[uint64]*logFile
	meta   map[uint64]*logMeta
	nextID uint64
}

func (s *logSet) path(id uint64) string { return filepath.Join(s.dir, idFileName(id, entryLogExt)) }

func (s *logSet) allocID() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	return id
}

// read returns the stored entry at loc, checked (CRC and ids).
func (s *logSet) read(loc location, ledger, entry int64) (Entry, error) {
	lf, err := s.acquire(loc.log)
	if err != nil {
		return Entry{}, err
	}
	defer s.release(lf)
	if loc.size < entryHeaderSize {
		return Entry{}, fmt.Errorf("%w: location of %d bytes", ErrCorrupt, loc.size)
	}
	buf := make([]byte, loc.size)
	if _, err := readFull(lf.f, buf, loc.off); err != nil {
		return Entry{}, fmt.Errorf("%w: entry log %016x offset %d: %v", ErrCorrupt, loc.log, loc.off, err)
	}
	return decodeEntry(buf, ledger, entry)
}

// acquire returns the open log id with a reference held, or errLogGone.
func (s *logSet) acquire(id uint64) (*logFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lf := s.files[id]
	if lf == nil {
		if _, ok := s.meta[id]; !ok {
			return nil, errLogGone
		}
		lf = &logFile{id: id}
		s.files[id] = lf
	}
	if lf.retired {
		return nil, errLogGone
	}
	if lf.f == nil {
		f, err := s.fs.Open(s.path(id))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%w: entry log %016x is missing", ErrCorrupt, id)
			}
			return nil, err
		}
		lf.f = f
	}
	lf.refs++
	return lf, nil
}

// addRef takes another reference on lf, which the caller holds one on;
// false if it was retired meanwhile (then nothing is taken).
func (s *logSet) addRef(lf *logFile) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lf.retired {
		return false
	}
	lf.refs++
	return true
}

func (s *logSet) release(lf *logFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lf.refs--
	if lf.retired && lf.refs == 0 {
		s.dispose(lf)
	}
}

// retire forgets log id (the index no longer points into it) and removes
// its file once no reader holds it.
func (s *logSet) retire(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.meta, id)
	lf := s.files[id]
	if lf == nil {
		lf = &logFile{id: id}
	}
	lf.retired = true
	if lf.refs == 0 {
		s.dispose(lf)
	}
}

// dispose closes and removes a retired log. Callers hold mu.
func (s *logSet) dispose(lf *logFile) {
	delete(s.files, lf.id)
	if lf.f != nil {
		lf.f.Close()
	}
	if err := s.fs.Remove(s.path(lf.id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("remove retired entry log", "log", lf.id, "err", err)
	}
}

// setMeta records (a copy of) a log's metadata.
func (s *logSet) setMeta(id uint64, m *logMeta) {
	s.mu.Lock()
	s.meta[id] = m.clone()
	s.mu.Unlock()
}

func (s *logSet) metaOf(id uint64) *logMeta {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.meta[id]; m != nil {
		return m.clone()
	}
	return nil
}

// snapshot returns a copy of every log's metadata.
func (s *logSet) snapshot() map[uint64]*logMeta {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[uint64]*logMeta, len(s.meta))
	for id, m := range s.meta {
		out[id] = m.clone()
	}
	return out
}

// dropLedger removes a ledger from every log's metadata and returns the
// ids of the logs it was in.
func (s *logSet) dropLedger(ledger int64) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []uint64
	for id, m := range s.meta {
		if _, ok := m.ledgers[ledger]; ok {
			delete(m.ledgers, ledger)
			ids = append(ids, id)
		}
	}
	return ids
}

func (s *logSet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, lf := range s.files {
		if lf.f != nil {
			lf.f.Close()
			lf.f = nil
		}
	}
}

// logWriter appends stored entries to a new entry log through a buffer.
// Owned by one flush or compaction at a time.
//
// With Config.EntryLogDirectIO, where the file system allows, the log is
// written with direct I/O (as BookKeeper's DirectIO entry logger): the bytes skip the
// page cache, which on a busy bookie costs an order of magnitude more CPU
// per byte than the disk's own transfer (docs/perf.md). Direct writes must
// be whole aligned blocks, so the partial block at the end of what was
// written stays in the buffer: sync writes it padded with zeros, and the
// next write rewrites that block from its start with the same leading
// bytes, which a torn write therefore cannot damage (on a device that
// writes whole sectors; a buffered writer has the same exposure, as the
// page cache writes back the whole block an append dirtied). The file can thus be
// up to DirectAlignment-1 bytes longer than the log (zeros past meta.size,
// never referenced). Readers use their own buffered handle (logSet).
type logWriter struct {
	fs     vfs.FS
	dir    string
	id     uint64
	f      vfs.File
	direct bool  // f was created for direct I/O
	off    int64 // file offset of the next record (buffered bytes included)
	fileAt int64 // file offset of buf[0]: bytes before it are written for good
	buf    []byte
	meta   *logMeta
	fresh  bool // created and not yet made durable with a directory sync
	noSync bool
	log    *slog.Logger
}

const logWriteBuffer = 1 << 20

func createLogWriter(fsys vfs.FS, dir string, id uint64, noSync, wantDirect bool, log *slog.Logger) (*logWriter, error) {
	name := filepath.Join(dir, idFileName(id, entryLogExt))
	var f vfs.File
	var direct bool
	var err error
	if wantDirect {
		f, direct, err = vfs.CreateDirect(fsys, name)
	} else {
		f, err = fsys.Create(name)
	}
	if err != nil {
		return nil, fmt.Errorf("bookie: create entry log: %w", err)
	}
	w := &logWriter{fs: fsys, dir: dir, id: id, f: f, direct: direct, log: log,
		meta: &logMeta{ledgers: map[int64]int64{}}, fresh: true, noSync: noSync}
	if direct {
		w.buf = vfs.AlignedBuffer(logWriteBuffer)[:0]
	} else {
		w.buf = make([]byte, 0, logWriteBuffer)
	}
	w.buf = append(w.buf, encodeLogHeader(id)...)
	w.off = logHeaderSize
	w.meta.size = logHeaderSize
	return w, nil
}

// append buffers a stored entry and returns its offset.
func (w *logWriter) append(ledger int64, rec []byte) (int64, error) {
	if len(w.buf)+len(rec) > cap(w.buf) && len(w.buf) > 0 {
		if err := w.flushBuf(false); err != nil {
			return 0, err
		}
	}
	if w.direct && len(w.buf)+len(rec) > cap(w.buf) {
		// A record larger than the buffer: grow it, aligned (a plain
		// append would lose the alignment).
		nb := vfs.AlignedBuffer(len(w.buf) + len(rec))[:len(w.buf)]
		copy(nb, w.buf)
		w.buf = nb
	}
	off := w.off
	w.buf = append(w.buf, rec...)
	w.off += int64(len(rec))
	w.meta.size = w.off
	w.meta.ledgers[ledger] += int64(len(rec))
	return off, nil
}

// flushBuf writes the buffer to the file. With direct I/O it writes whole
// blocks only, keeping the partial last block buffered, unless final,
// when it writes that block too (padded with zeros) and still keeps it,
// to be rewritten by the next write.
func (w *logWriter) flushBuf(final bool) error {
	if len(w.buf) == 0 {
		return nil
	}
	n := len(w.buf)
	if !w.direct {
		if _, err := w.f.WriteAt(w.buf, w.fileAt); err != nil {
			return fmt.Errorf("bookie: write entry log %016x: %w", w.id, err)
		}
		// Start writing it back now: the final sync then has little left,
		// and the journal's fsyncs never queue behind a flush's whole burst.
		if !w.noSync {
			vfs.StartWriteback(w.f, w.fileAt, int64(n))
		}
		w.fileAt += int64(n)
		w.buf = w.buf[:0]
		return nil
	}
	whole := vfs.AlignDown(n)
	end := whole
	if final {
		end = vfs.AlignUp(n)
		clear(w.buf[n:end]) // within cap: cap is a multiple of the block
	}
	if end == 0 {
		return nil
	}
	if _, err := w.f.WriteAt(w.buf[:end], w.fileAt); err != nil {
		if errors.Is(err, syscall.EINVAL) {
			// The file system took O_DIRECT but not these writes (a
			// device whose blocks are larger than DirectAlignment): go on
			// through the page cache. (MemFS refuses a misaligned write
			// with fs.ErrInvalid instead, so a bug here fails tests.)
			w.log.Warn("entry log: direct I/O refused; writing through the page cache", "log", w.id, "err", err)
			if ferr := w.leaveDirect(); ferr != nil {
				return fmt.Errorf("bookie: write entry log %016x: %w", w.id, errors.Join(err, ferr))
			}
			return w.flushBuf(final)
		}
		return fmt.Errorf("bookie: write entry log %016x: %w", w.id, err)
	}
	if whole > 0 {
		w.fileAt += int64(whole)
		w.buf = w.buf[:copy(w.buf, w.buf[whole:n])]
		if cap(w.buf) > logWriteBuffer {
			// Drop a buffer grown for a large record.
			w.buf = append(vfs.AlignedBuffer(logWriteBuffer)[:0], w.buf...)
		}
	}
	return nil
}

// leaveDirect switches the writer to a buffered handle on the same file;
// the buffer (from fileAt on) is then written as it is.
func (w *logWriter) leaveDirect() error {
	f, err := w.fs.OpenReadWrite(filepath.Join(w.dir, idFileName(w.id, entryLogExt)))
	if err != nil {
		return err
	}
	w.f.Close()
	w.f, w.direct = f, false
	return nil
}

// sync writes what is buffered and makes the log (and, the first time,
// its directory entry) durable.
func (w *logWriter) sync() error {
	if err := w.flushBuf(true); err != nil {
		return err
	}
	if w.noSync {
		return nil
	}
	if err := vfs.SyncData(w.f); err != nil {
		return fmt.Errorf("bookie: sync entry log %016x: %w", w.id, err)
	}
	if w.fresh {
		if err := w.fs.SyncDir(w.dir); err != nil {
			return fmt.Errorf("bookie: sync entry log directory: %w", err)
		}
		w.fresh = false
	}
	return nil
}

func (w *logWriter) close() error { return w.f.Close() }
