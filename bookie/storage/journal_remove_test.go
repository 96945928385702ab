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
	if len(names) != 1 || names[0] != "NOTES.txt" || n < 3 {
		t.Fatalf("after RemoveJournal (%d removed): %v, want only NOTES.txt", n, names)
	}
	e2 := open(t, fresh)
	if got := e2.Ledgers(); len(got) != 0 {
		t.Fatalf("fresh bookie has ledgers %v", got)
	}
	if n, err := RemoveJournal(mem, "/nowhere"); n != 0 || err != nil {
		t.Fatalf("missing dir: %d %v", n, err)
	}
}
