package vfs

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
	"unsafe"
)

func TestAlignedBuffer(t *testing.T) {
	for _, n := range []int{0, 1, 4095, 4096, 4097, 1 << 20} {
		b := AlignedBuffer(n)
		if len(b) != AlignUp(n) || cap(b) != len(b) {
			t.Fatalf("AlignedBuffer(%d): len %d cap %d, want %d", n, len(b), cap(b), AlignUp(n))
		}
		if n > 0 && uintptr(unsafe.Pointer(&b[0]))%DirectAlignment != 0 {
			t.Fatalf("AlignedBuffer(%d) is not aligned", n)
		}
	}
	if AlignDown(8191) != 4096 || AlignUp(4097) != 8192 || AlignUp(0) != 0 {
		t.Fatal("AlignUp/AlignDown")
	}
}

// directContract writes through a direct handle of fsys: aligned writes
// land and read back through another handle; misaligned ones fail and
// change nothing.
func directContract(t *testing.T, fsys FS, name string) {
	t.Helper()
	f, direct, err := CreateDirect(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !direct {
		t.Fatalf("%s: CreateDirect fell back to a buffered file", name)
	}
	buf := AlignedBuffer(2 * DirectAlignment)
	for i := range buf {
		buf[i] = byte(i % 251)
	}
	if _, err := f.WriteAt(buf, DirectAlignment); err != nil {
		t.Fatalf("aligned write: %v", err)
	}
	for _, bad := range []struct {
		what string
		p    []byte
		off  int64
	}{
		{"offset", buf[:DirectAlignment], 100},
		{"length", buf[:100], 0},
		{"address", buf[1 : 1+DirectAlignment], 0},
	} {
		if _, err := f.WriteAt(bad.p, bad.off); err == nil {
			t.Errorf("write with a misaligned %s succeeded", bad.what)
		}
	}
	if err := SyncData(f); err != nil {
		t.Fatal(err)
	}
	r, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make([]byte, 3*DirectAlignment)
	if _, err := r.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:DirectAlignment], make([]byte, DirectAlignment)) || !bytes.Equal(got[DirectAlignment:], buf) {
		t.Fatal("read back differs from what was written")
	}
}

func TestMemFSDirect(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	directContract(t, m, "/d/a")

	m.SetDirectIO(false)
	f, direct, err := CreateDirect(m, "/d/b")
	if err != nil || direct {
		t.Fatalf("CreateDirect with direct I/O off: direct=%v err=%v", direct, err)
	}
	if _, err := f.WriteAt([]byte("x"), 3); err != nil {
		t.Fatalf("buffered fallback refused a misaligned write: %v", err)
	}
	f.Close()
}

func TestErrorFSDirect(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	e := NewErrorFS(m, FailAll(OnKind(OpCreate), boom))
	if _, _, err := CreateDirect(e, "/d/a"); !errors.Is(err, boom) {
		t.Fatalf("injected create error: %v", err)
	}
	e.SetInjector(nil)
	directContract(t, e, "/d/a")

	// Over an FS without direct I/O, ErrorFS falls back too.
	plain := NewErrorFS(struct{ FS }{m}, nil)
	if _, direct, err := CreateDirect(plain, "/d/c"); err != nil || direct {
		t.Fatalf("CreateDirect over an FS without it: direct=%v err=%v", direct, err)
	}
}

// On the machine's own file system: O_DIRECT where the file system has it,
// a clean fallback where it does not.
func TestOSDirect(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	dc, ok := Default.(DirectCreator)
	if !ok {
		t.Fatal("the OS file system does not implement DirectCreator")
	}
	f, err := dc.CreateDirect(name)
	if errors.Is(err, ErrDirectUnsupported) {
		// e.g. tmpfs: CreateDirect must fall back to a working file.
		f, direct, err := CreateDirect(Default, name)
		if err != nil || direct {
			t.Fatalf("fallback: direct=%v err=%v", direct, err)
		}
		f.Close()
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	directContract(t, Default, name)
}
