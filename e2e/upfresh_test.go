package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stratamesh/strata/internal/meshfile"
)

// TestUpFreshWithJournalDir: `strata up --fresh` on a mesh whose bookie
// keeps its journal in a journal_dir outside the data directory starts the
// bookie as a new instance. The old journal belonged to the wiped data, so
// --fresh removes its files; without that the bookie refused to start
// (storage.ErrForeignJournal) and with it the whole `up`.
func TestUpFreshWithJournalDir(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "fast-disk", "k1")
	topo := writeTopology(t, dir, "jd.yaml", fmt.Sprintf(bookieJournalDirRegion, journal))
	dataDir := filepath.Join(dir, "data")
	notes := filepath.Join(journal, "NOTES.txt")

	run := func(what string, args ...string) (owner []byte, instance string) {
		up := startUp(t, dataDir, append([]string{"-f", topo}, args...)...)
		live, _ := waitAlive(t, up, what)
		instance = bookieInstance(t, live)
		owner, err := os.ReadFile(filepath.Join(journal, "OWNER"))
		if err != nil {
			t.Fatalf("%s: the journal_dir has no owner id: %v", what, err)
		}
		if err := up.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		<-up.done
		if up.exitErr != nil {
			t.Fatalf("%s: up: %v", what, up.exitErr)
		}
		return owner, instance
	}
	owner1, inst1 := run("the first mesh alive")
	if err := os.WriteFile(notes, []byte("the operator's"), 0o644); err != nil {
		t.Fatal(err)
	}
	owner2, inst2 := run("the same mesh alive again")
	if string(owner2) != string(owner1) || inst2 != inst1 {
		t.Fatalf("a plain restart changed the bookie: owner %s -> %s, instance %s -> %s", owner1, owner2, inst1, inst2)
	}
	owner3, inst3 := run("the fresh mesh alive", "--fresh")
	if string(owner3) == string(owner1) || inst3 == inst1 {
		t.Fatalf("--fresh kept the bookie: owner %s, instance %s", owner3, inst3)
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != "the operator's" {
		t.Fatalf("--fresh touched a file that is not the journal's: %q %v", b, err)
	}
}

// bookieInstance is the instance of the mesh's only bookie, k1.
func bookieInstance(t *testing.T, f *meshfile.File) string {
	t.Helper()
	for _, r := range f.Regions {
		for _, n := range r.Nodes {
			if n.ID == "k1" && n.Bookie != nil && n.Bookie.Instance != "" {
				return n.Bookie.Instance
			}
		}
	}
	t.Fatal("status shows no instance for bookie k1")
	return ""
}
