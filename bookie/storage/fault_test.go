package storage

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/internal/vfs"
)

var inJournal = vfs.InDir(filepath.Join(testDir, journalDir))

// TestFailingFsyncFailsTheBatch: when the journal's fsync fails, every add
// of that batch gets the error and none is acknowledged; the failed batch
// is rolled back, so it does not come back after a crash either; later
// batches succeed.
func TestFailingFsyncFailsTheBatch(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem, nil)
	cfg := testConfig(efs)
	cfg.JournalGroupWindow = 50 * time.Millisecond // one batch for the burst
	e := open(t, cfg)
	mustAdd(t, e, addReq(1, 0))
	settleReserve(t, e)
	boom := errors.New("fsync: EIO")
	efs.SetInjector(vfs.NewFailNth(1, vfs.And(vfs.OnKind(vfs.OpSync), inJournal), boom))
	var mu sync.Mutex
	results := map[int64]error{}
	var wg sync.WaitGroup
	for i := int64(1); i <= 20; i++ {
		wg.Add(1)
		e.Add(addReq(1, i), func(err error) {
			mu.Lock()
			results[i] = err
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	failed := 0
	for i, err := range results {
		switch {
		case errors.Is(err, boom):
			failed++
			if _, rerr := e.Read(1, i); !errors.Is(rerr, ErrNoEntry) {
				t.Fatalf("failed add %d is readable: %v", i, rerr)
			}
		case err != nil:
			t.Fatalf("add %d: unexpected %v", i, err)
		default:
			checkEntry(t, e, 1, i)
		}
	}
	if failed == 0 {
		t.Fatal("no add saw the failed fsync")
	}
	// The journal goes on.
	mustAdd(t, e, addReq(2, 0))
	crashed := mem.CrashClone()
	e.Close()
	e2 := open(t, testConfig(crashed))
	for i, err := range results {
		_, rerr := e2.Read(1, i)
		if err == nil && rerr != nil {
			t.Fatalf("acked add %d lost: %v", i, rerr)
		}
		if err != nil && !errors.Is(rerr, ErrNoEntry) {
			t.Fatalf("failed add %d present after crash: %v", i, rerr)
		}
	}
	checkEntry(t, e2, 2, 0)
	t.Logf("%d of 20 adds failed with the fsync", failed)
}

// TestJournalBrokenWhenRollbackFails: if the failed batch cannot even be
// truncated away, the journal refuses every later add rather than let
// the failed batch reappear at replay behind acknowledged ones.
func TestJournalBrokenWhenRollbackFails(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem(), nil)
	e := open(t, testConfig(efs))
	mustAdd(t, e, addReq(1, 0))
	efs.SetInjector(vfs.FailAll(vfs.And(vfs.OnKind(vfs.OpSync, vfs.OpTruncate), inJournal), nil))
	wantErr(t, "add with failing fsync", add(t, e, addReq(1, 1)), vfs.ErrInjected)
	efs.SetInjector(nil)
	wantErr(t, "add after a failed rollback", add(t, e, addReq(1, 2)), vfs.ErrInjected)
	if _, err := e.Fence(context.Background(), 1, key(1)); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("fence on a broken journal: %v", err)
	}
	checkEntry(t, e, 1, 0)
}

// TestFailingEntryLogWriteKeepsEntriesInCache: a flush whose entry-log
// write fails leaves the entries in the write cache (readable) and the
// checkpoint where it was; the next flush succeeds.
func TestFailingEntryLogWriteKeepsEntriesInCache(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem, nil)
	e := open(t, testConfig(efs))
	addMany(t, e, 1, 0, 20)
	efs.SetInjector(vfs.FailAll(vfs.And(vfs.OnKind(vfs.OpSync), vfs.InDir(filepath.Join(testDir, logsDir))), nil))
	if err := e.Flush(context.Background()); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("flush: %v", err)
	}
	for i := int64(0); i < 20; i++ {
		checkEntry(t, e, 1, i)
	}
	efs.SetInjector(nil)
	addMany(t, e, 1, 20, 5)
	flush(t, e)
	crashed := mem.CrashClone()
	e.Close()
	e2 := open(t, testConfig(crashed))
	for i := int64(0); i < 25; i++ {
		checkEntry(t, e2, 1, i)
	}
	if n := e2.Ledgers()[0].Entries; n != 25 {
		t.Fatalf("entries %d", n)
	}
}

// TestCorruptEntryOnDiskIsReported: a flipped byte in an entry log makes
// reading that entry fail with ErrCorrupt; its neighbours read fine.
func TestCorruptEntryOnDiskIsReported(t *testing.T) {
	fs := vfs.NewMem()
	e := open(t, testConfig(fs))
	addMany(t, e, 1, 0, 10)
	flush(t, e)
	loc, ok, err := e.ix.location(1, 4)
	if err != nil || !ok {
		t.Fatalf("location: %v %v", ok, err)
	}
	for _, at := range []int64{loc.off + entryHeaderSize + 1, loc.off + 5, loc.off + 17} { // payload, CRC, entry id
		name := filepath.Join(testDir, logsDir, idFileName(loc.log, entryLogExt))
		f, err := fs.OpenReadWrite(name)
		if err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		f.ReadAt(b[:], at)
		b[0] ^= 0x08
		f.WriteAt(b[:], at)
		got, err := e.Read(1, 4)
		if !errors.Is(err, ErrCorrupt) || got.Payload != nil {
			t.Fatalf("flip at %d: got %q, %v", at, got.Payload, err)
		}
		b[0] ^= 0x08
		f.WriteAt(b[:], at)
		f.Close()
	}
	// Flip once more and check ReadRange stops at it with the error.
	name := filepath.Join(testDir, logsDir, idFileName(loc.log, entryLogExt))
	f, _ := fs.OpenReadWrite(name)
	f.WriteAt([]byte{0}, loc.off+entryHeaderSize)
	f.Close()
	checkEntry(t, e, 1, 3)
	checkEntry(t, e, 1, 5)
	got, err := e.ReadRange(1, 0, 9, 0)
	if !errors.Is(err, ErrCorrupt) || len(got) != 4 {
		t.Fatalf("ReadRange over a corrupt entry: %d entries, %v", len(got), err)
	}
}

// TestGroupWindowWithManualClock: an add at an idle journal waits for the
// window, unless the batch reaches JournalGroupBytes.
func TestGroupWindowWithManualClock(t *testing.T) {
	clk := newManualClock()
	cfg := testConfig(vfs.NewMem())
	cfg.Clock = clk
	cfg.JournalGroupWindow = 10 * time.Millisecond
	cfg.JournalGroupBytes = 4 << 10
	e := open(t, cfg)
	done := make(chan error, 2)
	e.Add(addReq(1, 0), func(err error) { done <- err })
	e.Add(addReq(1, 1), func(err error) { done <- err })
	testutil.Eventually(t, "journal waiting on its window", 5*time.Second, func() bool {
		return clk.armedWithin(cfg.JournalGroupWindow) > 0
	})
	select {
	case err := <-done:
		t.Fatalf("add acked before the window ended: %v", err)
	default:
	}
	clk.Advance(cfg.JournalGroupWindow)
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if st := e.Stats(); st.JournalBatches != 1 || st.JournalAdds != 2 {
		t.Fatalf("stats %+v", st)
	}
	// A batch over JournalGroupBytes goes at once, with no clock movement.
	big := AddRequest{LedgerID: 1, EntryID: 2, LAC: 1, MasterKey: key(1), Payload: bytes.Repeat([]byte("b"), 5<<10)}
	mustAdd(t, e, big)
}

// ReadRange over damage in the middle of a run of adjacent entries (one
// read for the run, readRun) returns exactly the entries before the
// damaged one, and its error, as reading them one by one does; damage
// past a gap the range stops at is not reached at all.
func TestReadRangeDamageInsideARun(t *testing.T) {
	for _, c := range []struct {
		name    string
		damage  func(t *testing.T, e *Engine, mem *vfs.MemFS)
		entries int
		corrupt bool
	}{
		{"a flipped byte in entry 10", func(t *testing.T, e *Engine, mem *vfs.MemFS) {
			loc, _, _ := e.ix.location(1, 10)
			f, err := mem.OpenReadWrite(e.logs.path(loc.log))
			if err != nil {
				t.Fatal(err)
			}
			b := []byte{0}
			f.ReadAt(b, loc.off+entryHeaderSize)
			b[0] ^= 0xff
			f.WriteAt(b, loc.off+entryHeaderSize)
			f.Close()
		}, 10, true},
		{"the log cut inside entry 15", func(t *testing.T, e *Engine, mem *vfs.MemFS) {
			loc, _, _ := e.ix.location(1, 15)
			f, err := mem.OpenReadWrite(e.logs.path(loc.log))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(loc.off + 5); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}, 15, true},
		{"entry 5's location says 10 bytes", func(t *testing.T, e *Engine, _ *vfs.MemFS) {
			loc, _, _ := e.ix.location(1, 5)
			loc.size = 10
			if err := e.ix.db.Set(entryKey(1, 5), encodeLocation(loc), e.ix.write); err != nil {
				t.Fatal(err)
			}
		}, 5, true},
		{"entry 5 missing, entry 6's location garbled", func(t *testing.T, e *Engine, _ *vfs.MemFS) {
			if err := e.ix.db.Delete(entryKey(1, 5), e.ix.write); err != nil {
				t.Fatal(err)
			}
			if err := e.ix.db.Set(entryKey(1, 6), []byte{1, 2, 3}, e.ix.write); err != nil {
				t.Fatal(err)
			}
		}, 5, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			e := open(t, testConfig(mem))
			addMany(t, e, 1, 0, 20)
			flush(t, e)
			c.damage(t, e, mem)
			got, err := e.ReadRange(1, 0, 19, 0)
			if len(got) != c.entries || errors.Is(err, ErrCorrupt) != c.corrupt || (err != nil && !c.corrupt) {
				t.Fatalf("ReadRange: %d entries, %v; want %d entries, corrupt=%v", len(got), err, c.entries, c.corrupt)
			}
			for i, ent := range got {
				if ent.EntryID != int64(i) {
					t.Fatalf("entry %d is %d", i, ent.EntryID)
				}
			}
		})
	}
}
