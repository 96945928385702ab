package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stratamesh/strata/internal/vfs"
)

// TestForgedBatchInARecycledFile: an entry's payload is a client's bytes;
// one holding a well-formed batch header of a future journal file (here
// "delete ledger 5", CRC'd as an attacker who does not know the salt can)
// stays in its journal file, which is recycled as that future file. A
// crash then leaves the new batches ending where the forged batch starts
// ("aligned"), or anywhere before it. Replay must neither apply it (it
// deleted another client's acknowledged, flushed ledger) nor refuse to
// open because a "valid batch follows the damage" (both happened before
// batch headers were salted).
func TestForgedBatchInARecycledFile(t *testing.T) {
	for _, aligned := range []bool{true, false} {
		name := map[bool]string{true: "aligned", false: "anywhere"}[aligned]
		t.Run(name, func(t *testing.T) {
			mem := vfs.NewMem()
			cfg := testConfig(mem)
			cfg.JournalMaxFileSize = 64 << 10
			e := open(t, cfg)
			if e.salt == 0 {
				t.Fatal("the journal's salt is 0: the forged header below would check")
			}
			jdir := testDir + "/" + journalDir + "/"
			exists := func(name string) bool { _, err := mem.Stat(jdir + name); return err == nil }
			big := func(l, i int64, n int) AddRequest {
				return AddRequest{LedgerID: l, EntryID: i, LAC: i - 1, MasterKey: key(l), Payload: bytes.Repeat([]byte{'x'}, n)}
			}
			addMany(t, e, 5, 0, 10) // the victim: acked and flushed
			flush(t, e)

			forged := make([]byte, batchHeaderSize)
			forged = appendLedgerRecord(forged, recDelete, 5, nil)
			putBatchHeader(forged, 1, 1, len(forged)-batchHeaderSize, 3, 0)
			var i int64
			for ; i < 20; i++ { // push it ~20 KB into journal file 1
				mustAdd(t, e, big(6, i, 1000))
			}
			p := append(append(bytes.Repeat([]byte{'a'}, 64), forged...), bytes.Repeat([]byte{'b'}, 64)...)
			mustAdd(t, e, AddRequest{LedgerID: 7, EntryID: 0, LAC: -1, MasterKey: key(7), Payload: p})
			for ; !exists(idFileName(2, journalExt)); i++ {
				mustAdd(t, e, big(6, i, 1000))
			}
			f1, err := mem.Open(jdir + idFileName(1, journalExt))
			if err != nil {
				t.Fatal(err)
			}
			st, _ := f1.Stat()
			data := make([]byte, st.Size())
			f1.ReadAt(data, 0)
			f1.Close()
			x := bytes.Index(data, forged)
			if x < 0 {
				t.Fatal("forged batch not in journal file 1")
			}
			flush(t, e) // the checkpoint passes file 1: it becomes a spare
			if !exists(idFileName(1, spareExt)) {
				t.Fatalf("file 1 not kept as a spare: %v", journalFiles(t, mem))
			}
			for ; !exists(idFileName(3, journalExt)); i++ {
				mustAdd(t, e, big(6, i, 1000))
			}
			if aligned { // file 3 holds one 1000-byte add; one more, sized, ends at x
				off := int64(fileHeaderSize + batchHeaderSize + recHeaderSize + entryHeaderSize + 1000)
				n := int64(x) - off - (batchHeaderSize + recHeaderSize + entryHeaderSize)
				mustAdd(t, e, big(6, i, int(n)))
			}
			crashed := mem.CrashClone()
			e.Close()
			e2, err := Open(testConfig(crashed))
			if err != nil {
				t.Fatalf("open after a crash refused (every acked entry is intact): %v", err)
			}
			defer e2.Close()
			for j := int64(0); j < 10; j++ {
				checkEntry(t, e2, 5, j)
			}
		})
	}
}

// TestScanVersion2Journal: a journal file written before salted batch
// headers (version 2) still replays; one of this version read with
// another salt has no valid batch (in the newest file: a torn tail).
func TestScanVersion2Journal(t *testing.T) {
	v2 := encodeFileHeader(3)
	binary.BigEndian.PutUint32(v2[recHeaderSize+4:], 2)
	binary.BigEndian.PutUint32(v2[4:], recordCRC(recFileHeader, v2[recHeaderSize:]))
	unsalted := func(seq uint64, ids ...int64) []byte {
		b := make([]byte, batchHeaderSize)
		for _, id := range ids {
			rec := encodeEntry(1, id, id-1, payload(1, id))
			b = appendRecord(b, recAdd, recordCRC(recAdd, rec), rec)
		}
		putBatchHeader(b, seq, len(ids), len(b)-batchHeaderSize, 3, 0) // salt 0: version 2's CRC
		return b
	}
	file := append(append(bytes.Clone(v2), unsalted(1, 0, 1)...), unsalted(2, 2)...)
	ids, res, err := scanAll(t, file, false)
	if err != nil || len(ids) != 3 || res.batches != 2 {
		t.Fatalf("version 2 file: ids %v, %+v, %v", ids, res, err)
	}

	v3, _ := testJournal(3, testBatch(1, 1, 0, 1))
	var got int
	res, err = scanJournal(bytes.NewReader(v3), int64(len(v3)), 3, 0, true, testSalt+1, func(recs []record, _ int64) error {
		got += len(recs)
		return nil
	})
	if err != nil || got != 0 || !res.torn {
		t.Fatalf("version 3 file read with another salt: %d records, %+v, %v; want none, a torn tail", got, res, err)
	}
	if _, err := scanJournal(bytes.NewReader(v3), int64(len(v3)), 3, 0, false, testSalt+1, func([]record, int64) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("an older file read with another salt: %v, want ErrCorrupt", err)
	}
}
