package tiered

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/stratamesh/strata/bookie/ledger"
)

// The offload format. A closed ledger becomes two objects under a base
// name chosen by the caller (Pulsar's tiered storage likewise writes one
// data object and one index object per ledger):
//
// Data object, base + ".data": the entries 0..last in order, each framed
//
//	offset 0   8 bytes  entry id (big-endian)
//	offset 8   4 bytes  payload length in bytes (big-endian, ≤ MaxEntryBytes)
//	offset 12  4 bytes  CRC32C (Castagnoli, big-endian) over: ledger id
//	                    (8 bytes BE) ‖ the first 12 bytes of this header ‖
//	                    payload
//	offset 16  payload
//
// and nothing else, so the object is sum(16 + payload length) bytes. The
// CRC covers the ledger and entry ids and the length, so a frame read from
// the wrong object or the wrong place fails it like a flipped bit does.
//
// Index object, base + ".index": a 56-byte header then one point per
// IndexInterval entries
//
//	offset 0   4 bytes  magic "STIX"
//	offset 4   2 bytes  format version (IndexVersion)
//	offset 6   2 bytes  flags, 0
//	offset 8   4 bytes  CRC32C over bytes 12..end of the object
//	offset 12  4 bytes  index interval N (≥ 1)
//	offset 16  8 bytes  ledger id
//	offset 24  8 bytes  entry count (≥ 1)
//	offset 32  8 bytes  last entry id (entry count − 1)
//	offset 40  8 bytes  data object length in bytes
//	offset 48  8 bytes  number of points P = ceil(entry count / N)
//	offset 56  P × 16   points: entry id k·N (8 bytes), its frame's offset
//	                    in the data object (8 bytes), k = 0..P−1
//
// all integers big-endian. Point 0 is entry 0 at offset 0; offsets
// strictly increase, by at least 16 bytes per entry between points, and
// the entries after the last point fit in the data length. A reader finds
// entry e's frame by starting at point e/N and walking at most N−1 frames.
const (
	// FrameHeaderSize is the bytes a frame adds to each payload.
	FrameHeaderSize = 16
	// MaxEntryBytes is the largest payload the format carries: 16 MiB,
	// twice the bookie protocol's largest message, so every ledger entry
	// fits. Decoders refuse larger lengths before allocating anything.
	MaxEntryBytes = 16 << 20
	// IndexHeaderSize is the fixed part of the index object.
	IndexHeaderSize = 56
	// IndexPointSize is the bytes of one index point.
	IndexPointSize = 16
	// IndexVersion is the index format version this package writes and
	// the only one it reads.
	IndexVersion = 1
	// MaxIndexPoints bounds P, so that an index object is at most
	// 56 + 16·2²⁴ bytes (256 MiB) whatever a header claims.
	MaxIndexPoints = 1 << 24
	// MaxIndexInterval is the largest index interval N.
	MaxIndexInterval = 1 << 30
	// MaxDataBytes bounds the data length an index may claim (1 PiB), so
	// that no offset arithmetic can overflow.
	MaxDataBytes = 1 << 50
)

// indexMagic opens every index object.
var indexMagic = [4]byte{'S', 'T', 'I', 'X'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// DataObjectName is the name of base's data object.
func DataObjectName(base string) string { return base + ".data" }

// IndexObjectName is the name of base's index object.
func IndexObjectName(base string) string { return base + ".index" }

// frameCRC is the CRC32C of a frame of ledgerID with header hdr (its first
// 12 bytes are used) and payload.
func frameCRC(ledgerID int64, hdr, payload []byte) uint32 {
	var l [8]byte
	binary.BigEndian.PutUint64(l[:], uint64(ledgerID))
	crc := crc32.Update(0, castagnoli, l[:])
	crc = crc32.Update(crc, castagnoli, hdr[:12])
	return crc32.Update(crc, castagnoli, payload)
}

// putFrameHeader writes the header of entryID's frame of ledgerID into
// hdr (FrameHeaderSize bytes) and returns the frame's CRC.
func putFrameHeader(hdr []byte, ledgerID, entryID int64, payload []byte) uint32 {
	binary.BigEndian.PutUint64(hdr[0:8], uint64(entryID))
	binary.BigEndian.PutUint32(hdr[8:12], uint32(len(payload)))
	crc := frameCRC(ledgerID, hdr, payload)
	binary.BigEndian.PutUint32(hdr[12:16], crc)
	return crc
}

// AppendFrame appends the frame of entry entryID of ledger ledgerID to dst
// and returns the extended slice. It does not check the payload's size
// (Offload does, against MaxEntryBytes).
func AppendFrame(dst []byte, ledgerID, entryID int64, payload []byte) []byte {
	var hdr [FrameHeaderSize]byte
	putFrameHeader(hdr[:], ledgerID, entryID, payload)
	dst = append(dst, hdr[:]...)
	return append(dst, payload...)
}

// frameHeader is a parsed frame header; nothing in it is checked yet.
type frameHeader struct {
	entryID int64
	length  int64
	crc     uint32
}

func parseFrameHeader(b []byte) frameHeader {
	return frameHeader{
		entryID: int64(binary.BigEndian.Uint64(b[0:8])),
		length:  int64(binary.BigEndian.Uint32(b[8:12])),
		crc:     binary.BigEndian.Uint32(b[12:16]),
	}
}

// check verifies h, read at offset off of ledgerID's data object, against
// the entry expected there and the offset its frame must end by (end
// inclusive bound, in bytes).
func (h frameHeader) check(ledgerID, want, off, end int64) error {
	switch {
	case h.entryID != want:
		return fmt.Errorf("%w: ledger %d: frame at offset %d holds entry %d, want %d", ErrCorrupt, ledgerID, off, h.entryID, want)
	case h.length > MaxEntryBytes:
		return fmt.Errorf("%w: ledger %d entry %d: length %d exceeds %d", ErrCorrupt, ledgerID, want, h.length, MaxEntryBytes)
	case off+FrameHeaderSize+h.length > end:
		return fmt.Errorf("%w: ledger %d entry %d: frame at offset %d of %d bytes runs past %d", ErrCorrupt, ledgerID, want, off, FrameHeaderSize+h.length, end)
	}
	return nil
}

// checkPayload verifies the CRC32C of a frame with header hdr and payload.
func checkPayload(ledgerID int64, hdr []byte, h frameHeader, payload []byte) error {
	if got := frameCRC(ledgerID, hdr, payload); got != h.crc {
		return fmt.Errorf("%w: ledger %d entry %d: CRC32C %08x, computed %08x", ErrCorrupt, ledgerID, h.entryID, h.crc, got)
	}
	return nil
}

// DecodeFrames decodes data, a run of whole frames of ledger ledgerID
// whose first entry is firstID, into entries (their payloads are slices of
// data). Errors wrap ErrCorrupt: a truncated frame, an unexpected entry id
// (ids must run firstID, firstID+1, …), a length over MaxEntryBytes, a
// CRC32C mismatch. It allocates at most one Entry per 16 bytes of data.
func DecodeFrames(data []byte, ledgerID, firstID int64) ([]ledger.Entry, error) {
	var out []ledger.Entry
	for off, id := int64(0), firstID; off < int64(len(data)); id++ {
		if int64(len(data))-off < FrameHeaderSize {
			return nil, fmt.Errorf("%w: ledger %d: %d bytes at offset %d, shorter than a frame header", ErrCorrupt, ledgerID, int64(len(data))-off, off)
		}
		hdr := data[off : off+FrameHeaderSize]
		h := parseFrameHeader(hdr)
		if err := h.check(ledgerID, id, off, int64(len(data))); err != nil {
			return nil, err
		}
		payload := data[off+FrameHeaderSize : off+FrameHeaderSize+h.length : off+FrameHeaderSize+h.length]
		if err := checkPayload(ledgerID, hdr, h, payload); err != nil {
			return nil, err
		}
		out = append(out, ledger.Entry{ID: id, Payload: payload})
		off += FrameHeaderSize + h.length
	}
	return out, nil
}

// Index is the decoded index object of an offloaded ledger.
type Index struct {
	// LedgerID is the offloaded ledger's id (≥ 0).
	LedgerID int64
	// Entries is the number of entries (≥ 1); their ids are 0..Entries−1.
	Entries int64
	// DataBytes is the data object's length in bytes.
	DataBytes int64
	// Interval is N: Offsets holds one offset every N entries.
	Interval int
	// Offsets[k] is the data-object offset of entry k·N's frame;
	// len(Offsets) = ceil(Entries/N), Offsets[0] = 0, strictly increasing.
	Offsets []int64
}

// LastEntryID is the id of the ledger's last entry.
func (ix *Index) LastEntryID() int64 { return ix.Entries - 1 }

// PayloadBytes is the sum of the entries' payload lengths (the ledger's
// Length in its metadata).
func (ix *Index) PayloadBytes() int64 { return ix.DataBytes - ix.Entries*FrameHeaderSize }

// frameBound is the offset by which the frame of entry id must end: the
// next index point's offset, or the data length after the last point.
func (ix *Index) frameBound(id int64) int64 {
	if k := id/int64(ix.Interval) + 1; k < int64(len(ix.Offsets)) {
		return ix.Offsets[k]
	}
	return ix.DataBytes
}

// validate checks ix's invariants (see Index); errors wrap ErrCorrupt.
func (ix *Index) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: index of ledger %d: "+format, append([]any{ErrCorrupt, ix.LedgerID}, args...)...)
	}
	switch {
	case ix.LedgerID < 0:
		return bad("negative ledger id")
	case ix.Entries < 1:
		return bad("entry count %d, want ≥ 1", ix.Entries)
	case ix.Interval < 1 || ix.Interval > MaxIndexInterval:
		return bad("index interval %d, want 1..%d", ix.Interval, MaxIndexInterval)
	case ix.DataBytes < 0 || ix.DataBytes > MaxDataBytes:
		return bad("data length %d, want 0..%d", ix.DataBytes, int64(MaxDataBytes))
	case ix.Entries > ix.DataBytes/FrameHeaderSize:
		return bad("data length %d cannot hold %d entries", ix.DataBytes, ix.Entries)
	case ix.Entries < ix.DataBytes/(FrameHeaderSize+MaxEntryBytes) ||
		ix.Entries == ix.DataBytes/(FrameHeaderSize+MaxEntryBytes) && ix.DataBytes%(FrameHeaderSize+MaxEntryBytes) != 0:
		return bad("data length %d is more than %d entries of at most %d bytes", ix.DataBytes, ix.Entries, MaxEntryBytes)
	}
	n := int64(ix.Interval)
	if want := (ix.Entries-1)/n + 1; int64(len(ix.Offsets)) != want {
		return bad("%d index points for %d entries every %d, want %d", len(ix.Offsets), ix.Entries, n, want)
	}
	if ix.Offsets[0] != 0 {
		return bad("entry 0 at offset %d, want 0", ix.Offsets[0])
	}
	// Between points k and k+1 lie N frames of at least 16 bytes each;
	// after the last point, the remaining entries. n ≤ Entries ≤ 2⁵⁹ here,
	// so n·16 does not overflow.
	for k, off := range ix.Offsets {
		entries := min(n, ix.Entries-int64(k)*n)
		end := ix.frameBound(int64(k) * n)
		if end-off < entries*FrameHeaderSize || end > ix.DataBytes {
			return bad("point %d (entry %d) at offset %d: %d entries cannot fit before offset %d (data length %d)",
				k, int64(k)*n, off, entries, end, ix.DataBytes)
		}
	}
	return nil
}

// EncodeIndex returns the index object for ix, or an error wrapping
// ErrInvalid if ix breaks an invariant of Index.
func EncodeIndex(ix Index) ([]byte, error) {
	if err := ix.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	b := make([]byte, IndexHeaderSize+IndexPointSize*len(ix.Offsets))
	copy(b[0:4], indexMagic[:])
	binary.BigEndian.PutUint16(b[4:6], IndexVersion)
	binary.BigEndian.PutUint32(b[12:16], uint32(ix.Interval))
	binary.BigEndian.PutUint64(b[16:24], uint64(ix.LedgerID))
	binary.BigEndian.PutUint64(b[24:32], uint64(ix.Entries))
	binary.BigEndian.PutUint64(b[32:40], uint64(ix.Entries-1))
	binary.BigEndian.PutUint64(b[40:48], uint64(ix.DataBytes))
	binary.BigEndian.PutUint64(b[48:56], uint64(len(ix.Offsets)))
	for k, off := range ix.Offsets {
		p := b[IndexHeaderSize+IndexPointSize*k:]
		binary.BigEndian.PutUint64(p[0:8], uint64(int64(k)*int64(ix.Interval)))
		binary.BigEndian.PutUint64(p[8:16], uint64(off))
	}
	binary.BigEndian.PutUint32(b[8:12], crc32.Checksum(b[12:], castagnoli))
	return b, nil
}

// IndexCRC is the CRC32C an index object carries (bytes 8..12), the value
// Offloaded.IndexCRC records. b must be at least IndexHeaderSize bytes.
func IndexCRC(b []byte) uint32 { return binary.BigEndian.Uint32(b[8:12]) }

// DecodeIndex parses and validates an index object. Errors wrap
// ErrCorrupt and say what is wrong: truncated or trailing bytes, bad magic,
// an unknown version or flags, a CRC32C mismatch, counts that disagree,
// more than MaxIndexPoints points, points with the wrong entry id, offsets
// out of order or past the data length. It allocates only after the
// object's length matches its header, so at most len(b) bytes.
func DecodeIndex(b []byte) (Index, error) {
	bad := func(format string, args ...any) (Index, error) {
		return Index{}, fmt.Errorf("%w: index object: "+format, append([]any{ErrCorrupt}, args...)...)
	}
	if len(b) < IndexHeaderSize {
		return bad("%d bytes, shorter than the %d-byte header", len(b), IndexHeaderSize)
	}
	if [4]byte(b[0:4]) != indexMagic {
		return bad("bad magic %q", b[0:4])
	}
	if v := binary.BigEndian.Uint16(b[4:6]); v != IndexVersion {
		return bad("format version %d, this reader knows %d", v, IndexVersion)
	}
	if f := binary.BigEndian.Uint16(b[6:8]); f != 0 {
		return bad("unknown flags %#x", f)
	}
	if got, want := IndexCRC(b), crc32.Checksum(b[12:], castagnoli); got != want {
		return bad("CRC32C %08x, computed %08x", got, want)
	}
	interval := binary.BigEndian.Uint32(b[12:16])
	ledgerID := int64(binary.BigEndian.Uint64(b[16:24]))
	entries := int64(binary.BigEndian.Uint64(b[24:32]))
	lastID := int64(binary.BigEndian.Uint64(b[32:40]))
	dataBytes := int64(binary.BigEndian.Uint64(b[40:48]))
	points := binary.BigEndian.Uint64(b[48:56])
	switch {
	case interval < 1 || interval > MaxIndexInterval:
		return bad("index interval %d, want 1..%d", interval, MaxIndexInterval)
	case entries < 1:
		return bad("entry count %d", entries)
	case lastID != entries-1:
		return bad("last entry id %d for %d entries", lastID, entries)
	case points > MaxIndexPoints:
		return bad("%d index points, more than %d", points, MaxIndexPoints)
	case uint64(len(b)-IndexHeaderSize) != points*IndexPointSize:
		return bad("%d bytes of points for %d points of %d bytes", len(b)-IndexHeaderSize, points, IndexPointSize)
	}
	ix := Index{LedgerID: ledgerID, Entries: entries, DataBytes: dataBytes, Interval: int(interval), Offsets: make([]int64, points)}
	for k := range ix.Offsets {
		p := b[IndexHeaderSize+IndexPointSize*k:]
		id, off := int64(binary.BigEndian.Uint64(p[0:8])), int64(binary.BigEndian.Uint64(p[8:16]))
		if want := int64(k) * int64(interval); id != want {
			return bad("point %d names entry %d, want %d", k, id, want)
		}
		if k > 0 && off <= ix.Offsets[k-1] {
			return bad("point %d offset %d not after point %d offset %d", k, off, k-1, ix.Offsets[k-1])
		}
		ix.Offsets[k] = off
	}
	if err := ix.validate(); err != nil {
		return Index{}, err
	}
	return ix, nil
}
