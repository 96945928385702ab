package memblob

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stratamesh/strata/tiered/blob"
	"github.com/stratamesh/strata/tiered/blob/blobtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store { return New() })
}

func TestFaultNthPut(t *testing.T) {
	ctx := context.Background()
	s := New()
	defer s.Close()
	boom := errors.New("boom")
	s.Inject(Fault{Op: OpPut, Nth: 2, Err: boom})
	for i, want := range []error{nil, boom, nil} {
		err := s.Put(ctx, "a", strings.NewReader("x"), 1)
		if !errors.Is(err, want) {
			t.Fatalf("put #%d: got %v, want %v", i+1, err, want)
		}
	}
	if got := s.Calls(OpPut); got != 3 {
		t.Fatalf("Calls(OpPut) = %d, want 3", got)
	}
}

func TestFaultPutAfterBytesStoresNothing(t *testing.T) {
	ctx := context.Background()
	s := New()
	defer s.Close()
	r := strings.NewReader(strings.Repeat("x", 100))
	s.Inject(Fault{Op: OpPut, AfterBytes: 40, Name: "obj"})
	if err := s.Put(ctx, "other", strings.NewReader("y"), 1); err != nil {
		t.Fatalf("put of another name: %v", err)
	}
	err := s.Put(ctx, "obj", r, 100)
	if !errors.Is(err, ErrInjected) {
		t.Fatalf("got %v, want ErrInjected", err)
	}
	if r.Len() != 60 {
		t.Fatalf("the failed put read %d bytes, want 40", 100-r.Len())
	}
	if _, err := s.Stat(ctx, "obj"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Stat after failed put: %v", err)
	}
}

func TestFaultReadMidStream(t *testing.T) {
	ctx := context.Background()
	s := New()
	defer s.Close()
	data := blobtest.Data("r", 1000)
	if err := s.Put(ctx, "r", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	s.Inject(Fault{Op: OpRead, AfterBytes: 300})
	rc, err := s.NewRangeReader(ctx, "r", 100, -1)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if !errors.Is(err, ErrInjected) || !bytes.Equal(got, data[100:400]) {
		t.Fatalf("read %d bytes, %v; want 300 then ErrInjected", len(got), err)
	}
	// The fault fired once: the next read is whole.
	s.Inject(Fault{Op: OpRead})
	if _, err := s.NewRangeReader(ctx, "r", 0, -1); !errors.Is(err, ErrInjected) {
		t.Fatalf("open with a fault: %v", err)
	}
	rc, err = s.NewRangeReader(ctx, "r", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after the fault: %d bytes, %v", len(got), err)
	}
}

func TestFaultsDueTogether(t *testing.T) {
	ctx := context.Background()
	s := New()
	defer s.Close()
	e1, e2 := errors.New("one"), errors.New("two")
	s.Inject(Fault{Op: OpStat, Err: e1})
	s.Inject(Fault{Op: OpStat, Err: e2})
	for _, want := range []error{e1, e2, blob.ErrNotFound} {
		if _, err := s.Stat(ctx, "x"); !errors.Is(err, want) {
			t.Fatalf("got %v, want %v", err, want)
		}
	}
	s.Inject(Fault{Op: OpList, Name: "p/"})
	if _, err := s.List(ctx, "q/"); err != nil {
		t.Fatalf("list of another prefix: %v", err)
	}
	if _, err := s.List(ctx, "p/"); !errors.Is(err, ErrInjected) {
		t.Fatalf("list: %v", err)
	}
	s.Inject(Fault{Op: OpDelete})
	if err := s.Delete(ctx, "x"); !errors.Is(err, ErrInjected) {
		t.Fatalf("delete: %v", err)
	}
}

func TestClock(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	s := New(WithClock(func() time.Time { return at }))
	defer s.Close()
	if err := s.Put(context.Background(), "a", strings.NewReader(""), 0); err != nil {
		t.Fatal(err)
	}
	a, err := s.Stat(context.Background(), "a")
	if err != nil || !a.Modified.Equal(at) {
		t.Fatalf("Stat = %+v, %v; want Modified %v", a, err, at)
	}
}
