package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/stratamesh/strata/internal/vfs"
	"github.com/stratamesh/strata/internal/vfs/pebblevfs"
)

// journalSizes returns the size of each journal file in fsys.
func journalSizes(t *testing.T, fsys vfs.FS) map[string]int64 {
	t.Helper()
	dir := filepath.Join(testDir, journalDir)
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	for _, n := range names {
		f, err := fsys.Open(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		sizes[n] = st.Size()
	}
	return sizes
}

// TestJournalReserveSurvivesCrash: batches written into the zero-filled
// reserve (across rotations) are all there after a crash, which leaves
// the reserve's zeros at the end of the journal; replay drops them.
func TestJournalReserveSurvivesCrash(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig(mem)
	cfg.JournalMaxFileSize = 8 << 10 // several rotations
	e := open(t, cfg)
	for i := int64(0); i < 400; i += 20 { // batches of up to 20
		addMany(t, e, 1, i, 20)
	}
	settleReserve(t, e)
	if e.j.fileID < 2 {
		t.Fatalf("no rotation: journal file %d", e.j.fileID)
	}
	// The current file holds the reserve past the writer's end.
	sizes := journalSizes(t, mem)
	cur := sizes[idFileName(e.j.fileID, journalExt)]
	if cur <= e.j.off {
		t.Fatalf("journal file is %d bytes, written to %d: no reserve", cur, e.j.off)
	}
	crashed := mem.CrashClone()
	e.Close()

	e2 := open(t, testConfig(crashed))
	for i := int64(0); i < 400; i++ {
		checkEntry(t, e2, 1, i)
	}
	addMany(t, e2, 1, 400, 10) // the journal goes on after replay
	checkEntry(t, e2, 1, 409)
}

// TestJournalReserveFillFails: when zero-filling fails the journal logs it
// and appends its batches instead; adds succeed and survive a crash.
func TestJournalReserveFillFails(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem, nil)
	cfg := testConfig(efs)
	// Every write of a whole chunk in the journal is the filler's (the
	// batches here are far smaller).
	chunkWrite := func(op vfs.Op) bool { return op.Len == int(cfg.JournalPreallocate) }
	efs.SetInjector(vfs.NewFailNth(1, vfs.And(vfs.OnKind(vfs.OpWrite), inJournal, chunkWrite), errors.New("write: ENOSPC")))
	e := open(t, cfg)
	settleReserve(t, e)
	if !e.j.res.failed {
		t.Fatal("the injected fill failure did not happen")
	}
	addMany(t, e, 1, 0, 50)
	crashed := mem.CrashClone()
	e.Close()
	e2 := open(t, testConfig(crashed))
	for i := int64(0); i < 50; i++ {
		checkEntry(t, e2, 1, i)
	}
}

// TestJournalRecycling: files a checkpoint passed become spares and new
// journal files are made from them; after a crash, replay reads the new
// batches of a recycled file and never the old ones behind them (here,
// adds of a ledger deleted since, which must not come back).
func TestJournalRecycling(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig(mem)
	cfg.JournalMaxFileSize = 8 << 10
	e := open(t, cfg)
	big := func(l, i int64) AddRequest {
		return AddRequest{LedgerID: l, EntryID: i, LAC: i - 1, MasterKey: key(l), Payload: bytes.Repeat([]byte{byte(i)}, 1000)}
	}
	for i := int64(0); i < 40; i++ {
		mustAdd(t, e, big(1, i))
	}
	flush(t, e) // the checkpoint passes every file but the current one
	spares := map[string]bool{}
	for _, n := range journalFiles(t, mem) {
		if filepath.Ext(n) == spareExt {
			spares[n] = true
		}
	}
	if len(spares) == 0 {
		t.Fatal("no spare journal file after a checkpoint")
	}
	if err := e.DeleteLedger(1); err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 20; i++ {
		mustAdd(t, e, big(2, i))
	}
	used := 0
	for n := range spares {
		if _, err := mem.Stat(filepath.Join(testDir, journalDir, n)); err != nil {
			used++ // renamed into a journal file
		}
	}
	if used == 0 {
		t.Fatalf("no spare was recycled: %v", journalFiles(t, mem))
	}
	crashed := mem.CrashClone()
	e.Close()

	e2 := open(t, testConfig(crashed))
	for i := int64(0); i < 20; i++ {
		got, err := e2.Read(2, i)
		if err != nil || len(got.Payload) != 1000 || got.Payload[0] != byte(i) {
			t.Fatalf("entry 2/%d after replay of recycled files: %v", i, err)
		}
	}
	for _, l := range e2.Ledgers() {
		if l.LedgerID == 1 {
			t.Fatalf("deleted ledger 1 came back from a recycled file's old batches: %+v", l)
		}
	}
}

// TestIndexVersionMarksJournalFormat: opening a data directory marks its
// index version 2 (journal files of version 2 may follow), so that a
// build reading only version 1 journals refuses the directory instead of
// truncating batches it cannot parse; a version 1 index is upgraded, an
// unknown version refused.
func TestIndexVersionMarksJournalFormat(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig(mem)
	indexDir := filepath.Join(testDir, indexDirName)
	version := func() uint32 { // read without openIndex, which upgrades
		t.Helper()
		db, err := pebble.Open(indexDir, &pebble.Options{FS: pebblevfs.New(mem), ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		v, closer, err := db.Get(versionKey)
		if err != nil || len(v) != 4 {
			t.Fatalf("version key %x %v", v, err)
		}
		defer closer.Close()
		return binary.BigEndian.Uint32(v)
	}
	setVersion := func(n uint32) {
		t.Helper()
		ix, err := openIndex(mem, indexDir, 1<<20, 1<<20, cfg.Logger, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := ix.db.Set(versionKey, binary.BigEndian.AppendUint32(nil, n), ix.write); err != nil {
			t.Fatal(err)
		}
		ix.close()
	}
	e := open(t, cfg)
	addMany(t, e, 1, 0, 5)
	e.Close()
	if v := version(); v != 2 {
		t.Fatalf("index version %d after open", v)
	}
	setVersion(1) // a directory last opened by an older build
	e = open(t, cfg)
	checkEntry(t, e, 1, 4)
	e.Close()
	if v := version(); v != 2 {
		t.Fatalf("version 1 index not upgraded: %d", v)
	}
	setVersion(3)
	if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "index format") {
		t.Fatalf("open with index version 3: %v", err)
	}
}

// TestShortJournalFilesAreNotKept: restarts leave short journal files
// (each open starts a new one); once a checkpoint passes them they are
// removed, not kept as spares that would fill the pool and save nothing.
func TestShortJournalFilesAreNotKept(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig(mem)
	cfg.JournalMaxFileSize = 64 << 10
	for i := int64(0); i < 6; i++ {
		e, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mustAdd(t, e, addReq(1, i))
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	e := open(t, cfg)
	flush(t, e)
	var spares []string
	for _, n := range journalFiles(t, mem) {
		if filepath.Ext(n) == spareExt {
			spares = append(spares, n)
		}
	}
	if len(spares) > 0 {
		t.Fatalf("short journal files kept as spares: %v", spares)
	}
	for i := int64(0); i < 6; i++ {
		checkEntry(t, e, 1, i)
	}
}

// TestFillerOpensItsOwnHandle: the zero-filler writes and syncs through a
// handle of its own on each journal file (opened when the file becomes
// current), never the writer's: Linux reports a writeback error once per
// open file, so a shared handle could let the filler's fsync take the
// error of the writer's batch and the writer ack it. Without that handle
// (its open fails) the journal appends and acks as before.
func TestFillerOpensItsOwnHandle(t *testing.T) {
	for _, openFails := range []bool{false, true} {
		t.Run(map[bool]string{false: "opened", true: "open fails"}[openFails], func(t *testing.T) {
			var mu sync.Mutex
			opened := map[string]int{}
			efs := vfs.NewErrorFS(vfs.NewMem(), vfs.InjectorFunc(func(op vfs.Op) error {
				if op.Kind != vfs.OpOpen || !strings.HasSuffix(op.Path, journalExt) {
					return nil
				}
				mu.Lock()
				opened[filepath.Base(op.Path)]++
				mu.Unlock()
				if openFails {
					return errors.New("open: EMFILE")
				}
				return nil
			}))
			cfg := testConfig(efs)
			cfg.JournalMaxFileSize = 64 << 10
			e := open(t, cfg)
			for i := int64(0); i < 100; i++ { // ~100 KiB: at least one rotation
				mustAdd(t, e, AddRequest{LedgerID: 1, EntryID: i, LAC: i - 1, MasterKey: key(1), Payload: bytes.Repeat([]byte{'x'}, 1000)})
			}
			mu.Lock()
			defer mu.Unlock()
			ids := []uint64{1, 2}
			if openFails {
				ids = ids[:1] // then the reserve stops: the writer appends
			}
			for _, id := range ids {
				if opened[idFileName(id, journalExt)] == 0 {
					t.Errorf("journal file %d was never opened by the filler (opens: %v)", id, opened)
				}
			}
			for i := int64(0); i < 100; i++ {
				if _, err := e.Read(1, i); err != nil {
					t.Fatalf("entry %d: %v", i, err)
				}
			}
		})
	}
}
