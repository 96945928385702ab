package blobtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stratamesh/strata/tiered/blob"
)

// errBroken is what failingReader returns.
var errBroken = errors.New("blobtest: reader broke")

// failingReader yields n bytes of data, then errBroken.
type failingReader struct {
	data []byte
	n    int
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errBroken
	}
	k := copy(p[:min(len(p), f.n)], f.data)
	f.data, f.n = f.data[k:], f.n-k
	return k, nil
}

func testSizeMismatch(t *testing.T, s blob.Store) {
	put(t, s, "kept", Data("kept", 50))
	for _, c := range []struct {
		name       string
		body, size int
	}{
		{"short", 5, 10}, {"long", 10, 5}, {"empty-body", 0, 1}, {"zero-size", 3, 0},
		{"kept", 10, 20}, {"kept", 20, 10},
	} {
		err := s.Put(ctxFor(t), c.name, bytes.NewReader(Data("b", c.body)), int64(c.size))
		wantErr(t, fmt.Sprintf("Put(%q) of %d bytes with size %d", c.name, c.body, c.size), err, blob.ErrSizeMismatch)
		if c.name != "kept" {
			wantMissing(t, s, c.name)
		}
	}
	wantBytes(t, "kept after failed overwrites", mustRead(t, s, "kept", 0, -1), Data("kept", 50))
}

func testFailingReader(t *testing.T, s blob.Store) {
	put(t, s, "kept", Data("kept", 1000))
	half := LargeSize + MiB // past one 5 MiB part: S3 must abort a multipart upload
	for _, c := range []struct {
		name     string
		at, size int
	}{
		{"small-known", 100, 1000},
		{"small-unknown", 100, -1},
		{"first-byte", 0, -1},
		{"large-known", half, 2 * half},
		{"large-unknown", half, -1},
		{"kept", 500, -1},
		{"kept", half, -1},
	} {
		r := &failingReader{data: Data(c.name, c.at), n: c.at}
		err := s.Put(ctxFor(t), c.name, r, int64(c.size))
		wantErr(t, fmt.Sprintf("Put(%q) with a reader failing at %d", c.name, c.at), err, errBroken)
		if c.name != "kept" {
			wantMissing(t, s, c.name)
		}
	}
	wantBytes(t, "kept after failed overwrites", mustRead(t, s, "kept", 0, -1), Data("kept", 1000))
	as, err := s.List(ctxFor(t), "")
	if err != nil || len(as) != 1 {
		t.Fatalf("List after failed puts = %q, %v; want just kept", names(as), err)
	}
}

// parallel runs fn(0..n-1) on workers goroutines and fails t on the
// first error.
func parallel(t *testing.T, workers, n int, fn func(i int) error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan int)
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("#%d: %w", i, err))
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func testConcurrent(t *testing.T, s blob.Store) {
	const writers, each = 8, 16
	parallel(t, writers, writers*each, func(i int) error {
		name := fmt.Sprintf("c/%d/%d", i%writers, i)
		data := Data(name, 100+i*37)
		if err := s.Put(ctxFor(t), name, bytes.NewReader(data), int64(len(data))); err != nil {
			return err
		}
		got, err := read(t, s, name, 0, -1)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, data) {
			return fmt.Errorf("%s: read back %d bytes, want %d", name, len(got), len(data))
		}
		if _, err := s.Stat(ctxFor(t), name); err != nil {
			return err
		}
		_, err = s.List(ctxFor(t), fmt.Sprintf("c/%d/", i%writers))
		return err
	})
	as, err := s.List(ctxFor(t), "c/")
	if err != nil || len(as) != writers*each {
		t.Fatalf("List = %d objects, %v; want %d", len(as), err, writers*each)
	}
}

// testConcurrentOverwrite checks atomicity: readers of an object being
// overwritten see one whole version or another, never a mix or a part.
func testConcurrentOverwrite(t *testing.T, s blob.Store) {
	version := func(v int) []byte { return bytes.Repeat([]byte{byte('A' + v)}, 20000+v*1000) }
	put(t, s, "hot", version(0))
	const writes, readers = 12, 4
	var wg sync.WaitGroup
	done := make(chan struct{})
	errc := make(chan error, readers+1)
	wg.Go(func() {
		defer close(done)
		for v := 1; v <= writes; v++ {
			if err := s.Put(ctxFor(t), "hot", bytes.NewReader(version(v)), -1); err != nil {
				errc <- err
				return
			}
		}
	})
	for range readers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					if i >= 3 {
						return
					}
				default:
				}
				got, err := read(t, s, "hot", 0, -1)
				if err != nil {
					errc <- err
					return
				}
				if len(got) == 0 || !bytes.Equal(got, version(int(got[0]-'A'))) {
					errc <- fmt.Errorf("read %d bytes that are no whole version", len(got))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	wantBytes(t, "last version", mustRead(t, s, "hot", 0, -1), version(writes))
}

func testContextCancelled(t *testing.T, s blob.Store) {
	put(t, s, "there", Data("there", 100))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Put(ctx, "new", strings.NewReader("abc"), 3)
	wantErr(t, "Put with a cancelled context", err, context.Canceled)
	wantMissing(t, s, "new")
	err = s.Put(ctx, "there", strings.NewReader("abc"), 3)
	wantErr(t, "overwriting Put with a cancelled context", err, context.Canceled)
	_, err = s.Stat(ctx, "there")
	wantErr(t, "Stat with a cancelled context", err, context.Canceled)
	rc, err := s.NewRangeReader(ctx, "there", 0, -1)
	if err == nil {
		rc.Close()
	}
	wantErr(t, "NewRangeReader with a cancelled context", err, context.Canceled)
	_, err = s.List(ctx, "")
	wantErr(t, "List with a cancelled context", err, context.Canceled)
	err = s.Delete(ctx, "there")
	wantErr(t, "Delete with a cancelled context", err, context.Canceled)
	wantBytes(t, "there after cancelled calls", mustRead(t, s, "there", 0, -1), Data("there", 100))
}

// cancellingReader cancels its context after the first n bytes and keeps
// yielding data.
type cancellingReader struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancellingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n -= k
	if c.n <= 0 {
		c.cancel()
	}
	return k, err
}

func testCancelMidPut(t *testing.T, s blob.Store) {
	for _, c := range []struct {
		name     string
		size, at int
	}{{"small", 4096, 1000}, {"large", 2 * LargeSize, LargeSize}} {
		for _, known := range []bool{true, false} {
			ctx, cancel := context.WithCancel(context.Background())
			data := Data(c.name, c.size)
			r := &cancellingReader{r: unsized{bytes.NewReader(data)}, n: c.at, cancel: cancel}
			size := int64(-1)
			if known {
				size = int64(c.size)
			}
			err := s.Put(ctx, c.name, r, size)
			cancel()
			wantErr(t, fmt.Sprintf("Put(%q) cancelled after %d bytes", c.name, c.at), err, context.Canceled)
			wantMissing(t, s, c.name)
		}
	}
}

func testClosed(t *testing.T, s blob.Store) {
	put(t, s, "x", []byte("x"))
	for range 2 {
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	ctx := ctxFor(t)
	wantErr(t, "Put after Close", s.Put(ctx, "y", strings.NewReader("y"), 1), blob.ErrClosed)
	_, err := s.Stat(ctx, "x")
	wantErr(t, "Stat after Close", err, blob.ErrClosed)
	_, err = s.NewRangeReader(ctx, "x", 0, -1)
	wantErr(t, "NewRangeReader after Close", err, blob.ErrClosed)
	_, err = s.List(ctx, "")
	wantErr(t, "List after Close", err, blob.ErrClosed)
	wantErr(t, "Delete after Close", s.Delete(ctx, "x"), blob.ErrClosed)
}
