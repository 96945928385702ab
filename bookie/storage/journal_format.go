package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Journal files are named %016x.jnl (the file id, in hex) and hold
// records:
//
//	off  size
//	0    4    u32 BE  body length n
//	4    4    u32 BE  CRC32C over the type byte and the body
//	8    1    type
//	9    n    body
//
// A file starts with a file-header record; then come batches, one per
// group commit (one write, one fsync): a batch-header record followed by
// the batch's records. Bodies by type:
//
//	file header  u32 magic "SJNL", u32 version, u64 file id
//	batch header u32 magic "SBAT", u64 sequence, u32 record count,
//	             u32 bytes of records after this header, u64 file id
//	             (the file id is new in version 2; version 1 files,
//	             still read, have 20-byte batch-header bodies). From
//	             version 3 its CRC starts from the journal's salt (see
//	             journalSalt) instead of 0.
//	add          the stored entry (see entry_format.go)
//	master key   i64 ledger, key bytes
//	fence        i64 ledger, key bytes
//	delete       i64 ledger
//
// Replay applies a batch only once all of it has been read and checked,
// so a torn batch is never half-applied. The file id in each batch header
// tells this file's batches from those a recycled file still holds from
// its previous life (see journal.recycle): those are never data. The salt
// tells batch headers the journal wrote from bytes that only look like
// one: an entry's payload is a client's bytes, and one carrying a
// well-formed batch header of a future file id could otherwise be taken,
// once its file is recycled, for a batch of that file (replaying whatever
// records follow it, or refusing to open as "valid batch after damage").
const (
	recHeaderSize     = 9
	fileHeaderBody    = 16
	batchHeaderBody   = 28
	batchHeaderBodyV1 = 20
	fileHeaderSize    = recHeaderSize + fileHeaderBody
	batchHeaderSize   = recHeaderSize + batchHeaderBody

	journalMagic   = 0x534a4e4c // "SJNL"
	batchMagic     = 0x53424154 // "SBAT"
	journalVersion = 3

	// maxBatchBytes bounds a batch's declared length when scanning; a
	// larger one is damage, not data.
	maxBatchBytes = 1 << 30
)

type recType uint8

const (
	recFileHeader recType = iota + 1
	recBatch
	recAdd
	recMasterKey
	recFence
	recDelete
)

// recordCRC is the CRC32C a record of type t and body carries.
func recordCRC(t recType, body []byte) uint32 {
	c := crc32.Update(0, castagnoli, []byte{byte(t)})
	return crc32.Update(c, castagnoli, body)
}

// appendRecord appends a record whose CRC the caller computed with
// recordCRC.
func appendRecord(dst []byte, t recType, crc uint32, body []byte) []byte {
	var h [recHeaderSize]byte
	binary.BigEndian.PutUint32(h[0:], uint32(len(body)))
	binary.BigEndian.PutUint32(h[4:], crc)
	h[8] = byte(t)
	dst = append(dst, h[:]...)
	return append(dst, body...)
}

// ledgerKeyBody is the body of master-key and fence records.
func ledgerKeyBody(ledger int64, key []byte) []byte {
	b := make([]byte, 8+len(key))
	binary.BigEndian.PutUint64(b, uint64(ledger))
	copy(b[8:], key)
	return b
}

func ledgerBody(ledger int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(ledger))
}

func encodeFileHeader(fileID uint64) []byte {
	body := make([]byte, fileHeaderBody)
	binary.BigEndian.PutUint32(body[0:], journalMagic)
	binary.BigEndian.PutUint32(body[4:], journalVersion)
	binary.BigEndian.PutUint64(body[8:], fileID)
	return appendRecord(nil, recFileHeader, recordCRC(recFileHeader, body), body)
}

// journalSalt is the initial value of batch-header CRCs in version 3
// journal files: derived from the data directory's random owner id
// (journal_owner.go), which never leaves the bookie, so bytes a client
// wrote cannot carry a batch header that checks.
type journalSalt uint32

// saltOf derives the salt from an owner id.
func saltOf(owner []byte) journalSalt { return journalSalt(crc32.Checksum(owner, castagnoli)) }

// batchHeaderCRC is the CRC of a batch-header record with body in a
// journal file of the given version.
func batchHeaderCRC(body []byte, version uint32, salt journalSalt) uint32 {
	if version < 3 {
		return recordCRC(recBatch, body)
	}
	c := crc32.Update(uint32(salt), castagnoli, []byte{byte(recBatch)})
	return crc32.Update(c, castagnoli, body)
}

// putBatchHeader fills dst[:batchHeaderSize] with a batch header of
// journal file fileID (current version, salted).
func putBatchHeader(dst []byte, seq uint64, count, length int, fileID uint64, salt journalSalt) {
	body := dst[recHeaderSize:batchHeaderSize]
	binary.BigEndian.PutUint32(body[0:], batchMagic)
	binary.BigEndian.PutUint64(body[4:], seq)
	binary.BigEndian.PutUint32(body[12:], uint32(count))
	binary.BigEndian.PutUint32(body[16:], uint32(length))
	binary.BigEndian.PutUint64(body[20:], fileID)
	binary.BigEndian.PutUint32(dst[0:], batchHeaderBody)
	binary.BigEndian.PutUint32(dst[4:], batchHeaderCRC(body, journalVersion, salt))
	dst[8] = byte(recBatch)
}

// record is a decoded journal record; body aliases the buffer read.
type record struct {
	typ  recType
	body []byte
}

var (
	errShort  = errors.New("short record")
	errBadCRC = errors.New("record CRC mismatch")
	errBadRec = errors.New("malformed record")
)

// parseRecord decodes the record at the start of b and returns it with
// its total size. errShort: b ends before the record does.
func parseRecord(b []byte) (record, int, error) {
	if len(b) < recHeaderSize {
		return record{}, 0, errShort
	}
	n := int(binary.BigEndian.Uint32(b[0:]))
	if n > len(b)-recHeaderSize {
		return record{}, 0, errShort
	}
	r := record{typ: recType(b[8]), body: b[recHeaderSize : recHeaderSize+n]}
	if recordCRC(r.typ, r.body) != binary.BigEndian.Uint32(b[4:]) {
		return record{}, 0, errBadCRC
	}
	if r.typ < recFileHeader || r.typ > recDelete {
		return record{}, 0, fmt.Errorf("%w: type %d", errBadRec, r.typ)
	}
	return r, recHeaderSize + n, nil
}

type fileHeader struct {
	version uint32
	fileID  uint64
}

func parseFileHeader(b []byte) (fileHeader, error) {
	r, _, err := parseRecord(b)
	if err != nil {
		return fileHeader{}, err
	}
	if r.typ != recFileHeader || len(r.body) != fileHeaderBody || binary.BigEndian.Uint32(r.body) != journalMagic {
		return fileHeader{}, fmt.Errorf("%w: not a journal file header", errBadRec)
	}
	return fileHeader{version: binary.BigEndian.Uint32(r.body[4:]), fileID: binary.BigEndian.Uint64(r.body[8:])}, nil
}

type batchHeader struct {
	seq    uint64
	count  int
	length int
	fileID uint64 // 0 in version 1
}

// batchHeaderLen is the size of a batch-header record in a journal file of
// the given version.
func batchHeaderLen(version uint32) int {
	if version == 1 {
		return recHeaderSize + batchHeaderBodyV1
	}
	return batchHeaderSize
}

// parseBatchHeader decodes a batch header record, in the format of the
// given journal version (salted from version 3), at the start of b.
func parseBatchHeader(b []byte, version uint32, salt journalSalt) (batchHeader, error) {
	n := batchHeaderLen(version)
	if len(b) < n {
		return batchHeader{}, errShort
	}
	if binary.BigEndian.Uint32(b[0:]) != uint32(n-recHeaderSize) || recType(b[8]) != recBatch {
		return batchHeader{}, fmt.Errorf("%w: not a batch header", errBadRec)
	}
	r := record{typ: recBatch, body: b[recHeaderSize:n]}
	if batchHeaderCRC(r.body, version, salt) != binary.BigEndian.Uint32(b[4:]) {
		return batchHeader{}, errBadCRC
	}
	if binary.BigEndian.Uint32(r.body) != batchMagic {
		return batchHeader{}, fmt.Errorf("%w: not a batch header", errBadRec)
	}
	h := batchHeader{
		seq:    binary.BigEndian.Uint64(r.body[4:]),
		count:  int(binary.BigEndian.Uint32(r.body[12:])),
		length: int(binary.BigEndian.Uint32(r.body[16:])),
	}
	if version > 1 {
		h.fileID = binary.BigEndian.Uint64(r.body[20:])
	}
	if h.length > maxBatchBytes || h.count > h.length/recHeaderSize {
		return batchHeader{}, fmt.Errorf("%w: batch of %d records in %d bytes", errBadRec, h.count, h.length)
	}
	return h, nil
}

// parseBatchRecords decodes exactly count records filling b.
func parseBatchRecords(b []byte, count int, out []record) ([]record, error) {
	for i := 0; i < count; i++ {
		r, n, err := parseRecord(b)
		if err != nil {
			return out, err
		}
		if r.typ == recFileHeader || r.typ == recBatch {
			return out, fmt.Errorf("%w: header record inside a batch", errBadRec)
		}
		out = append(out, r)
		b = b[n:]
	}
	if len(b) != 0 {
		return out, fmt.Errorf("%w: %d bytes after the batch's records", errBadRec, len(b))
	}
	return out, nil
}

// ledgerOf returns the ledger a master-key, fence or delete body names,
// and the key bytes after it.
func ledgerOf(body []byte) (int64, []byte, error) {
	if len(body) < 8 {
		return 0, nil, fmt.Errorf("%w: body of %d bytes", errBadRec, len(body))
	}
	return int64(binary.BigEndian.Uint64(body)), body[8:], nil
}
