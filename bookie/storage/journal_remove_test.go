package storage

import (
	"path/filepath"
	"testing"

	"github.com/stratamesh/strata/internal/vfs"
)

// RemoveJournal takes the journal's files and leaves anything else; a
// bookie then opens afresh on an empty data directory with the same
// journal directory (without it, Open refuses: ErrForeignJournal).
func TestRemoveJournal(t *testing.T) {
	mem := vfs.NewMem()
	jdir := "/fast/k1"
	cfg := testConfig(mem)
	cfg.JournalDir = jdir
	e := open(t, cfg)
	addMany(t, e, 1, 0, 20)
	e.Close()
	for _, name := range []string{"NOTES.txt", "0000000000000009.spare"} {
		f, err := mem.Create(filepath.Join(jdir, name))
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("x"))
		f.Close()
	}

	// The data directory is wiped: the journal alone is foreign.
	fresh := testConfig(mem)
	fresh.Dir = "/data2"
	fresh.JournalDir = jdir
	if _, err := Open(fresh); err == nil {
		t.Fatal("opened a new data directory over an old journal")
	}
	n, err := RemoveJournal(mem, jdir)
	if err != nil {
		t.Fatal(err)
	}
	names, err := mem.List(jdir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || names[0] != lockFileName || names[1] != "NOTES.txt" || n < 3 {
		t.Fatalf("after RemoveJournal (%d removed): %v, want only %s and NOTES.txt", n, names, lockFileName)
	}
	e2 := open(t, fresh)
	if got := e2.Ledgers(); len(got) != 0 {
		t.Fatalf("fresh bookie has ledgers %v", got)
	}
	if n, err := RemoveJournal(mem, "/nowhere"); n != 0 || err != nil {
		t.Fatalf("missing dir: %d %v", n, err)
	}
}

// JournalOwnedBy matches a journal directory with its data directory by
// owner id, on the machine's file system, and with nothing else.
func TestJournalOwnedBy(t *testing.T) {
	root := t.TempDir()
	mk := func(data, journal string) {
		cfg := DefaultConfig()
		cfg.Dir, cfg.JournalDir = filepath.Join(root, data), filepath.Join(root, journal)
		e, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	mk("d1", "j1")
	mk("d2", "j2")
	for _, c := range []struct {
		data, journal string
		want          bool
	}{
		{"d1", "j1", true}, {"d2", "j2", true},
		{"d1", "j2", false}, {"d2", "j1", false},
		{"nowhere", "j1", false}, {"d1", "nowhere", false},
	} {
		got, err := JournalOwnedBy(filepath.Join(root, c.data), filepath.Join(root, c.journal))
		if err != nil || got != c.want {
			t.Errorf("JournalOwnedBy(%s, %s) = %v, %v; want %v", c.data, c.journal, got, err, c.want)
		}
	}
}
