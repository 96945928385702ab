package vfs

import (
	"errors"
	"io/fs"
	"path/filepath"
	"runtime"
	"testing"
)

func TestOSFS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	var fsys FS = Default
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "f")
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "hello")
	if err := StartWriteback(f, 0, 5); err != nil {
		t.Fatalf("start writeback: %v", err)
	}
	if err := Prefetch(f, 0, 1<<20); err != nil {
		t.Fatalf("prefetch: %v", err)
	}
	if _, ok := f.(Prefetcher); !ok && runtime.GOOS == "linux" {
		t.Fatal("an OS file is not a Prefetcher")
	}
	if err := SyncData(f); err != nil {
		t.Fatal(err)
	}
	if st, err := f.Stat(); err != nil || st.Size() != 5 {
		t.Fatalf("size after writeback: %v %v", st.Size(), err)
	}
	if err := f.Truncate(2); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Rename(name, name+"2"); err != nil {
		t.Fatal(err)
	}
	names, err := fsys.List(dir)
	if err != nil || len(names) != 1 || names[0] != "f2" {
		t.Fatalf("list: %v %v", names, err)
	}
	if got := mustRead(t, fsys, name+"2"); got != "he" {
		t.Fatalf("contents %q", got)
	}
	if _, err := fsys.OpenReadWrite(name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open missing: %v", err)
	}
	ds, err := fsys.DiskSpace(dir)
	if err != nil || ds.Total <= 0 || ds.Free < 0 || ds.Free > ds.Total {
		t.Fatalf("disk space: %+v %v", ds, err)
	}
	if err := fsys.Remove(name + "2"); err != nil {
		t.Fatal(err)
	}
}
