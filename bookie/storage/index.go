package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"

	"github.com/stratamesh/strata/internal/vfs"
	"github.com/stratamesh/strata/internal/vfs/pebblevfs"
)

// The location index is a pebble database under Dir/index. Keys (ids as
// big-endian u64, so keys sort by id; ids are never negative):
//
//	'v'                        u32 format version
//	'c'                        checkpoint: u64 journal file, i64 offset
//	'e' ledger(8) entry(8)     location: u64 log id, i64 offset, u32 size
//	'l' ledger(8)              ledger record (see encodeLedgerRecord)
//	'g' log(8)                 entry-log record (see encodeLogRecord)
//
// Everything a flush, delete or compaction changes goes in one batch, so
// the index moves from one consistent state to the next.
//
// Version 2 has the same keys as version 1; it marks a data directory
// whose journal may hold version 2 files (file ids in batch headers,
// recycled files). A build that reads only version 1 journals would take
// their batches for a torn tail when it replays from a checkpoint inside
// such a file, and truncate acknowledged entries away; it refuses an
// index of version 2 instead. This build opens version 1 indexes and
// marks them version 2 before it writes any journal.
const indexVersion = 2

var (
	versionKey    = []byte("v")
	checkpointKey = []byte("c")
)

const (
	prefixEntry  = 'e'
	prefixLedger = 'l'
	prefixLog    = 'g'
)

func entryKey(ledger, entry int64) []byte {
	k := make([]byte, 17)
	k[0] = prefixEntry
	binary.BigEndian.PutUint64(k[1:], uint64(ledger))
	binary.BigEndian.PutUint64(k[9:], uint64(entry))
	return k
}

func ledgerKey(ledger int64) []byte {
	k := make([]byte, 9)
	k[0] = prefixLedger
	binary.BigEndian.PutUint64(k[1:], uint64(ledger))
	return k
}

func logKey(id uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixLog
	binary.BigEndian.PutUint64(k[1:], id)
	return k
}

// location is where a stored entry lives.
type location struct {
	log  uint64
	off  int64
	size int32 // stored-entry bytes
}

func encodeLocation(l location) []byte {
	b := make([]byte, 20)
	binary.BigEndian.PutUint64(b[0:], l.log)
	binary.BigEndian.PutUint64(b[8:], uint64(l.off))
	binary.BigEndian.PutUint32(b[16:], uint32(l.size))
	return b
}

func decodeLocation(b []byte) (location, error) {
	if len(b) != 20 {
		return location{}, fmt.Errorf("%w: location of %d bytes", ErrCorrupt, len(b))
	}
	return location{log: binary.BigEndian.Uint64(b), off: int64(binary.BigEndian.Uint64(b[8:])),
		size: int32(binary.BigEndian.Uint32(b[16:]))}, nil
}

// ledgerRecord is what the index keeps per ledger.
type ledgerRecord struct {
	key     []byte
	fenced  bool
	lac     int64
	flushed ledgerCounts
}

// encodeLedgerRecord: u8 version 1, u8 flags (bit 0 fenced), i64 lac,
// i64 entries, i64 payload bytes, i64 last entry, master key bytes.
func encodeLedgerRecord(r ledgerRecord) []byte {
	b := make([]byte, 34, 34+len(r.key))
	b[0] = 1
	if r.fenced {
		b[1] = 1
	}
	binary.BigEndian.PutUint64(b[2:], uint64(r.lac))
	binary.BigEndian.PutUint64(b[10:], uint64(r.flushed.entries))
	binary.BigEndian.PutUint64(b[18:], uint64(r.flushed.bytes))
	binary.BigEndian.PutUint64(b[26:], uint64(r.flushed.last))
	return append(b, r.key...)
}

func decodeLedgerRecord(b []byte) (ledgerRecord, error) {
	if len(b) < 34 || b[0] != 1 {
		return ledgerRecord{}, fmt.Errorf("%w: ledger record of %d bytes", ErrCorrupt, len(b))
	}
	return ledgerRecord{
		fenced: b[1]&1 != 0,
		lac:    int64(binary.BigEndian.Uint64(b[2:])),
		flushed: ledgerCounts{
			entries: int64(binary.BigEndian.Uint64(b[10:])),
			bytes:   int64(binary.BigEndian.Uint64(b[18:])),
			last:    int64(binary.BigEndian.Uint64(b[26:])),
		},
		key: append([]byte(nil), b[34:]...),
	}, nil
}

// encodeLogRecord: i64 file size, uvarint n, n × (i64 ledger, i64 bytes).
func encodeLogRecord(m *logMeta) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(m.size))
	b = binary.AppendUvarint(b, uint64(len(m.ledgers)))
	for l, n := range m.ledgers {
		b = binary.BigEndian.AppendUint64(b, uint64(l))
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return b
}

func decodeLogRecord(b []byte) (*logMeta, error) {
	bad := fmt.Errorf("%w: entry-log record of %d bytes", ErrCorrupt, len(b))
	if len(b) < 8 {
		return nil, bad
	}
	m := &logMeta{size: int64(binary.BigEndian.Uint64(b)), ledgers: map[int64]int64{}}
	n, k := binary.Uvarint(b[8:])
	if k <= 0 || uint64(len(b)-8-k) != n*16 {
		return nil, bad
	}
	p := b[8+k:]
	for i := uint64(0); i < n; i++ {
		m.ledgers[int64(binary.BigEndian.Uint64(p))] = int64(binary.BigEndian.Uint64(p[8:]))
		p = p[16:]
	}
	return m, nil
}

func encodePos(p Pos) []byte {
	b := binary.BigEndian.AppendUint64(nil, p.File)
	return binary.BigEndian.AppendUint64(b, uint64(p.Off))
}

// index wraps the pebble database.
type index struct {
	db    *pebble.DB
	write *pebble.WriteOptions
}

// openIndex opens the pebble database. Its tables are not compressed:
// locations are short, keys prefix-compress in pebble's columnar blocks,
// and compression costs CPU on every flush and compaction of a write-heavy
// index.
func openIndex(fsys vfs.FS, dir string, cacheBytes, memTableBytes int64, log *slog.Logger, noSync bool) (*index, error) {
	cache := pebble.NewCache(cacheBytes)
	defer cache.Unref()
	opts := &pebble.Options{
		FS:                 pebblevfs.New(fsys),
		Cache:              cache,
		Logger:             pebbleLogger{log},
		FormatMajorVersion: pebble.FormatNewest,
		MemTableSize:       uint64(memTableBytes),
	}
	for i := range opts.Levels {
		opts.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("bookie: open index: %w", err)
	}
	ix := &index{db: db, write: pebble.Sync}
	if noSync {
		ix.write = pebble.NoSync
	}
	v, ok, err := ix.get(versionKey)
	switch {
	case err != nil:
	case !ok, len(v) == 4 && binary.BigEndian.Uint32(v) == 1:
		err = db.Set(versionKey, binary.BigEndian.AppendUint32(nil, indexVersion), ix.write)
	case len(v) != 4 || binary.BigEndian.Uint32(v) != indexVersion:
		err = fmt.Errorf("bookie: index format %x, this build reads 1 and %d", v, indexVersion)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return ix, nil
}

func (ix *index) close() error { return ix.db.Close() }

// get returns a copy of key's value.
func (ix *index) get(key []byte) ([]byte, bool, error) {
	v, closer, err := ix.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte(nil), v...)
	return out, true, closer.Close()
}

func (ix *index) location(ledger, entry int64) (location, bool, error) {
	v, ok, err := ix.get(entryKey(ledger, entry))
	if err != nil || !ok {
		return location{}, false, err
	}
	loc, err := decodeLocation(v)
	return loc, err == nil, err
}

func (ix *index) checkpoint() (Pos, bool, error) {
	v, ok, err := ix.get(checkpointKey)
	if err != nil || !ok {
		return Pos{}, false, err
	}
	if len(v) != 16 {
		return Pos{}, false, fmt.Errorf("%w: checkpoint of %d bytes", ErrCorrupt, len(v))
	}
	return Pos{File: binary.BigEndian.Uint64(v), Off: int64(binary.BigEndian.Uint64(v[8:]))}, true, nil
}

// scan calls fn for each key with the one-byte prefix p, in key order.
func (ix *index) scan(p byte, fn func(key, value []byte) error) error {
	it, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: []byte{p}, UpperBound: []byte{p + 1}})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			it.Close()
			return err
		}
	}
	return errors.Join(it.Error(), it.Close())
}

func (ix *index) loadLedgers() (map[int64]*ledger, error) {
	out := map[int64]*ledger{}
	err := ix.scan(prefixLedger, func(k, v []byte) error {
		if len(k) != 9 {
			return fmt.Errorf("%w: ledger key %x", ErrCorrupt, k)
		}
		r, err := decodeLedgerRecord(v)
		if err != nil {
			return err
		}
		id := int64(binary.BigEndian.Uint64(k[1:]))
		st := durableLedger(id, r.key)
		st.fenced, st.lac, st.flushed, st.live, st.dirty = r.fenced, r.lac, r.flushed, r.flushed, false
		out[id] = st
		return nil
	})
	return out, err
}

func (ix *index) loadLogs() (map[uint64]*logMeta, error) {
	out := map[uint64]*logMeta{}
	err := ix.scan(prefixLog, func(k, v []byte) error {
		if len(k) != 9 {
			return fmt.Errorf("%w: log key %x", ErrCorrupt, k)
		}
		m, err := decodeLogRecord(v)
		if err != nil {
			return err
		}
		out[binary.BigEndian.Uint64(k[1:])] = m
		return nil
	})
	return out, err
}

// deleteLedger adds to b the deletion of a ledger's locations and record.
func deleteLedger(b *pebble.Batch, ledger int64) error {
	if err := b.DeleteRange(entryKey(ledger, 0), entryKey(ledger+1, 0), nil); err != nil {
		return err
	}
	return b.Delete(ledgerKey(ledger), nil)
}

// pebbleLogger sends pebble's logs to slog: its info lines at debug level.
type pebbleLogger struct{ log *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.log.Debug("index: " + fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.log.Error("index: " + fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.log.Error("index: fatal: " + msg)
	panic("bookie: index: " + msg)
}

// locations calls fn with the encoded location (decodeLocation) of each
// indexed entry of ledger from first to last, in entry order (gaps
// skipped), until fn returns false: one index scan instead of a lookup
// per entry. The value is valid only during the call.
func (ix *index) locations(ledger, first, last int64, fn func(entry int64, loc []byte) bool) error {
	upper := entryKey(ledger, last)
	upper = append(upper, 0) // just past entryKey(ledger, last)
	it, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: entryKey(ledger, first), UpperBound: upper})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 17 {
			it.Close()
			return fmt.Errorf("%w: index key of %d bytes among entry locations", ErrCorrupt, len(k))
		}
		if !fn(int64(binary.BigEndian.Uint64(k[9:])), it.Value()) {
			break
		}
	}
	return it.Close()
}
