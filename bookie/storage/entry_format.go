package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The stored form of an entry, used verbatim as the body of a journal add
// record, in the write cache and in entry logs:
//
//	off  size
//	0    4    u32 BE  length of what follows (24 + payload length)
//	4    4    u32 BE  CRC32C over bytes 8.. (ledger, entry, lac, payload)
//	8    8    i64 BE  ledger id
//	16   8    i64 BE  entry id
//	24   8    i64 BE  LAC the writer piggybacked
//	32   n    payload
//
// Every read verifies the CRC and that the ids are the ones asked for.
const entryHeaderSize = 32

// maxEntryBytesLimit bounds Config.MaxEntryBytes so every length fits the
// formats with room to spare.
const maxEntryBytesLimit = 256 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeEntry returns the stored form of an entry.
func encodeEntry(ledger, entry, lac int64, payload []byte) []byte {
	b := make([]byte, entryHeaderSize+len(payload))
	copy(b[entryHeaderSize:], payload)
	putEntryHeader(b, ledger, entry, lac)
	return b
}

// putEntryHeader fills the header of b, a stored entry whose payload is
// already in b[entryHeaderSize:].
func putEntryHeader(b []byte, ledger, entry, lac int64) {
	binary.BigEndian.PutUint32(b[0:], uint32(len(b)-8))
	binary.BigEndian.PutUint64(b[8:], uint64(ledger))
	binary.BigEndian.PutUint64(b[16:], uint64(entry))
	binary.BigEndian.PutUint64(b[24:], uint64(lac))
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(b[8:], castagnoli))
}

// recordOf returns the stored form of req: req.Record with its header
// filled when it holds req.Payload in place, else a new encoding.
func recordOf(req *AddRequest) []byte {
	r, p := req.Record, req.Payload
	if len(r) == entryHeaderSize+len(p) && (len(p) == 0 || &r[entryHeaderSize] == &p[0]) {
		putEntryHeader(r, req.LedgerID, req.EntryID, req.LAC)
		return r
	}
	return encodeEntry(req.LedgerID, req.EntryID, req.LAC, req.Payload)
}

// entryIDs returns the ledger, entry and LAC in a stored entry's header,
// which the caller has checked is at least entryHeaderSize long. They are
// not verified.
func entryIDs(rec []byte) (ledger, entry, lac int64) {
	return int64(binary.BigEndian.Uint64(rec[8:])), int64(binary.BigEndian.Uint64(rec[16:])),
		int64(binary.BigEndian.Uint64(rec[24:]))
}

// decodeEntry checks a stored entry (length, CRC and, when want is true,
// that it is ledger/entry) and returns it with Payload copied out of rec.
// Any mismatch is ErrCorrupt.
func decodeEntry(rec []byte, ledger, entry int64) (Entry, error) {
	if err := verifyEntry(rec); err != nil {
		return Entry{}, err
	}
	l, e, lac := entryIDs(rec)
	if l != ledger || e != entry {
		return Entry{}, fmt.Errorf("%w: record holds ledger %d entry %d, wanted %d/%d", ErrCorrupt, l, e, ledger, entry)
	}
	return Entry{LedgerID: l, EntryID: e, LAC: lac, Payload: append([]byte(nil), rec[entryHeaderSize:]...)}, nil
}

// verifyEntry checks a stored entry's length field and CRC.
func verifyEntry(rec []byte) error {
	if len(rec) < entryHeaderSize {
		return fmt.Errorf("%w: record of %d bytes is shorter than its header", ErrCorrupt, len(rec))
	}
	if n := binary.BigEndian.Uint32(rec[0:]); int(n) != len(rec)-8 {
		return fmt.Errorf("%w: length field %d, record of %d bytes", ErrCorrupt, n, len(rec))
	}
	if want, got := binary.BigEndian.Uint32(rec[4:]), crc32.Checksum(rec[8:], castagnoli); want != got {
		return fmt.Errorf("%w: CRC32C %08x, stored %08x", ErrCorrupt, got, want)
	}
	return nil
}

// entryPayloadLen is the payload size of a stored entry of recLen bytes.
func entryPayloadLen(recLen int) int64 { return int64(recLen - entryHeaderSize) }
