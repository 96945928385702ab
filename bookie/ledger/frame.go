package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// DigestCRC32C is the DigestType this client records in the metadata of
// the ledgers it creates: entries are stored in the frame below.
const DigestCRC32C = "crc32c"

// FrameHeaderSize is the bytes the frame adds to each payload.
const FrameHeaderSize = 12

// The frame of an entry as stored on bookies (DigestCRC32C):
//
//	offset 0   8 bytes  ledger length through this entry: the payload
//	                    bytes of entries 0..this one (big-endian; the
//	                    core's Send.Length, which recovery reads back)
//	offset 8   4 bytes  CRC32C (Castagnoli), big-endian, over: ledger id
//	                    (8 bytes BE) ‖ entry id (8 bytes BE) ‖ the length
//	                    field ‖ payload
//	offset 12  payload
//
// The bookie checks its own CRC32C of what it stored; this one travels end
// to end and covers the ids too, so an entry returned for another ledger
// or position, or damaged outside the bookie's disk, is caught
// (BookKeeper's digest header plays the same part).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func frameCRC(ledgerID, entryID int64, frame []byte) uint32 {
	var ids [16]byte
	binary.BigEndian.PutUint64(ids[0:8], uint64(ledgerID))
	binary.BigEndian.PutUint64(ids[8:16], uint64(entryID))
	crc := crc32.Update(0, castagnoli, ids[:])
	crc = crc32.Update(crc, castagnoli, frame[0:8])
	return crc32.Update(crc, castagnoli, frame[FrameHeaderSize:])
}

// newFrame returns a frame holding a copy of payload, header unset.
func newFrame(payload []byte) []byte {
	f := make([]byte, FrameHeaderSize+len(payload))
	copy(f[FrameHeaderSize:], payload)
	return f
}

// sealFrame writes the header of frame (made by newFrame) for entry of
// ledger, with length the ledger length through the entry.
func sealFrame(frame []byte, ledgerID, entryID, length int64) {
	binary.BigEndian.PutUint64(frame[0:8], uint64(length))
	binary.BigEndian.PutUint32(frame[8:12], frameCRC(ledgerID, entryID, frame))
}

// openFrame checks a stored frame of entry of ledger and returns its
// payload (a slice of frame) and the ledger length through it. Errors
// wrap ErrCorruptEntry.
func openFrame(frame []byte, ledgerID, entryID int64) (payload []byte, length int64, err error) {
	if len(frame) < FrameHeaderSize {
		return nil, 0, fmt.Errorf("%w: ledger %d entry %d: %d bytes, shorter than the %d-byte frame header",
			ErrCorruptEntry, ledgerID, entryID, len(frame), FrameHeaderSize)
	}
	length = int64(binary.BigEndian.Uint64(frame[0:8]))
	if got, want := binary.BigEndian.Uint32(frame[8:12]), frameCRC(ledgerID, entryID, frame); got != want {
		return nil, 0, fmt.Errorf("%w: ledger %d entry %d: CRC32C %08x, computed %08x", ErrCorruptEntry, ledgerID, entryID, got, want)
	}
	payload = frame[FrameHeaderSize:]
	if length < int64(len(payload)) {
		return nil, 0, fmt.Errorf("%w: ledger %d entry %d: ledger length %d below the entry's own %d bytes",
			ErrCorruptEntry, ledgerID, entryID, length, len(payload))
	}
	return payload, length, nil
}

// masterKey derives the ledger's master key (what bookies check on adds
// and fences) from the password given to Create and OpenForTakeover:
// SHA-256 of a fixed label and the password, so that an empty password
// still gives the non-empty key the bookie protocol requires.
// BookKeeper likewise derives its master key from the password.
func masterKey(password []byte) []byte {
	h := sha256.New()
	h.Write([]byte("strata ledger master key\x00"))
	h.Write(password)
	return h.Sum(nil)
}
