package storage

import (
	"bytes"
	"fmt"
	"path/filepath"
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
			w, err := createLogWriter(m, "/logs", 7, false)
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
