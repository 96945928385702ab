package meta

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPutGetDelete(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := testCtx(t)
	rev, err := s.Put(ctx, "a", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := s.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	want := KV{Key: "a", Value: []byte("1"), CreateRevision: rev, ModRevision: rev, Version: 1}
	if kv.Key != want.Key || string(kv.Value) != "1" || kv.CreateRevision != rev || kv.ModRevision != rev || kv.Version != 1 || kv.Lease != 0 {
		t.Fatalf("get = %+v, want %+v", kv, want)
	}
	rev2, err := s.Put(ctx, "a", []byte("2"))
	if err != nil || rev2 <= rev {
		t.Fatalf("second put: rev %d (first %d), %v", rev2, rev, err)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatalf("delete absent: %v", err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get deleted: %v, want ErrNotFound", err)
	}
	if _, err := s.Put(ctx, "", nil); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("put empty key: %v, want ErrInvalidKey", err)
	}
}

func TestCAS(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := testCtx(t)

	rev1, err := s.CAS(ctx, "k", []byte("v1"), 0)
	if err != nil {
		t.Fatalf("create if absent: %v", err)
	}
	_, err = s.CAS(ctx, "k", []byte("again"), 0)
	var ce *ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) {
		t.Fatalf("second create: %v, want *ConflictError", err)
	}
	if ce.Key != "k" || ce.Expected != 0 || ce.Actual != rev1 {
		t.Fatalf("conflict = %+v, want key k expected 0 actual %d", ce, rev1)
	}

	rev2, err := s.CAS(ctx, "k", []byte("v2"), rev1)
	if err != nil || rev2 <= rev1 {
		t.Fatalf("CAS at the right revision: rev %d, %v", rev2, err)
	}
	_, err = s.CAS(ctx, "k", []byte("stale"), rev1)
	if !errors.As(err, &ce) || ce.Expected != rev1 || ce.Actual != rev2 {
		t.Fatalf("stale CAS: %v, want conflict expected %d actual %d", err, rev1, rev2)
	}
	if kv, _ := s.Get(ctx, "k"); string(kv.Value) != "v2" {
		t.Fatalf("value after stale CAS = %q, want v2", kv.Value)
	}

	if err := s.DeleteIf(ctx, "k", rev1); !errors.As(err, &ce) || ce.Actual != rev2 {
		t.Fatalf("stale DeleteIf: %v", err)
	}
	if err := s.DeleteIf(ctx, "k", rev2); err != nil {
		t.Fatalf("DeleteIf at the right revision: %v", err)
	}
	if err := s.DeleteIf(ctx, "k", rev2); !errors.As(err, &ce) || ce.Actual != 0 {
		t.Fatalf("DeleteIf on absent key: %v, want conflict with actual 0", err)
	}
	if _, err := s.CAS(ctx, "absent", []byte("x"), 5); !errors.As(err, &ce) || ce.Actual != 0 {
		t.Fatalf("CAS absent key with revision: %v, want conflict actual 0", err)
	}
}

func TestListSortedAndPaged(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := testCtx(t)
	// More than one page, written 100 keys per transaction, in shuffled order.
	n := listPage + 150
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("dir/%04d", i))
	}
	shuffled := slices.Clone(want)
	slices.Reverse(shuffled)
	for batch := range slices.Chunk(shuffled, 100) {
		var ops []Op
		for _, k := range batch {
			ops = append(ops, OpPut(k, []byte(k)))
		}
		if _, err := s.Txn(ctx, nil, ops...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, "dirx", []byte("outside")); err != nil {
		t.Fatal(err)
	}
	kvs, rev, err := s.ListWithRev(ctx, "dir/")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, kv := range kvs {
		if string(kv.Value) != kv.Key {
			t.Fatalf("value of %s = %q", kv.Key, kv.Value)
		}
		got = append(got, kv.Key)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("list: got %d keys (first %v), want %d sorted", len(got), got[:min(3, len(got))], len(want))
	}
	if rev < kvs[0].ModRevision {
		t.Fatalf("list revision %d below a listed key's %d", rev, kvs[0].ModRevision)
	}
	all, err := s.List(ctx, "")
	if err != nil || len(all) != n+1 {
		t.Fatalf("list all: %d keys, %v; want %d", len(all), err, n+1)
	}
	none, err := s.List(ctx, "nothing/")
	if err != nil || len(none) != 0 {
		t.Fatalf("list empty prefix: %v, %v", none, err)
	}
}

func TestPrefixIsolation(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	base := testPrefix(t)
	a := openStore(t, func(c *Config) { c.Prefix = base + "/iso" })
	b := openStore(t, func(c *Config) { c.Prefix = base + "/iso2/" }) // "iso" is a string prefix of "iso2"
	wa := a.Watch(ctx, "", 0)
	wb := b.Watch(ctx, "", 0)

	if _, err := a.Put(ctx, "k", []byte("from a")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "k", []byte("from b")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "only-b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if kv, err := a.Get(ctx, "k"); err != nil || string(kv.Value) != "from a" {
		t.Fatalf("a sees %q, %v", kv.Value, err)
	}
	if _, err := a.Get(ctx, "only-b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a reads b's key: %v", err)
	}
	la, _ := a.List(ctx, "")
	lb, _ := b.List(ctx, "")
	if len(la) != 1 || la[0].Key != "k" || len(lb) != 2 {
		t.Fatalf("lists: a=%v b=%v", la, lb)
	}
	if ev := recv(t, wa, 5*time.Second, "a's watch"); string(ev.KV.Value) != "from a" || ev.KV.Key != "k" {
		t.Fatalf("a's watch saw %+v", ev)
	}
	recv(t, wb, 5*time.Second, "b's watch")
	recv(t, wb, 5*time.Second, "b's watch")
	// A write to a is the next thing a's watch sees: nothing of b's came in between.
	if _, err := a.Put(ctx, "k2", nil); err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, wa, 5*time.Second, "a's watch"); ev.KV.Key != "k2" {
		t.Fatalf("a's watch saw %+v, want k2", ev)
	}
}

func TestJSON(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := testCtx(t)
	type ledger struct {
		ID    int64  `json:"id"`
		State string `json:"state"`
	}
	rev, err := CASJSON(ctx, s, "ledgers/1", ledger{1, "OPEN"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, kv, err := GetJSON[ledger](ctx, s, "ledgers/1")
	if err != nil || got != (ledger{1, "OPEN"}) || kv.ModRevision != rev {
		t.Fatalf("GetJSON = %+v %+v %v", got, kv, err)
	}
	if _, err := CASJSON(ctx, s, "ledgers/1", ledger{1, "CLOSED"}, rev-1); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale CASJSON: %v", err)
	}
	if _, err := PutJSON(ctx, s, "bad", func() {}); err == nil {
		t.Fatal("PutJSON of a func succeeded")
	}
	if _, err := s.Put(ctx, "garbage", []byte("{")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := GetJSON[ledger](ctx, s, "garbage"); err == nil || !strings.Contains(err.Error(), "garbage") {
		t.Fatalf("GetJSON of bad JSON: %v", err)
	}
	if _, _, err := GetJSON[ledger](ctx, s, "absent"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetJSON absent: %v", err)
	}
}

func TestOpenFailsWithoutEndpoint(t *testing.T) {
	t.Parallel()
	// A port that nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	cfg := DefaultConfig()
	cfg.Endpoints = []string{"http://" + addr}
	cfg.DialTimeout = 300 * time.Millisecond
	s, err := Open(context.Background(), cfg)
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded with no etcd listening")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Open error = %v; want deadline exceeded naming %s", err, addr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Open took %v with a 300ms DialTimeout", d)
	}
	if err := (Config{}).Validate(); err == nil {
		t.Fatal("Validate accepted a Config without endpoints")
	}
}

func TestClosedStore(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := testCtx(t)
	l, err := s.GrantLease(ctx, MinLeaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if !closedWithin(l.Done(), 5*time.Second) {
		t.Fatal("lease Done not closed by Store.Close")
	}
	if _, err := s.Put(ctx, "k", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("put after close: %v", err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, ErrClosed) {
		t.Fatalf("get after close: %v", err)
	}
	if _, err := s.GrantLease(ctx, MinLeaseTTL); !errors.Is(err, ErrClosed) {
		t.Fatalf("grant after close: %v", err)
	}
	if err := l.Revoke(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("revoke after close: %v", err)
	}
	if !closedWithin(s.Watch(ctx, "", 0), time.Second) {
		t.Fatal("watch after close not closed")
	}
}
