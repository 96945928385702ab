package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"testing"
)

func mustWrite(t *testing.T, f File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, fsys FS, name string) string {
	t.Helper()
	b, err := ReadFile(fsys, name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

func mustNotExist(t *testing.T, fsys FS, name string) {
	t.Helper()
	if _, err := fsys.Stat(name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat %s: want not-exist, got %v", name, err)
	}
}

// newSyncedFile creates dir/name with contents, fsyncs it and its directory.
func newSyncedFile(t *testing.T, m *MemFS, dir, name, contents string) File {
	t.Helper()
	if err := m.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := m.Create(dir + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, contents)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestCrashKeepsOnlySyncedContents(t *testing.T) {
	m := NewMem()
	f := newSyncedFile(t, m, "/d", "a", "hello")
	mustWrite(t, f, " world") // unsynced append
	if got := mustRead(t, m, "/d/a"); got != "hello world" {
		t.Fatalf("before crash: %q", got)
	}
	c := m.CrashClone()
	if got := mustRead(t, c, "/d/a"); got != "hello" {
		t.Fatalf("after crash: %q, want the synced %q", got, "hello")
	}
	// The original is untouched and still usable.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, m.CrashClone(), "/d/a"); got != "hello world" {
		t.Fatalf("after second sync: %q", got)
	}
	// The clone is independent of the original.
	g, err := c.OpenReadWrite("/d/a")
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, g, "J")
	if got := mustRead(t, m, "/d/a"); got != "hello world" {
		t.Fatalf("original changed by a write to the clone: %q", got)
	}
}

func TestCrashOverwriteBelowSyncedSizeIsLost(t *testing.T) {
	m := NewMem()
	f := newSyncedFile(t, m, "/d", "a", "hello")
	if _, err := f.WriteAt([]byte("J"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "XYZW") // write offset is 5: grows to 9 with zeros between
	if got := mustRead(t, m, "/d/a"); got != "Je\x00\x00\x00XYZW" {
		t.Fatalf("current: %q", got)
	}
	if got := mustRead(t, m.CrashClone(), "/d/a"); got != "hello" {
		t.Fatalf("after crash: %q", got)
	}
}

func TestCrashUnsyncedDirectoryEntries(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	// Created and fsynced, but the directory never synced: lost.
	f, _ := m.Create("/d/nodirsync")
	mustWrite(t, f, "x")
	f.Sync()
	// Directory synced but the file never: present and empty.
	g, _ := m.Create("/d/nofilesync")
	mustWrite(t, g, "y")
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	c := m.CrashClone()
	if got := mustRead(t, c, "/d/nodirsync"); got != "x" {
		// It was created before the SyncDir, so its entry is durable too.
		t.Fatalf("nodirsync: %q", got)
	}
	if got := mustRead(t, c, "/d/nofilesync"); got != "" {
		t.Fatalf("nofilesync: %q, want empty", got)
	}
	// A file created after the last SyncDir is lost even if synced.
	h, _ := m.Create("/d/late")
	mustWrite(t, h, "z")
	h.Sync()
	mustNotExist(t, m.CrashClone(), "/d/late")
	// A subdirectory is durable at once, its files follow their own rule.
	if err := m.MkdirAll("/d/sub/deeper", 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := m.CrashClone().List("/d/sub")
	if err != nil || len(names) != 1 || names[0] != "deeper" {
		t.Fatalf("list after crash: %v %v", names, err)
	}
}

func TestCrashRenameAndRemoveNeedDirSync(t *testing.T) {
	m := NewMem()
	newSyncedFile(t, m, "/d", "old", "v1")
	newSyncedFile(t, m, "/d", "target", "v0")
	if err := m.Rename("/d/old", "/d/target"); err != nil {
		t.Fatal(err)
	}
	c := m.CrashClone()
	if got := mustRead(t, c, "/d/old"); got != "v1" {
		t.Fatalf("unsynced rename: old=%q", got)
	}
	if got := mustRead(t, c, "/d/target"); got != "v0" {
		t.Fatalf("unsynced rename: target=%q", got)
	}
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	c = m.CrashClone()
	mustNotExist(t, c, "/d/old")
	if got := mustRead(t, c, "/d/target"); got != "v1" {
		t.Fatalf("synced rename: target=%q", got)
	}
	if err := m.Remove("/d/target"); err != nil {
		t.Fatal(err)
	}
	mustNotExist(t, m, "/d/target")
	if got := mustRead(t, m.CrashClone(), "/d/target"); got != "v1" {
		t.Fatalf("unsynced remove: %q", got)
	}
	m.SyncDir("/d")
	mustNotExist(t, m.CrashClone(), "/d/target")
}

func TestRemovedFileStaysReadableThroughOpenHandle(t *testing.T) {
	m := NewMem()
	newSyncedFile(t, m, "/d", "a", "data")
	r, err := m.Open("/d/a")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Remove("/d/a"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := r.ReadAt(buf, 0); err != nil || string(buf) != "data" {
		t.Fatalf("read after remove: %q %v", buf, err)
	}
	if _, err := r.Write([]byte("x")); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("write to read-only handle: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadAt(buf, 0); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
}

func TestCrashInPlaceInvalidatesHandles(t *testing.T) {
	m := NewMem()
	f := newSyncedFile(t, m, "/d", "a", "abc")
	mustWrite(t, f, "def")
	m.Crash()
	if _, err := f.Write([]byte("x")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("write after crash: %v", err)
	}
	if got := mustRead(t, m, "/d/a"); got != "abc" {
		t.Fatalf("after crash: %q", got)
	}
}

func TestCrashCloneWithTornTail(t *testing.T) {
	m := NewMem()
	f := newSyncedFile(t, m, "/d", "a", "0123")
	mustWrite(t, f, "456789")
	var gotSynced, gotCurrent int
	c := m.CrashCloneWith(CrashOptions{KeepUnsynced: func(name string, synced, current int) int {
		if name != "/d/a" {
			t.Errorf("name %q", name)
		}
		gotSynced, gotCurrent = synced, current
		return 3
	}})
	if gotSynced != 4 || gotCurrent != 10 {
		t.Fatalf("KeepUnsynced got (%d, %d)", gotSynced, gotCurrent)
	}
	if got := mustRead(t, c, "/d/a"); got != "0123456" {
		t.Fatalf("torn clone: %q", got)
	}
	// Clamped to what exists.
	c2 := m.CrashCloneWith(CrashOptions{KeepUnsynced: func(string, int, int) int { return 100 }})
	if got := mustRead(t, c2, "/d/a"); got != "0123456789" {
		t.Fatalf("clamped: %q", got)
	}
	// What the crash kept is on the disk: a second crash keeps it.
	if got := mustRead(t, c.CrashClone(), "/d/a"); got != "0123456" {
		t.Fatalf("crash of the torn clone: %q", got)
	}
}

// Unsynced changes below the synced size (a direct-I/O writer rewriting
// its last block) are kept, or not, from the first byte that differs.
func TestCrashCloneWithOverwrite(t *testing.T) {
	m := NewMem()
	f := newSyncedFile(t, m, "/d", "a", "0123")
	if _, err := f.WriteAt([]byte("01xyz"), 0); err != nil { // same "01", then changes
		t.Fatal(err)
	}
	var gotFrom, gotCurrent int
	keep := func(n int) CrashOptions {
		return CrashOptions{KeepUnsynced: func(_ string, from, current int) int {
			gotFrom, gotCurrent = from, current
			return n
		}}
	}
	for _, c := range []struct {
		keep int
		want string
	}{{0, "0123"}, {1, "01x3"}, {2, "01xy"}, {3, "01xyz"}} {
		if got := mustRead(t, m.CrashCloneWith(keep(c.keep)), "/d/a"); got != c.want {
			t.Errorf("keep %d: %q, want %q", c.keep, got, c.want)
		}
		if gotFrom != 2 || gotCurrent != 5 {
			t.Fatalf("KeepUnsynced got (%d, %d), want (2, 5)", gotFrom, gotCurrent)
		}
	}
}

func TestMemReadAtEOFAndDiskSpace(t *testing.T) {
	m := NewMem()
	m.SetCapacity(100)
	f := newSyncedFile(t, m, "/d", "a", "0123456789")
	buf := make([]byte, 4)
	n, err := f.ReadAt(buf, 8)
	if n != 2 || err != io.EOF || !bytes.Equal(buf[:2], []byte("89")) {
		t.Fatalf("ReadAt past end: %d %v %q", n, err, buf[:n])
	}
	ds, err := m.DiskSpace("/d")
	if err != nil || ds.Total != 100 || ds.Free != 90 {
		t.Fatalf("DiskSpace: %+v %v", ds, err)
	}
	if got := ds.UsedFraction(); got != 0.1 {
		t.Fatalf("UsedFraction %v", got)
	}
	if err := m.Remove("/d"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("remove non-empty dir: %v", err)
	}
	if _, err := m.Create("/nodir/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("create in missing dir: %v", err)
	}
}
