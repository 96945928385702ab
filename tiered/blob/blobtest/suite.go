package blobtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stratamesh/strata/tiered/blob"
)

// MiB is 1<<20 bytes.
const MiB = 1 << 20

// LargeSize is the size of the suite's large objects: 6 MiB, more than
// one 5 MiB S3 part, so a driver configured with that part size runs
// its multipart path.
const LargeSize = 6 * MiB

// ManyObjects is how many objects the paging test lists: more than one
// 1,000-key page of S3 and GCS.
const ManyObjects = 1100

// opTimeout bounds each sub-test's operations.
const opTimeout = 60 * time.Second

// Run runs the conformance suite. newStore must return a new, empty
// store each time it is called (the suite calls it once per sub-test and
// closes every store it gets, before newStore's own t.Cleanup run).
func Run(t *testing.T, newStore func(t *testing.T) blob.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s blob.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"RangedReads", testRangedReads},
		{"Stat", testStat},
		{"NotFound", testNotFound},
		{"List", testList},
		{"ListMany", testListMany},
		{"Delete", testDelete},
		{"Overwrite", testOverwrite},
		{"InvalidNames", testInvalidNames},
		{"InvalidRanges", testInvalidRanges},
		{"SizeMismatch", testSizeMismatch},
		{"FailingReader", testFailingReader},
		{"Concurrent", testConcurrent},
		{"ConcurrentOverwrite", testConcurrentOverwrite},
		{"ContextCancelled", testContextCancelled},
		{"CancelMidPut", testCancelMidPut},
		{"Closed", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// ctxFor returns a context bounded by opTimeout, cancelled when t ends.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// Data returns n pseudo-random bytes determined by seed and n.
func Data(seed string, n int) []byte {
	var key [32]byte
	h := fnv.New64a()
	h.Write([]byte(seed))
	binary.LittleEndian.PutUint64(key[:], h.Sum64())
	binary.LittleEndian.PutUint64(key[8:], uint64(n))
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(key).Read(b)
	return b
}

// unsized hides a reader's other methods (WriterTo, Len, Seek) so a
// driver sees a plain stream of unknown length.
type unsized struct{ r io.Reader }

func (u unsized) Read(p []byte) (int, error) { return u.r.Read(p) }

func put(t *testing.T, s blob.Store, name string, data []byte) {
	t.Helper()
	if err := s.Put(ctxFor(t), name, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", name, len(data), err)
	}
}

// read reads name[off:off+length] whole.
func read(t *testing.T, s blob.Store, name string, off, length int64) ([]byte, error) {
	t.Helper()
	rc, err := s.NewRangeReader(ctxFor(t), name, off, length)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return b, fmt.Errorf("reading %q at %d+%d: %w", name, off, length, err)
	}
	return b, nil
}

func mustRead(t *testing.T, s blob.Store, name string, off, length int64) []byte {
	t.Helper()
	b, err := read(t, s, name, off, length)
	if err != nil {
		t.Fatalf("read %q at %d+%d: %v", name, off, length, err)
	}
	return b
}

func wantBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: got %d bytes, want %d (first difference at byte %d)", what, len(got), len(want), i)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func wantMissing(t *testing.T, s blob.Store, name string) {
	t.Helper()
	_, err := s.Stat(ctxFor(t), name)
	wantErr(t, fmt.Sprintf("Stat(%q) of an object that must not exist", name), err, blob.ErrNotFound)
	as, err := s.List(ctxFor(t), name)
	if err != nil {
		t.Fatalf("List(%q): %v", name, err)
	}
	for _, a := range as {
		if a.Name == name {
			t.Fatalf("List(%q) shows %q (%d bytes), which must not exist", name, name, a.Size)
		}
	}
}

func names(as []blob.Attrs) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Name
	}
	return out
}
