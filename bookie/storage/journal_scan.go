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
	// stale reports, with torn, that a batch of another file was found
	// from end on: the discarded bytes are (at least mostly) a recycled
	// file's old data, not only a torn write.
	stale   bool
	batches int
	records int
}

// scanJournal reads one journal file from start (0: just after its file
// header) and calls apply for each batch, in order, with the batch's
// records and the offset just past it. A batch is applied only once all of
// it has been read and checked.
//
// Whatever follows the last batch of a file is classified so that nothing
// acknowledged is lost and nothing unacknowledged is made up:
//   - in any file but the newest (isLast false) it is corruption: those
//     files were complete, synced and cut to their last batch before the
//     journal moved on;
//   - in the newest file it is the end of the data: the zero-filled
//     reserve (res.zeroTail: only zeros follow), or a torn tail (res.torn:
//     the batch being written when the process stopped, or a recycled
//     file's bytes from its previous life, including whole batches that
//     name another file id) — unless a valid batch header of this file
//     follows somewhere later: then synced data lies past the damage and
//     it is corruption.
//
// Corruption is returned wrapping ErrCorrupt; so is a file header naming
// another file id, or a start past a damaged file header. A version this
// code does not know is an error too.
func scanJournal(r io.ReaderAt, size int64, fileID uint64, start int64, isLast bool, salt journalSalt,
	apply func(recs []record, end int64) error) (scanResult, error) {
	res := scanResult{end: start}
	version := uint32(journalVersion)
	damaged := func(at int64, why error) (scanResult, error) {
		if !isLast {
			return res, fmt.Errorf("%w: journal file %016x offset %d: %v", ErrCorrupt, fileID, at, why)
		}
		if zero, err := allZero(r, at, size); err != nil {
			return res, err
		} else if zero {
			res.end, res.zeroTail = at, true
			return res, nil
		}
		p, ok, other, err := findBatchHeader(r, at, size, version, fileID, salt)
		if err != nil {
			return res, err
		} else if ok {
			return res, fmt.Errorf("%w: journal file %016x offset %d: %v, but a valid batch follows at offset %d",
				ErrCorrupt, fileID, at, why, p)
		}
		res.end, res.torn, res.stale = at, true, other
		return res, nil
	}
	fh := make([]byte, min(int64(fileHeaderSize), size))
	if _, err := readFull(r, fh, 0); err != nil {
		return res, err
	}
	h, err := parseFileHeader(fh)
	switch {
	case err != nil && start > 0:
		return res, fmt.Errorf("%w: journal file %016x: header: %v", ErrCorrupt, fileID, err)
	case err != nil:
		res.end = 0
		return damaged(0, err)
	case h.version < 1 || h.version > journalVersion:
		return res, fmt.Errorf("storage: journal file %016x has version %d, this build reads 1 to %d", fileID, h.version, journalVersion)
	case h.fileID != fileID:
		return res, fmt.Errorf("%w: journal file %016x says it is file %016x", ErrCorrupt, fileID, h.fileID)
	}
	version = h.version
	hdrLen := int64(batchHeaderLen(version))
	off := max(start, fileHeaderSize)
	res.end = off
	hdr := make([]byte, hdrLen)
	var buf []byte
	var recs []record
	for off < size {
		n := min(hdrLen, size-off)
		if _, err := readFull(r, hdr[:n], off); err != nil {
			return res, err
		}
		bh, err := parseBatchHeader(hdr[:n], version, salt)
		if err != nil {
			return damaged(off, err)
		}
		if version > 1 && bh.fileID != fileID {
			return damaged(off, fmt.Errorf("a batch of journal file %016x (a recycled file's old data)", bh.fileID))
		}
		body := off + hdrLen
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

// findBatchHeader looks for a valid batch-header record of journal file
// fileID (in a version 1 file: of any file) starting anywhere in
// (from, size); other reports whether it met valid batch headers of other
// files (a recycled file's old data) from from on. It finds the magic in a header's body and checks the
// record around it (length, type, CRC). Windows of chunk bytes overlap by
// a header, so every start position is checked in exactly one window.
func findBatchHeader(r io.ReaderAt, from, size int64, version uint32, fileID uint64, salt journalSalt) (at int64, found, other bool, err error) {
	const chunk = 1 << 20
	var magic [4]byte
	binary.BigEndian.PutUint32(magic[:], batchMagic)
	hdrLen := batchHeaderLen(version)
	buf := make([]byte, chunk+hdrLen)
	for base := from; base < size; base += chunk {
		b := buf[:min(int64(len(buf)), size-base)]
		if _, err := readFull(r, b, base); err != nil {
			return 0, false, other, err
		}
		for i := 0; ; i++ {
			j := bytes.Index(b[i:], magic[:])
			if j < 0 {
				break
			}
			i += j
			s := i - recHeaderSize // the record starts 9 bytes before its body
			if s < 0 || s >= chunk || s+hdrLen > len(b) {
				continue
			}
			h, err := parseBatchHeader(b[s:s+hdrLen], version, salt)
			switch {
			case err != nil:
			case version > 1 && h.fileID != fileID:
				other = true
			case base+int64(s) > from:
				return base + int64(s), true, other, nil
			}
		}
	}
	return 0, false, other, nil
}
