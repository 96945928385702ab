package storage

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stratamesh/strata/internal/vfs"
)

func TestDecideOwner(t *testing.T) {
	a, b := []byte("aaaa"), []byte("bbbb")
	cases := []struct {
		name    string
		s       ownerState
		want    ownerAction
		foreign bool
	}{
		{"same id", ownerState{index: a, file: a, journalFiles: true}, ownerMatch, false},
		{"another data dir's journal", ownerState{index: a, file: b, journalFiles: true}, 0, true},
		{"new bookie", ownerState{indexFresh: true}, ownerCreate, false},
		{"index from before owner ids", ownerState{journalFiles: true}, ownerCreate, false},
		{"new data dir, a journal from before owner ids", ownerState{indexFresh: true, journalFiles: true}, 0, true},
		{"crash after the file, before the index, on upgrade", ownerState{file: a, journalFiles: true}, ownerAdoptFile, false},
		{"crash after the file, before the index, new bookie", ownerState{file: a, indexFresh: true}, ownerAdoptFile, false},
		{"new data dir, another's journal", ownerState{file: a, indexFresh: true, journalFiles: true}, 0, true},
		{"empty journal dir (replay checks the checkpoint)", ownerState{index: a}, ownerAdoptIndex, false},
		{"empty journal dir, no checkpoint yet", ownerState{index: a, indexFresh: true}, 0, true},
		{"same without fsync (OWNER may be lost)", ownerState{index: a, indexFresh: true, noSync: true}, ownerAdoptIndex, false},
		{"journal files without an owner id", ownerState{index: a, journalFiles: true}, 0, true},
	}
	for _, c := range cases {
		got, err := decideOwner(c.s)
		if c.foreign {
			if !errors.Is(err, ErrForeignJournal) {
				t.Errorf("%s: got (%v, %v), want ErrForeignJournal", c.name, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got (%v, %v), want %v", c.name, got, err, c.want)
		}
	}
}

// journalDirConfig is testConfig with the journal in dir, outside the
// data directory.
func journalDirConfig(fsys vfs.FS, data, journal string) Config {
	cfg := testConfig(fsys)
	cfg.Dir, cfg.JournalDir = data, journal
	return cfg
}

// TestJournalDirElsewhere: with JournalDir set, the journal lives there
// (nothing under the data directory's journal/), and acked entries
// survive a crash through it.
func TestJournalDirElsewhere(t *testing.T) {
	mem := vfs.NewMem()
	cfg := journalDirConfig(mem, "/data", "/fast/journal")
	e := open(t, cfg)
	addMany(t, e, 1, 0, 50)
	crashed := mem.CrashClone()
	e.Close()

	names, err := crashed.List("/fast/journal")
	if err != nil {
		t.Fatal(err)
	}
	jnl := 0
	for _, n := range names {
		if filepath.Ext(n) == journalExt {
			jnl++
		}
	}
	if jnl == 0 {
		t.Fatalf("no journal files in the journal dir: %v", names)
	}
	if _, err := crashed.Stat(filepath.Join("/data", journalDir)); err == nil {
		t.Fatal("the data directory has a journal/ too")
	}
	e2 := open(t, journalDirConfig(crashed, "/data", "/fast/journal"))
	for i := int64(0); i < 50; i++ {
		checkEntry(t, e2, 1, i)
	}
}

// TestForeignJournalRefused: a journal directory is opened only with the
// data directory it belongs to.
func TestForeignJournalRefused(t *testing.T) {
	mem := vfs.NewMem()
	for _, d := range []struct{ data, journal string }{{"/a", "/ja"}, {"/b", "/jb"}} {
		e := open(t, journalDirConfig(mem, d.data, d.journal))
		addMany(t, e, 1, 0, 5)
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Mounts swapped.
	if _, err := Open(journalDirConfig(mem, "/a", "/jb")); !errors.Is(err, ErrForeignJournal) {
		t.Fatalf("swapped journal: %v", err)
	}
	// A new data directory with a journal directory that has a journal.
	if _, err := Open(journalDirConfig(mem, "/c", "/ja")); !errors.Is(err, ErrForeignJournal) {
		t.Fatalf("new data dir, old journal: %v", err)
	}
	// The right pairs still open, with their entries.
	e := open(t, journalDirConfig(mem, "/a", "/ja"))
	checkEntry(t, e, 1, 4)
}

// TestReplacedJournalDeviceRefused: an empty journal directory in place of
// one that held entries the index has not flushed past is refused, not
// opened without them.
func TestReplacedJournalDeviceRefused(t *testing.T) {
	mem := vfs.NewMem()
	e := open(t, journalDirConfig(mem, "/data", "/j"))
	addMany(t, e, 1, 0, 5)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	emptyDir(t, mem, "/j")
	if _, err := Open(journalDirConfig(mem, "/data", "/j")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("empty journal device: %v", err)
	}
}

// TestEmptiedJournalBeforeTheFirstFlushRefused: acknowledged adds that
// live only in the journal (no flush, hence no checkpoint, yet) are not
// silently dropped when the journal directory comes back empty.
func TestEmptiedJournalBeforeTheFirstFlushRefused(t *testing.T) {
	mem := vfs.NewMem()
	e := open(t, journalDirConfig(mem, "/data", "/j"))
	addMany(t, e, 1, 0, 5)
	crashed := mem.CrashClone() // before any flush
	e.Close()
	emptyDir(t, crashed, "/j")
	if e2, err := Open(journalDirConfig(crashed, "/data", "/j")); !errors.Is(err, ErrForeignJournal) {
		if err == nil {
			e2.Close()
		}
		t.Fatalf("emptied journal before the first flush: %v, want ErrForeignJournal", err)
	}
}

// emptyDir removes every file in dir, as a replaced or wiped device.
func emptyDir(t *testing.T, fsys vfs.FS, dir string) {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := fsys.Remove(filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
}
