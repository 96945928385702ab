package storage

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stratamesh/strata/internal/vfs"
)

// The entry log writer, with direct I/O and without: records of every
// size (a few bytes to past the write buffer) appended across several
// syncs read back at the offsets append returned, and the log's header
// checks. MemFS's direct files refuse misaligned writes, as O_DIRECT does,
// so the direct case also proves every write is whole aligned blocks.
func TestLogWriterDirectAndBuffered(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			m := vfs.NewMem()
			m.SetDirectIO(direct)
			if err := m.MkdirAll("/logs", 0o755); err != nil {
				t.Fatal(err)
			}
			w, err := createLogWriter(m, "/logs", 7, false, true, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if w.direct != direct {
				t.Fatalf("writer direct=%v, want %v", w.direct, direct)
			}
			sizes := []int{1, 100, 4000, 4096, 5000, 1, logWriteBuffer - 3000, 2*logWriteBuffer + 17, 3, 9000}
			type rec struct {
				off  int64
				data []byte
			}
			var recs []rec
			for round := range 3 {
				for i, n := range sizes {
					data := encodeEntry(int64(round), int64(i), -1, bytes.Repeat([]byte{byte(round*len(sizes) + i)}, n))
					off, err := w.append(int64(round), data)
					if err != nil {
						t.Fatalf("append %d bytes: %v", n, err)
					}
					recs = append(recs, rec{off, data})
					if i%4 == 3 {
						if err := w.sync(); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := w.sync(); err != nil {
					t.Fatal(err)
				}
			}
			if w.direct != direct {
				t.Fatalf("after writing, direct=%v (a refused write fell back?)", w.direct)
			}
			if err := w.close(); err != nil {
				t.Fatal(err)
			}
			f, err := m.Open(filepath.Join("/logs", idFileName(7, entryLogExt)))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			hdr := make([]byte, logHeaderSize)
			if _, err := readFull(f, hdr, 0); err != nil || checkLogHeader(hdr, 7) != nil {
				t.Fatalf("header: %v %v", err, checkLogHeader(hdr, 7))
			}
			for i, r := range recs {
				got := make([]byte, len(r.data))
				if _, err := readFull(f, got, r.off); err != nil {
					t.Fatalf("record %d at %d: %v", i, r.off, err)
				}
				if !bytes.Equal(got, r.data) {
					t.Fatalf("record %d at %d differs", i, r.off)
				}
			}
			last := recs[len(recs)-1]
			if w.meta.size != last.off+int64(len(last.data)) {
				t.Fatalf("meta.size %d, want %d", w.meta.size, last.off+int64(len(last.data)))
			}
			st, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			if st.Size() < w.meta.size || st.Size()-w.meta.size >= vfs.DirectAlignment {
				t.Fatalf("file of %d bytes for a log of %d", st.Size(), w.meta.size)
			}
		})
	}
}

// A file system that opens with O_DIRECT but refuses the writes (EINVAL:
// its blocks are larger than DirectAlignment) gets the rest of the log
// through the page cache; nothing written is lost.
func TestLogWriterLeavesDirectOnEINVAL(t *testing.T) {
	m := vfs.NewMem()
	if err := m.MkdirAll("/logs", 0o755); err != nil {
		t.Fatal(err)
	}
	efs := vfs.NewErrorFS(m, vfs.NewFailNth(1, vfs.OnKind(vfs.OpWrite), syscall.EINVAL))
	w, err := createLogWriter(efs, "/logs", 3, false, true, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if !w.direct {
		t.Fatal("not direct to begin with")
	}
	var offs []int64
	var recs [][]byte
	for i := range 50 {
		rec := encodeEntry(1, int64(i), -1, bytes.Repeat([]byte{byte(i)}, 3000))
		off, err := w.append(1, rec)
		if err != nil {
			t.Fatal(err)
		}
		offs, recs = append(offs, off), append(recs, rec)
		if i%10 == 9 {
			if err := w.sync(); err != nil {
				t.Fatalf("sync %d: %v", i, err)
			}
		}
	}
	if w.direct {
		t.Fatal("still direct after EINVAL")
	}
	w.close()
	f, err := m.Open(filepath.Join("/logs", idFileName(3, entryLogExt)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, off := range offs {
		got := make([]byte, len(recs[i]))
		if _, err := readFull(f, got, off); err != nil || !bytes.Equal(got, recs[i]) {
			t.Fatalf("record %d at %d: %v", i, off, err)
		}
	}
}

// Direct I/O is an option: by default entry logs go through the page
// cache even where the file system could do without it.
func TestEntryLogDirectIOIsOptIn(t *testing.T) {
	if DefaultConfig().EntryLogDirectIO {
		t.Fatal("EntryLogDirectIO is on by default")
	}
	for _, want := range []bool{false, true} {
		cfg := testConfig(vfs.NewMem()) // MemFS can do direct I/O
		cfg.EntryLogDirectIO = want
		e := open(t, cfg)
		addMany(t, e, 1, 0, 10)
		flush(t, e)
		if e.cur.direct != want {
			t.Fatalf("EntryLogDirectIO=%v: the log is direct=%v", want, e.cur.direct)
		}
		checkEntry(t, e, 1, 9)
		e.Close()
	}
}
