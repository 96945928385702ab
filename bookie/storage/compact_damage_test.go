package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/vfs"
)

// TestCompactionDuringAFailedDelete: DeleteLedger takes the ledger out of
// the ledger table before its delete record is durable. A compaction
// copying in that window must still copy the ledger's entries, because
// the delete can fail (here its journal fsync does) and the ledger then
// stays: every acknowledged entry of it must read back, before and after
// a restart. (Compaction once skipped ledgers missing from the table and
// removed the logs the index still pointed into.)
func TestCompactionDuringAFailedDelete(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem, nil)
	cfg := testConfig(efs)
	cfg.EntryLogMaxSize = 4 << 10
	e := open(t, cfg)
	const n = 60
	for i := int64(0); i < n; i += 5 {
		for _, l := range []int64{1, 2, 3, 4, 5} {
			addMany(t, e, l, i, 5)
		}
		flush(t, e)
	}
	for _, l := range []int64{3, 4, 5} { // make the logs sparse enough to compact
		if err := e.DeleteLedger(l); err != nil {
			t.Fatal(err)
		}
	}
	settleReserve(t, e)

	var armed sync.Once
	delBlocked := make(chan struct{})
	release := make(chan struct{})
	delErr := make(chan error, 1)
	var journalOnce sync.Once
	logsDirPath := filepath.Join(testDir, logsDir)
	efs.SetInjector(vfs.InjectorFunc(func(op vfs.Op) error {
		switch {
		case op.Kind == vfs.OpRead && vfs.InDir(logsDirPath)(op):
			// Compaction's first read of a log (after its snapshot, with
			// flushMu released): start DeleteLedger(2) and wait until its
			// journal fsync is under way.
			armed.Do(func() {
				go func() { delErr <- e.DeleteLedger(2) }()
				select {
				case <-delBlocked:
				case <-time.After(10 * time.Second):
					t.Error("delete never reached the journal")
				}
			})
		case op.Kind == vfs.OpSync && inJournal(op):
			var fail bool
			journalOnce.Do(func() { fail = true })
			if fail {
				close(delBlocked)
				<-release
				return errors.New("fsync: EIO")
			}
		}
		return nil
	}))
	e.hooks.afterCompactCopy = func() { close(release) }
	st, cerr := e.Compact(context.Background())
	derr := <-delErr
	efs.SetInjector(nil)
	t.Logf("compaction %+v, err %v; DeleteLedger(2): %v", st, cerr, derr)
	if derr == nil {
		t.Fatal("the delete was expected to fail")
	}
	if cerr != nil || st.LogsCompacted == 0 {
		t.Fatalf("compaction %+v, %v: want logs compacted", st, cerr)
	}
	if _, err := e.LAC(2); err != nil {
		t.Fatalf("ledger 2 after its failed delete: %v", err)
	}
	lost := 0
	var first error
	for i := int64(0); i < n; i++ {
		if _, err := e.Read(2, i); err != nil {
			lost++
			if first == nil {
				first = err
			}
		}
	}
	if lost > 0 {
		t.Errorf("ledger 2 (delete failed, ledger kept): %d of %d acked entries unreadable, first: %v", lost, n, first)
	}
	crashed := mem.CrashClone()
	e.Close()
	e2, err := Open(cfg2(cfg, crashed))
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer e2.Close()
	lost = 0
	first = nil
	for i := int64(0); i < n; i++ {
		if _, err := e2.Read(2, i); err != nil {
			lost++
			if first == nil {
				first = err
			}
		}
	}
	if lost > 0 {
		t.Errorf("after restart: %d of %d acked entries of ledger 2 unreadable, first: %v", lost, n, first)
	}
}

// TestCompactionCopiesWhatTheIndexPointsAt: a damaged length field in an
// entry of a deleted ledger (bytes nobody reads again) that spans the
// next, live record must not hide that record from compaction. (A copy
// that walked the log's framing skipped it, and the commit removed the
// log the index still pointed into.)
func TestCompactionCopiesWhatTheIndexPointsAt(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig(mem)
	cfg.EntryLogMaxSize = 1 << 10
	e := open(t, cfg)
	addMany(t, e, 1, 0, 20) // to be deleted
	addMany(t, e, 2, 0, 5)  // live
	flush(t, e)
	addMany(t, e, 9, 0, 1)
	flush(t, e) // ledger 9 starts a new log: the first is sealed
	dead, _, _ := e.ix.location(1, 19)
	live, _, _ := e.ix.location(2, 0)
	if dead.log != live.log || dead.off+int64(dead.size) != live.off {
		t.Fatalf("layout: %+v %+v", dead, live)
	}
	if err := e.DeleteLedger(1); err != nil {
		t.Fatal(err)
	}
	// Damage ledger 1 entry 19's length field (dead data) so that it
	// spans the following record too.
	f, err := mem.OpenReadWrite(e.logs.path(dead.log))
	if err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(dead.size+live.size-8))
	if _, err := f.WriteAt(b[:], dead.off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	checkEntry(t, e, 2, 0) // intact before compaction
	st, err := e.Compact(context.Background())
	if err != nil || st.LogsCompacted == 0 {
		t.Fatalf("compaction %+v, %v: want the damaged log compacted", st, err)
	}
	for i := int64(0); i < 5; i++ {
		if _, err := e.Read(2, i); err != nil {
			t.Errorf("live entry 2/%d after compacting a log with damage in a deleted ledger: %v", i, err)
		}
	}
}

// TestDamageInDeadBytesDoesNotStopCompaction: one flipped bit in the
// length field of an entry of a deleted ledger must not fail compaction.
// (A copy that walked the log's framing met the bad length on every run,
// and since the damaged log was picked again each time, no other sparse
// log was ever compacted: space was never reclaimed.)
func TestDamageInDeadBytesDoesNotStopCompaction(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig(mem)
	cfg.EntryLogMaxSize = 1 << 10
	e := open(t, cfg)
	addMany(t, e, 1, 0, 20) // deleted later; its entry 3 gets damaged
	addMany(t, e, 2, 0, 5)
	flush(t, e)
	addMany(t, e, 3, 0, 20) // deleted later, undamaged
	addMany(t, e, 4, 0, 5)
	flush(t, e)
	addMany(t, e, 9, 0, 1)
	flush(t, e)
	dead, _, _ := e.ix.location(1, 3)
	other, _, _ := e.ix.location(3, 0)
	for _, l := range []int64{1, 3} {
		if err := e.DeleteLedger(l); err != nil {
			t.Fatal(err)
		}
	}
	f, err := mem.OpenReadWrite(e.logs.path(dead.log))
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	f.ReadAt(b[:], dead.off+2)
	b[0] ^= 0x40 // length += 16 KiB: past the end of the log
	f.WriteAt(b[:], dead.off+2)
	f.Close()
	st, err := e.Compact(context.Background())
	if err != nil {
		t.Fatalf("compaction %+v: %v", st, err)
	}
	if e.logs.metaOf(dead.log) != nil {
		t.Errorf("the log with damage in dead bytes only (%d) was not compacted: %+v", dead.log, st)
	}
	for i := int64(0); i < 5; i++ {
		checkEntry(t, e, 2, i)
		checkEntry(t, e, 4, i)
	}
	if e.logs.metaOf(other.log) != nil {
		t.Errorf("sparse undamaged log %d never compacted (damage was only in deleted ledger 1's entry 3 in log %d)", other.log, dead.log)
	}
}
