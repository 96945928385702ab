package fsblob

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stratamesh/strata/tiered/blob"
	"github.com/stratamesh/strata/tiered/blob/blobtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := New(filepath.Join(t.TempDir(), "tier"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store {
		s := newStore(t)
		t.Cleanup(func() { checkNoTemp(t, s.Dir()) })
		return s
	})
}

// files lists every file and directory under dir, relative, slash form.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			r, _ := filepath.Rel(dir, p)
			if d.IsDir() {
				r += "/"
			}
			out = append(out, filepath.ToSlash(r))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func checkNoTemp(t *testing.T, dir string) {
	t.Helper()
	for _, f := range files(t, dir) {
		if strings.Contains(f, blob.ReservedPrefix) {
			t.Errorf("temporary file left behind: %s", f)
		}
	}
}

type brokenReader struct{ n int }

func (b *brokenReader) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	k := min(len(p), b.n)
	b.n -= k
	return k, nil
}

func TestFailedPutRemovesTempAndKeepsDirTidy(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	err := s.Put(ctx, "x/y/z", &brokenReader{n: 5000}, -1)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Put: %v", err)
	}
	checkNoTemp(t, s.Dir())
	if err := s.Put(ctx, "x/y/z", strings.NewReader("ok"), 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "x/y/z"); err != nil {
		t.Fatal(err)
	}
	if got := files(t, s.Dir()); len(got) != 0 {
		t.Fatalf("after deleting the only object the directory holds %q, want nothing", got)
	}
}

func TestTempFilesNeverListed(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if err := s.Put(ctx, "d/obj", strings.NewReader("a"), 1); err != nil {
		t.Fatal(err)
	}
	// What an interrupted Put leaves: a temporary file beside the object.
	tmp := filepath.Join(s.Dir(), "d", blob.ReservedPrefix+"tmp-123")
	if err := os.WriteFile(tmp, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	as, err := s.List(ctx, "")
	if err != nil || !slices.Equal(names(as), []string{"d/obj"}) {
		t.Fatalf("List = %q, %v; want just d/obj", names(as), err)
	}
	// SweepTemp removes only old ones.
	if n, err := s.SweepTemp(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("SweepTemp(1h) = %d, %v; want 0", n, err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(tmp, old, old); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SweepTemp(ctx, time.Hour); err != nil || n != 1 {
		t.Fatalf("SweepTemp(1h) = %d, %v; want 1", n, err)
	}
	checkNoTemp(t, s.Dir())
}

func names(as []blob.Attrs) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Name)
	}
	return out
}

func TestObjectAndPrefixConflict(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if err := s.Put(ctx, "a", strings.NewReader("a"), 1); err != nil {
		t.Fatal(err)
	}
	err := s.Put(ctx, "a/b", strings.NewReader("b"), 1)
	if err == nil || !strings.Contains(err.Error(), "is an object") {
		t.Fatalf("Put(a/b) over object a: %v, want a clear error", err)
	}
	if err := s.Put(ctx, "c/d", strings.NewReader("d"), 1); err != nil {
		t.Fatal(err)
	}
	err = s.Put(ctx, "c", strings.NewReader("c"), 1)
	if err == nil || !strings.Contains(err.Error(), "objects exist under") {
		t.Fatalf("Put(c) over prefix c/: %v, want a clear error", err)
	}
	checkNoTemp(t, s.Dir())
	as, err := s.List(ctx, "")
	if err != nil || !slices.Equal(names(as), []string{"a", "c/d"}) {
		t.Fatalf("List = %q, %v", names(as), err)
	}
}

func TestReaderSurvivesDeleteAndOverwrite(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	data := blobtest.Data("v1", 10000)
	if err := s.Put(ctx, "o", strings.NewReader(string(data)), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	rc, err := s.NewRangeReader(ctx, "o", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := s.Put(ctx, "o", strings.NewReader("v2"), 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "o"); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	if err != nil || string(got) != string(data) {
		t.Fatalf("read %d bytes, %v; want the old %d", len(got), err, len(data))
	}
}

func TestNewRejectsBadDir(t *testing.T) {
	if _, err := New(""); !errors.Is(err, blob.ErrInvalidConfig) {
		t.Fatalf("New(\"\"): %v", err)
	}
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(f); err == nil {
		t.Fatalf("New(a file) succeeded")
	}
}

func TestListDoesNotEscapeRoot(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	s, err := New(filepath.Join(parent, "tier"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "outside"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../", "../outside", "a/../../", "/", "//"} {
		as, err := s.List(ctx, p)
		if err != nil || len(as) != 0 {
			t.Fatalf("List(%q) = %q, %v; want nothing", p, names(as), err)
		}
	}
}
