package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// scanResult describes a journal file after scanJournal.
type scanResult struct {
	// end is the offset just past the last valid batch (or the file
	// header, or start): the file's good prefix.
	end int64
	// torn reports that bytes from end on were discarded as a torn tail
	// (only in the newest file). The caller truncates the file to end, or
	// removes it when end is 0 (even its header was torn).
	torn bool
	// zeroTail reports that bytes from end on are all zero: the
	// zero-filled reserve (see reserve), never data, in any file. The
	// caller truncates it away.
	zeroTail bool
	batches  int
	records  int
}

// scanJournal reads one journal file from start (0: from its file header)
// and calls apply for each batch, in order, with the batch's records and
// the offset just past it. A batch is applied only once all of it has been
// read and checked.
//
// A file may end in zeros (the reserve, see reserve): from the first
// batch position holding only zeros to the end of the file, that is the
// end of its data in any file (res.zeroTail). Other damage (a short or
// failing record) is classified so that nothing
// acknowledged is lost and nothing unacknowledged is made up:
//   - in any file but the newest (isLast false) it is corruption: those
//     files were complete and synced before the journal moved on;
//   - in the newest file it is a torn tail, the one batch that was being
//     written when the process stopped, unless a valid batch header
//     follows it somewhere later in the file: then synced data lies past
//     the damage and it is corruption.
//
// Corruption is returned wrapping ErrCorrupt; so is a file header naming
// another file id. A version this code does not know is an error too.
func scanJournal(r io.ReaderAt, size int64, fileID uint64, start int64, isLast bool,
	apply func(recs []record, end int64) error) (scanResult, error) {
	res := scanResult{end: start}
	off := start
	damaged := func(at int64, why error) (scanResult, error) {
		if zero, err := allZero(r, at, size); err != nil {
			return res, err
		} else if zero {
			res.end, res.zeroTail = at, true
			return res, nil
		}
		if !isLast {
			return res, fmt.Errorf("%w: journal file %016x offset %d: %v", ErrCorrupt, fileID, at, why)
		}
		if p, ok, err := findBatchHeader(r, at+1, size); err != nil {
			return res, err
		} else if ok {
			return res, fmt.Errorf("%w: journal file %016x offset %d: %v, but a valid batch follows at offset %d",
				ErrCorrupt, fileID, at, why, p)
		}
		res.end, res.torn = at, true
		return res, nil
	}
	if off == 0 {
		hdr := make([]byte, min(int64(fileHeaderSize), size))
		if _, err := readFull(r, hdr, 0); err != nil {
			return res, err
		}
		fh, err := parseFileHeader(hdr)
		if err != nil {
			return damaged(0, err)
		}
		if fh.version != journalVersion {
			return res, fmt.Errorf("storage: journal file %016x has version %d, this build reads %d", fileID, fh.version, journalVersion)
		}
		if fh.fileID != fileID {
			return res, fmt.Errorf("%w: journal file %016x says it is file %016x", ErrCorrupt, fileID, fh.fileID)
		}
		off = fileHeaderSize
		res.end = off
	}
	var hdr [batchHeaderSize]byte
	var buf []byte
	var recs []record
	for off < size {
		n := min(int64(batchHeaderSize), size-off)
		if _, err := readFull(r, hdr[:n], off); err != nil {
			return res, err
		}
		bh, err := parseBatchHeader(hdr[:n])
		if err != nil {
			return damaged(off, err)
		}
		body := off + batchHeaderSize
		if int64(bh.length) > size-body {
			return damaged(off, fmt.Errorf("batch of %d bytes runs past the end of the file (%d)", bh.length, size))
		}
		if cap(buf) < bh.length {
			buf = make([]byte, bh.length)
		}
		buf = buf[:bh.length]
		if _, err := readFull(r, buf, body); err != nil {
			return res, err
		}
		recs, err = parseBatchRecords(buf, bh.count, recs[:0])
		if err != nil {
			return damaged(off, err)
		}
		end := body + int64(bh.length)
		if err := apply(recs, end); err != nil {
			return res, err
		}
		off = end
		res.end = end
		res.batches++
		res.records += len(recs)
	}
	return res, nil
}

// allZero reports whether [from, size) of r holds only zero bytes.
func allZero(r io.ReaderAt, from, size int64) (bool, error) {
	buf := make([]byte, min(size-from, 1<<20))
	for off := from; off < size; {
		b := buf[:min(int64(len(buf)), size-off)]
		if _, err := readFull(r, b, off); err != nil {
			return false, err
		}
		for _, c := range b {
			if c != 0 {
				return false, nil
			}
		}
		off += int64(len(b))
	}
	return true, nil
}

// readFull reads len(b) bytes at off; EOF before that is an error.
func readFull(r io.ReaderAt, b []byte, off int64) (int, error) {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return n, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// findBatchHeader looks for a valid batch-header record starting anywhere
// in [from, size). It finds the magic in a header's body and checks the
// record around it (length, type, CRC). Windows of chunk bytes overlap by
// a header, so every start position is checked in exactly one window.
func findBatchHeader(r io.ReaderAt, from, size int64) (int64, bool, error) {
	const chunk = 1 << 20
	var magic [4]byte
	binary.BigEndian.PutUint32(magic[:], batchMagic)
	buf := make([]byte, chunk+batchHeaderSize)
	for base := from; base < size; base += chunk {
		b := buf[:min(int64(len(buf)), size-base)]
		if _, err := readFull(r, b, base); err != nil {
			return 0, false, err
		}
		for i := 0; ; i++ {
			j := bytes.Index(b[i:], magic[:])
			if j < 0 {
				break
			}
			i += j
			s := i - recHeaderSize // the record starts 9 bytes before its body
			if s >= 0 && s < chunk && s+batchHeaderSize <= len(b) {
				if _, err := parseBatchHeader(b[s : s+batchHeaderSize]); err == nil {
					return base + int64(s), true, nil
				}
			}
		}
	}
	return 0, false, nil
}
