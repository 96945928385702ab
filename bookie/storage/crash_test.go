package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/testutil"
	"github.com/stratamesh/strata/internal/vfs"
)

// journalFiles lists the journal files on fsys.
func journalFiles(t testing.TB, fsys vfs.FS) []string {
	t.Helper()
	names, err := fsys.List(filepath.Join(testDir, journalDir))
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(names, func(n string) bool { return n == journalOwnerFile || n == lockFileName })
}

func logFiles(t testing.TB, fsys vfs.FS) []string {
	t.Helper()
	names, err := fsys.List(filepath.Join(testDir, logsDir))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestCrashAfterAckKeepsEveryAckedEntry: a crash at any moment after adds
// were acknowledged loses none of them, whether they had been flushed to
// an entry log or were only in the journal; LACs, fences, counts survive.
func TestCrashAfterAckKeepsEveryAckedEntry(t *testing.T) {
	fs := vfs.NewMem()
	e := open(t, testConfig(fs))
	addMany(t, e, 1, 0, 40)
	addMany(t, e, 2, 0, 10)
	flush(t, e)
	addMany(t, e, 1, 40, 30) // journal only
	addMany(t, e, 3, 0, 5)
	if _, err := e.Fence(context.Background(), 3, key(3)); err != nil {
		t.Fatal(err)
	}
	before := e.Ledgers()
	crashed := fs.CrashClone()
	e.Close()

	e2 := open(t, testConfig(crashed))
	for i := int64(0); i < 70; i++ {
		checkEntry(t, e2, 1, i)
	}
	for i := int64(0); i < 10; i++ {
		checkEntry(t, e2, 2, i)
	}
	after := e2.Ledgers()
	if len(after) != len(before) {
		t.Fatalf("ledgers before %+v after %+v", before, after)
	}
	for i := range before {
		if before[i] != after[i] {
			t.Fatalf("ledger before %+v after %+v", before[i], after[i])
		}
	}
	wantErr(t, "add to fenced ledger after crash", add(t, e2, addReq(3, 5)), ErrFenced)
	// And once more, from the state the reopen flushed.
	crashed2 := crashed.CrashClone()
	e2.Close()
	e3 := open(t, testConfig(crashed2))
	checkEntry(t, e3, 1, 69)
	if got := e3.Ledgers(); len(got) != 3 || got[0] != before[0] {
		t.Fatalf("second reopen: %+v", got)
	}
}

// TestCrashWithAddsInFlight: a crash in the middle of a stream of adds
// keeps every add acknowledged before it; others may or may not be there,
// but what is there is intact.
func TestCrashWithAddsInFlight(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig(fs)
	cfg.WriteCacheBytes = 16 << 10 // flushes happen during the stream
	e := open(t, cfg)
	var acked sync.Map
	var nacked atomic.Int64
	var wg sync.WaitGroup
	for g := int64(1); g <= 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem := make(chan struct{}, 16)
			for i := int64(0); i < 300; i++ {
				sem <- struct{}{}
				e.Add(addReq(g, i), func(err error) {
					if err == nil {
						acked.Store([2]int64{g, i}, true)
						nacked.Add(1)
					}
					<-sem
				})
			}
		}()
	}
	testutil.Eventually(t, "adds under way", 10*time.Second, func() bool { return nacked.Load() > 300 })
	var ackedBefore [][2]int64
	acked.Range(func(k, _ any) bool { ackedBefore = append(ackedBefore, k.([2]int64)); return true })
	crashed := fs.CrashClone()
	wg.Wait()
	e.Close()

	e2 := open(t, testConfig(crashed))
	for _, k := range ackedBefore {
		checkEntry(t, e2, k[0], k[1])
	}
	for _, info := range e2.Ledgers() {
		for i := int64(0); i <= info.LastEntry; i++ {
			if _, err := e2.Read(info.LedgerID, i); err != nil && !errors.Is(err, ErrNoEntry) {
				t.Fatalf("read %d/%d: %v", info.LedgerID, i, err)
			} else if err == nil {
				checkEntry(t, e2, info.LedgerID, i)
			}
		}
	}
	t.Logf("%d acked before the crash, all present", len(ackedBefore))
}

// blockingSync makes syncs of journal files block until released, so a
// test can crash between a batch's write and its fsync.
type blockingSync struct {
	armed   atomic.Bool
	blocked chan struct{}
	release chan struct{}
}

func newBlockingSync() *blockingSync {
	return &blockingSync{blocked: make(chan struct{}, 1), release: make(chan struct{})}
}

func (b *blockingSync) MaybeError(op vfs.Op) error {
	if op.Kind == vfs.OpSync && strings.Contains(op.Path, "/"+journalDir+"/") && b.armed.CompareAndSwap(true, false) {
		b.blocked <- struct{}{}
		<-b.release
	}
	return nil
}

// TestTornJournalTailIsTruncated: a batch written but not fsynced when
// the machine stops may survive in part. Replay detects it (short or bad
// CRC at the tail), never returns its entries, and truncates the file so
// that the next open sees a clean journal.
func TestTornJournalTailIsTruncated(t *testing.T) {
	for _, keep := range []string{"none", "partial", "garbled", "all"} {
		t.Run(keep, func(t *testing.T) {
			mem := vfs.NewMem()
			bs := newBlockingSync()
			efs := vfs.NewErrorFS(mem, bs)
			// Appending batches: MemFS models what survives of unsynced
			// appends; a torn batch over the zero-filled reserve is
			// TestScanJournalReserve's.
			cfg := testConfig(efs)
			cfg.JournalPreallocate = 0
			e := open(t, cfg)
			addMany(t, e, 1, 0, 10)
			bs.armed.Store(true)
			done := make(chan error, 1)
			big := AddRequest{LedgerID: 1, EntryID: 10, LAC: 9, MasterKey: key(1), Payload: bytes.Repeat([]byte("x"), 5000)}
			e.Add(big, func(err error) { done <- err })
			<-bs.blocked // written, not synced, not acked
			crashed := mem.CrashCloneWith(vfs.CrashOptions{KeepUnsynced: func(name string, synced, cur int) int {
				if !strings.Contains(name, "/"+journalDir+"/") {
					return 0
				}
				switch keep {
				case "partial":
					return (cur - synced) / 2
				case "all", "garbled":
					return cur - synced
				}
				return 0
			}})
			if keep == "garbled" { // the tail pages came back as garbage
				garble(t, crashed, 100)
			}
			close(bs.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			e.Close()

			e2 := open(t, testConfig(crashed))
			for i := int64(0); i < 10; i++ {
				checkEntry(t, e2, 1, i)
			}
			got, err := e2.Read(1, 10)
			switch {
			case keep == "all":
				if err != nil || !bytes.Equal(got.Payload, big.Payload) {
					t.Fatalf("complete unsynced batch: %v", err)
				}
			case !errors.Is(err, ErrNoEntry):
				t.Fatalf("torn entry returned: %v %d bytes", err, len(got.Payload))
			}
			if info := e2.Ledgers()[0]; keep != "all" && (info.LastEntry != 9 || info.LAC != 8) {
				t.Fatalf("torn entry counted: %+v", info)
			}
			// The tail was truncated: the next crash and open find a
			// clean journal (the damaged file is no longer the newest).
			crashed2 := crashed.CrashClone()
			e2.Close()
			e3 := open(t, testConfig(crashed2))
			checkEntry(t, e3, 1, 9)
		})
	}
}

// garble overwrites the last n bytes of the newest journal file.
func garble(t *testing.T, fsys vfs.FS, n int) {
	t.Helper()
	names := journalFiles(t, fsys)
	name := filepath.Join(testDir, journalDir, names[len(names)-1])
	f, err := fsys.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, n), st.Size()-int64(n)); err != nil {
		t.Fatal(err)
	}
	f.Sync()
}

// TestJournalCorruptionBeforeTheTailFailsOpen: a damaged record with valid
// batches after it is corruption, reported, not skipped.
func TestJournalCorruptionBeforeTheTailFailsOpen(t *testing.T) {
	fs := vfs.NewMem()
	e := open(t, testConfig(fs))
	for i := int64(0); i < 10; i++ {
		mustAdd(t, e, addReq(1, i)) // one batch each
	}
	crashed := fs.CrashClone()
	e.Close()
	names := journalFiles(t, crashed)
	name := filepath.Join(testDir, journalDir, names[len(names)-1])
	f, err := crashed.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, fileHeaderSize+batchHeaderSize+40); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	f.Close()
	if e, err := Open(testConfig(crashed)); !errors.Is(err, ErrCorrupt) {
		if e != nil {
			e.Close()
		}
		t.Fatalf("open of a journal corrupt in the middle: %v", err)
	}
}

// TestFenceSurvivesCrash: Fence returns only once the fence is durable.
func TestFenceSurvivesCrash(t *testing.T) {
	fs := vfs.NewMem()
	e := open(t, testConfig(fs))
	addMany(t, e, 1, 0, 3)
	lac, err := e.Fence(context.Background(), 1, key(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Fence(context.Background(), 2, []byte("fresh")); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone()
	e.Close()
	e2 := open(t, testConfig(crashed))
	wantErr(t, "add after crash", add(t, e2, addReq(1, 3)), ErrFenced)
	if got, _ := e2.LAC(1); got != lac {
		t.Fatalf("LAC %d, fenced at %d", got, lac)
	}
	infos := e2.Ledgers()
	if len(infos) != 2 || !infos[0].Fenced || !infos[1].Fenced {
		t.Fatalf("ledgers %+v", infos)
	}
	if _, err := e2.Fence(context.Background(), 2, []byte("other")); !errors.Is(err, ErrMasterKey) {
		t.Fatalf("key of a fence-created ledger lost: %v", err)
	}
}

// TestCrashDuringAndAfterFlush: a crash after the entry log was synced
// but before the index commit replays from the journal; a crash after the
// commit reads from the entry log. Both keep everything.
func TestCrashDuringAndAfterFlush(t *testing.T) {
	fs := vfs.NewMem()
	e := open(t, testConfig(fs))
	addMany(t, e, 1, 0, 30)
	addMany(t, e, 2, 0, 30)
	var during *vfs.MemFS
	e.hooks.afterFlushLog = func() { during = fs.CrashClone() }
	flush(t, e)
	e.hooks.afterFlushLog = nil
	after := fs.CrashClone()
	e.Close()
	for name, c := range map[string]*vfs.MemFS{"during": during, "after": after} {
		t.Run(name, func(t *testing.T) {
			e := open(t, testConfig(c))
			for l := int64(1); l <= 2; l++ {
				for i := int64(0); i < 30; i++ {
					checkEntry(t, e, l, i)
				}
			}
			if info := e.Ledgers()[0]; info.Entries != 30 || info.LAC != 28 {
				t.Fatalf("ledger %+v", info)
			}
		})
	}
}

// TestJournalFilesRotateAndArePurged: journal files rotate at
// JournalMaxFileSize and go once a checkpoint passes them (kept as spares
// for reuse, up to maxSpareJournals, the rest removed); replay across
// several files works.
func TestJournalFilesRotateAndArePurged(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig(fs)
	cfg.JournalMaxFileSize = 8 << 10
	e := open(t, cfg)
	for i := int64(0); i < 40; i++ {
		mustAdd(t, e, AddRequest{LedgerID: 1, EntryID: i, LAC: i - 1, MasterKey: key(1), Payload: bytes.Repeat([]byte{byte(i)}, 1000)})
	}
	if n := len(journalFiles(t, fs)); n < 4 {
		t.Fatalf("%d journal files after 40 KB with 8 KB files", n)
	}
	crashed := fs.CrashClone()
	before := len(journalFiles(t, fs))
	flush(t, e)
	jnl, spares := 0, 0
	for _, n := range journalFiles(t, fs) {
		switch filepath.Ext(n) {
		case journalExt:
			jnl++
		case spareExt:
			spares++
		}
	}
	if jnl != 1 || spares != min(before-1, maxSpareJournals) {
		t.Fatalf("%d journal files and %d spares after a checkpoint at the end (%d files before)", jnl, spares, before)
	}
	e.Close()
	e2 := open(t, cfg2(cfg, crashed))
	for i := int64(0); i < 40; i++ {
		got, err := e2.Read(1, i)
		if err != nil || len(got.Payload) != 1000 || got.Payload[0] != byte(i) {
			t.Fatalf("entry %d after replay of rotated files: %v", i, err)
		}
	}
	if st := e2.Stats(); st.Checkpoint.File == 0 {
		t.Fatalf("checkpoint %+v", st.Checkpoint)
	}
}

func cfg2(cfg Config, fsys vfs.FS) Config {
	cfg.FS = fsys
	return cfg
}

// TestReplayOfDeleteThenRecreate: a ledger deleted and written again
// after the checkpoint replays to the new incarnation only: the old one's
// index entries neither come back nor count as overwritten.
func TestReplayOfDeleteThenRecreate(t *testing.T) {
	fs := vfs.NewMem()
	e := open(t, testConfig(fs))
	addMany(t, e, 1, 0, 5)
	flush(t, e)
	// Crash in the window where the delete is journaled but the index
	// still holds the old incarnation; the new one is written meanwhile.
	var crashed *vfs.MemFS
	var want []LedgerInfo
	e.hooks.afterDeleteLog = func() {
		mustAdd(t, e, addReq(1, 3))
		mustAdd(t, e, addReq(1, 1)) // below the new incarnation's last entry
		if _, err := e.Read(1, 0); !errors.Is(err, ErrNoEntry) {
			t.Errorf("old incarnation's entry read during the delete: %v", err)
		}
		want = e.Ledgers()
		crashed = fs.CrashClone()
	}
	if err := e.DeleteLedger(1); err != nil {
		t.Fatal(err)
	}
	if len(want) != 1 || want[0].Entries != 2 {
		t.Fatalf("live: %+v", want)
	}
	if got := e.Ledgers(); got[0] != want[0] {
		t.Fatalf("after the delete completed %+v, during %+v", got, want)
	}
	e.Close()
	e2 := open(t, testConfig(crashed))
	if got := e2.Ledgers(); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("after replay %+v, before crash %+v", got, want)
	}
	checkEntry(t, e2, 1, 1)
	checkEntry(t, e2, 1, 3)
	for _, id := range []int64{0, 2, 4} {
		if _, err := e2.Read(1, id); !errors.Is(err, ErrNoEntry) {
			t.Fatalf("entry %d of the deleted incarnation: %v", id, err)
		}
	}
}

// Entry logs with direct I/O (the default where the file system has it)
// and without: flushes that each end in a partial block (rewritten by the
// next flush), adds between them, and a crash that keeps only what was
// synced: every acked entry reads back, from the logs or the journal. The
// direct case also proves every log write is whole aligned blocks (MemFS
// refuses others).
func TestDirectIOLogsSurviveCrash(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			mem := vfs.NewMem()
			mem.SetDirectIO(direct)
			e := open(t, testConfig(mem))
			for round := range 6 {
				addMany(t, e, 1, int64(round*37), 37)
				if round%2 == 0 {
					if err := e.Flush(context.Background()); err != nil {
						t.Fatal(err)
					}
					if e.cur.direct != direct {
						t.Fatalf("entry log direct=%v, want %v", e.cur.direct, direct)
					}
				}
			}
			crashed := mem.CrashClone()
			e.Close()
			e2 := open(t, testConfig(crashed))
			for i := range int64(6 * 37) {
				checkEntry(t, e2, 1, i)
			}
		})
	}
}
