package blobtest

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratamesh/strata/tiered/blob"
)

func testRoundTrip(t *testing.T, s blob.Store) {
	for _, size := range []int{0, 1, 4097, LargeSize} {
		for _, known := range []bool{true, false} {
			name := fmt.Sprintf("rt/%d-known-%v", size, known)
			data := Data(name, size)
			var err error
			if known {
				err = s.Put(ctxFor(t), name, bytes.NewReader(data), int64(size))
			} else {
				err = s.Put(ctxFor(t), name, unsized{bytes.NewReader(data)}, -1)
			}
			if err != nil {
				t.Fatalf("Put(%q): %v", name, err)
			}
			wantBytes(t, "read back "+name, mustRead(t, s, name, 0, -1), data)
			a, err := s.Stat(ctxFor(t), name)
			if err != nil {
				t.Fatalf("Stat(%q): %v", name, err)
			}
			if a.Name != name || a.Size != int64(size) {
				t.Fatalf("Stat(%q) = %+v, want name %q size %d", name, a, name, size)
			}
			if a.Modified.IsZero() || time.Since(a.Modified) > time.Hour || time.Until(a.Modified) > time.Hour {
				t.Fatalf("Stat(%q).Modified = %v, want about now", name, a.Modified)
			}
		}
	}
}

func testRangedReads(t *testing.T, s blob.Store) {
	const size = 10000
	data := Data("ranged", size)
	put(t, s, "ranged", data)
	put(t, s, "empty", nil)
	cases := []struct {
		name        string
		off, length int64
		want        []byte
	}{
		{"ranged", 0, 10, data[:10]},
		{"ranged", 0, -1, data},
		{"ranged", 0, size, data},
		{"ranged", 1, -1, data[1:]},
		{"ranged", 100, 50, data[100:150]},
		{"ranged", 4321, 1234, data[4321 : 4321+1234]},
		{"ranged", size - 10, 10, data[size-10:]},
		{"ranged", size - 10, 100, data[size-10:]}, // cut at the end
		{"ranged", size - 1, -1, data[size-1:]},
		{"ranged", size, -1, nil}, // at the end: empty
		{"ranged", size, 5, nil},
		{"ranged", 5000, 0, nil},
		{"ranged", 0, 0, nil},
		{"empty", 0, -1, nil},
		{"empty", 0, 0, nil},
		{"empty", 0, 10, nil},
	}
	for _, c := range cases {
		got := mustRead(t, s, c.name, c.off, c.length)
		wantBytes(t, fmt.Sprintf("%s at %d+%d", c.name, c.off, c.length), got, c.want)
	}
	// A large object, across what would be part boundaries.
	big := Data("big", LargeSize)
	if err := s.Put(ctxFor(t), "big", unsized{bytes.NewReader(big)}, -1); err != nil {
		t.Fatalf("Put(big): %v", err)
	}
	for _, r := range [][2]int64{{5*MiB - 100, 200}, {0, LargeSize}, {LargeSize - 1, -1}, {3 * MiB, -1}} {
		got := mustRead(t, s, "big", r[0], r[1])
		end := int64(LargeSize)
		if r[1] >= 0 {
			end = r[0] + r[1]
		}
		wantBytes(t, fmt.Sprintf("big at %d+%d", r[0], r[1]), got, big[r[0]:end])
	}
	// Partial reads: a reader may be read in small steps and closed early.
	rc, err := s.NewRangeReader(ctxFor(t), "ranged", 10, 100)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(rc, buf); err != nil {
		t.Fatalf("reading 7 bytes: %v", err)
	}
	wantBytes(t, "first 7 bytes at 10", buf, data[10:17])
	if err := rc.Close(); err != nil {
		t.Fatalf("closing a half-read reader: %v", err)
	}
}

func testInvalidRanges(t *testing.T, s blob.Store) {
	put(t, s, "r", Data("r", 100))
	put(t, s, "empty", nil)
	for _, c := range []struct {
		name        string
		off, length int64
	}{
		{"r", -1, 5}, {"r", -1, -1}, {"r", 101, -1}, {"r", 101, 1}, {"r", 1000, 0},
		{"empty", 1, -1}, {"empty", 1, 0}, {"empty", -5, 0},
	} {
		rc, err := s.NewRangeReader(ctxFor(t), c.name, c.off, c.length)
		if err == nil {
			rc.Close()
		}
		wantErr(t, fmt.Sprintf("read %s at %d+%d", c.name, c.off, c.length), err, blob.ErrInvalidRange)
	}
}

func testStat(t *testing.T, s blob.Store) {
	_, err := s.Stat(ctxFor(t), "nope")
	wantErr(t, "Stat of a missing object", err, blob.ErrNotFound)
	put(t, s, "dir/obj", Data("x", 123))
	a, err := s.Stat(ctxFor(t), "dir/obj")
	if err != nil || a.Size != 123 || a.Name != "dir/obj" {
		t.Fatalf("Stat = %+v, %v; want dir/obj, 123 bytes", a, err)
	}
	// A prefix of an object is not an object.
	_, err = s.Stat(ctxFor(t), "dir")
	wantErr(t, "Stat of a prefix", err, blob.ErrNotFound)
}

func testNotFound(t *testing.T, s blob.Store) {
	put(t, s, "p/q/r", Data("pqr", 10))
	for _, name := range []string{"missing", "p", "p/q", "p/q/r/s", "p/q/rr", "q/r"} {
		_, err := s.Stat(ctxFor(t), name)
		wantErr(t, fmt.Sprintf("Stat(%q)", name), err, blob.ErrNotFound)
		for _, r := range [][2]int64{{0, -1}, {0, 10}, {5, -1}, {0, 0}, {100, 1}} {
			rc, err := s.NewRangeReader(ctxFor(t), name, r[0], r[1])
			if err == nil {
				rc.Close()
			}
			wantErr(t, fmt.Sprintf("NewRangeReader(%q, %d, %d)", name, r[0], r[1]), err, blob.ErrNotFound)
		}
		if err := s.Delete(ctxFor(t), name); err != nil {
			t.Fatalf("Delete(%q) of a missing object: %v", name, err)
		}
	}
	// The deletes of prefixes removed nothing.
	wantBytes(t, "p/q/r", mustRead(t, s, "p/q/r", 0, -1), Data("pqr", 10))
}

func testList(t *testing.T, s blob.Store) {
	objs := []string{"a/b/c", "a/bc", "a.c", "a/b.d", "ab", "b/x", "a/d", "c"}
	for i, n := range objs {
		put(t, s, n, Data(n, i*10))
	}
	cases := []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a.c", "a/b.d", "a/b/c", "a/bc", "a/d", "ab", "b/x", "c"}},
		{"a", []string{"a.c", "a/b.d", "a/b/c", "a/bc", "a/d", "ab"}},
		{"a/", []string{"a/b.d", "a/b/c", "a/bc", "a/d"}},
		{"a/b", []string{"a/b.d", "a/b/c", "a/bc"}},
		{"a/b/", []string{"a/b/c"}},
		{"a/b/c", []string{"a/b/c"}},
		{"a/b/c/", nil},
		{"b/", []string{"b/x"}},
		{"b/x/y", nil},
		{"c", []string{"c"}},
		{"zz", nil},
		{"zz/", nil},
	}
	for _, c := range cases {
		as, err := s.List(ctxFor(t), c.prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", c.prefix, err)
		}
		if got := names(as); !slices.Equal(got, c.want) {
			t.Fatalf("List(%q) = %q, want %q", c.prefix, got, c.want)
		}
		for _, a := range as {
			i := slices.Index(objs, a.Name)
			if a.Size != int64(i*10) || a.Modified.IsZero() {
				t.Fatalf("List(%q): %+v, want size %d and a time", c.prefix, a, i*10)
			}
		}
	}
}

func testListMany(t *testing.T, s blob.Store) {
	want := make([]string, ManyObjects)
	for i := range want {
		want[i] = fmt.Sprintf("many/%04d", i)
	}
	parallel(t, 8, len(want), func(i int) error {
		return s.Put(ctxFor(t), want[i], strings.NewReader(want[i]), int64(len(want[i])))
	})
	put(t, s, "manz", []byte("not listed"))
	put(t, s, "man", []byte("not listed"))
	as, err := s.List(ctxFor(t), "many/")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if got := names(as); !slices.Equal(got, want) {
		t.Fatalf("List(many/) returned %d names (first %q), want %d", len(got), got[:min(3, len(got))], len(want))
	}
	for _, a := range as {
		if a.Size != int64(len(a.Name)) {
			t.Fatalf("List: %+v, want size %d", a, len(a.Name))
		}
	}
	all, err := s.List(ctxFor(t), "")
	if err != nil || len(all) != ManyObjects+2 {
		t.Fatalf("List(\"\") = %d objects, %v; want %d", len(all), err, ManyObjects+2)
	}
}

func testDelete(t *testing.T, s blob.Store) {
	put(t, s, "d/e/f", Data("f", 10))
	put(t, s, "d/e/g", Data("g", 10))
	for range 2 { // the second time the object is missing: no error
		if err := s.Delete(ctxFor(t), "d/e/f"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		wantMissing(t, s, "d/e/f")
	}
	wantBytes(t, "d/e/g untouched", mustRead(t, s, "d/e/g", 0, -1), Data("g", 10))
	if err := s.Delete(ctxFor(t), "d/e/g"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := s.Delete(ctxFor(t), "never/was"); err != nil {
		t.Fatalf("Delete of a never-existing object: %v", err)
	}
	as, err := s.List(ctxFor(t), "")
	if err != nil || len(as) != 0 {
		t.Fatalf("List after deleting everything = %q, %v", names(as), err)
	}
	// The same names can be used again (fs removed the empty directories).
	put(t, s, "d/e/f", Data("f2", 3))
	wantBytes(t, "d/e/f again", mustRead(t, s, "d/e/f", 0, -1), Data("f2", 3))
}

func testOverwrite(t *testing.T, s blob.Store) {
	long, short := Data("long", 5000), Data("short", 7)
	put(t, s, "o", long)
	put(t, s, "o", short)
	wantBytes(t, "after overwrite", mustRead(t, s, "o", 0, -1), short)
	a, err := s.Stat(ctxFor(t), "o")
	if err != nil || a.Size != int64(len(short)) {
		t.Fatalf("Stat after overwrite = %+v, %v; want %d bytes", a, err, len(short))
	}
	if err := s.Put(ctxFor(t), "o", unsized{bytes.NewReader(long)}, -1); err != nil {
		t.Fatal(err)
	}
	wantBytes(t, "after second overwrite", mustRead(t, s, "o", 0, -1), long)
	as, err := s.List(ctxFor(t), "")
	if err != nil || !slices.Equal(names(as), []string{"o"}) {
		t.Fatalf("List = %q, %v; want just o", names(as), err)
	}
}

func testInvalidNames(t *testing.T, s blob.Store) {
	bad := []string{
		"", "/a", "a/", "/", "a//b", "..", ".", "../a", "a/..", "a/../b", "a/./b",
		"a\x00b", "\x00", "a\nb", "a\rb", "a\x7fb", "\xff\xfe",
		blob.ReservedPrefix + "tmp-1", "x/" + blob.ReservedPrefix + "y",
		strings.Repeat("n", blob.MaxNameLen+1),
	}
	for _, name := range bad {
		err := s.Put(ctxFor(t), name, strings.NewReader("x"), 1)
		wantErr(t, fmt.Sprintf("Put(%q)", name), err, blob.ErrInvalidName)
		_, err = s.Stat(ctxFor(t), name)
		wantErr(t, fmt.Sprintf("Stat(%q)", name), err, blob.ErrInvalidName)
		rc, err := s.NewRangeReader(ctxFor(t), name, 0, -1)
		if err == nil {
			rc.Close()
		}
		wantErr(t, fmt.Sprintf("NewRangeReader(%q)", name), err, blob.ErrInvalidName)
		err = s.Delete(ctxFor(t), name)
		wantErr(t, fmt.Sprintf("Delete(%q)", name), err, blob.ErrInvalidName)
	}
	as, err := s.List(ctxFor(t), "")
	if err != nil || len(as) != 0 {
		t.Fatalf("List after invalid puts = %q, %v; want nothing", names(as), err)
	}
	_, err = s.List(ctxFor(t), "a\x00")
	wantErr(t, "List with NUL in the prefix", err, blob.ErrInvalidName)
	// Unusual but valid names round-trip.
	for _, name := range []string{"a b/c d", "ünï/cödé", "x%2Fy", "q?r#s", "+plus&amp", "..a/b..", "a/.hidden", strings.Repeat("n", 200)} {
		put(t, s, name, []byte(name))
		wantBytes(t, name, mustRead(t, s, name, 0, -1), []byte(name))
		as, err := s.List(ctxFor(t), name)
		if err != nil || len(as) != 1 || as[0].Name != name {
			t.Fatalf("List(%q) = %q, %v", name, names(as), err)
		}
	}
}
