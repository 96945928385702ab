package meta

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

type evSummary struct {
	typ   EventType
	key   string
	value string
}

func summarize(e Event) evSummary { return evSummary{e.Type, e.KV.Key, string(e.KV.Value)} }

func expectEvents(t *testing.T, ch <-chan Event, want ...evSummary) []Event {
	t.Helper()
	var got []Event
	var last int64
	for i, w := range want {
		e := recv(t, ch, 5*time.Second, fmt.Sprintf("event %d (%v)", i, w))
		if summarize(e) != w {
			t.Fatalf("event %d = %+v, want %+v", i, summarize(e), w)
		}
		if e.Revision < last || e.Revision != e.KV.ModRevision {
			t.Fatalf("event %d revision %d (kv mod rev %d) after %d", i, e.Revision, e.KV.ModRevision, last)
		}
		last = e.Revision
		got = append(got, e)
	}
	return got
}

func TestWatchFromNow(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := testCtx(t)
	if _, err := s.Put(ctx, "w/before", []byte("old")); err != nil {
		t.Fatal(err)
	}
	ch := s.Watch(ctx, "w/", 0)
	// Written right after Watch returns: must be seen.
	putRev, err := s.Put(ctx, "w/a", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "other", []byte("not watched")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "w/b", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "w/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Txn(ctx, nil, OpPut("w/c", []byte("3")), OpDelete("w/before")); err != nil {
		t.Fatal(err)
	}
	evs := expectEvents(t, ch,
		evSummary{EventPut, "w/a", "1"},
		evSummary{EventPut, "w/b", "2"},
		evSummary{EventDelete, "w/a", ""},
		evSummary{EventPut, "w/c", "3"},
		evSummary{EventDelete, "w/before", ""},
	)
	if evs[0].Revision != putRev {
		t.Fatalf("first event revision %d, put returned %d", evs[0].Revision, putRev)
	}
	if evs[3].Revision != evs[4].Revision {
		t.Fatalf("txn events at revisions %d and %d, want one", evs[3].Revision, evs[4].Revision)
	}
}

func TestWatchFromRevision(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := testCtx(t)
	first, err := s.Put(ctx, "r/1", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "r/2", []byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "r/1"); err != nil {
		t.Fatal(err)
	}
	// Replay from the first write, then keep following.
	ch := s.Watch(ctx, "r/", first)
	expectEvents(t, ch,
		evSummary{EventPut, "r/1", "a"},
		evSummary{EventPut, "r/2", "b"},
		evSummary{EventDelete, "r/1", ""},
	)
	if _, err := s.Put(ctx, "r/3", []byte("c")); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, ch, evSummary{EventPut, "r/3", "c"})

	// List then watch from the list's revision + 1: no gap, no repeat.
	kvs, rev, err := s.ListWithRev(ctx, "r/")
	if err != nil || len(kvs) != 2 {
		t.Fatalf("list = %v, %v", kvs, err)
	}
	ch2 := s.Watch(ctx, "r/", rev+1)
	if _, err := s.Put(ctx, "r/4", []byte("d")); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, ch2, evSummary{EventPut, "r/4", "d"})
}

// A reader that does not read while many changes happen loses nothing: the
// watch pauses and resumes from the next undelivered revision.
func TestWatchSlowReader(t *testing.T) {
	t.Parallel()
	pauses := &countHandler{msg: "watch reader behind; pausing the etcd watch"}
	s := openStore(t, func(c *Config) {
		c.WatchBuffer = 2
		c.Logger = slog.New(pauses)
	})
	ctx := testCtx(t)
	ch := s.Watch(ctx, "", 0)
	const n = 60
	var want []evSummary
	for i := range n {
		k := fmt.Sprintf("k%02d", i%7)
		v := fmt.Sprint(i)
		if i%10 == 9 {
			// A two-event revision, to check resumption never splits one.
			if _, err := s.Txn(ctx, nil, OpPut(k, []byte(v)), OpPut("pair", []byte(v))); err != nil {
				t.Fatal(err)
			}
			want = append(want, evSummary{EventPut, k, v}, evSummary{EventPut, "pair", v})
			continue
		}
		if _, err := s.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
		want = append(want, evSummary{EventPut, k, v})
	}
	expectEvents(t, ch, want...)
	if pauses.n.Load() == 0 {
		t.Fatal("the reader never fell behind: the test did not exercise pausing")
	}
	t.Logf("watch paused %d times for %d events", pauses.n.Load(), len(want))
	select {
	case e := <-ch:
		t.Fatalf("extra event %+v", e)
	default:
	}
}

func TestWatchClosesWithContextAndStore(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	ch := s.Watch(ctx, "", 0)
	cancel()
	if !closedWithin(ch, 5*time.Second) {
		t.Fatal("watch not closed after its context ended")
	}
	if !closedWithin(s.Watch(ctx, "", 0), time.Second) {
		t.Fatal("watch with a done context not closed")
	}
	ch2 := s.Watch(testCtx(t), "", 0)
	s.Close()
	if !closedWithin(ch2, 5*time.Second) {
		t.Fatal("watch not closed by Store.Close")
	}
}

// Not parallel: compaction is etcd-wide, and sequential tests finish before
// the parallel ones (which watch from revisions written later) resume.
func TestWatchCompacted(t *testing.T) {
	s := openStore(t)
	ctx := testCtx(t)
	old, err := s.Put(ctx, "c", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	now, err := s.Put(ctx, "c", []byte("2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.Compact(ctx, now); err != nil {
		t.Fatal(err)
	}
	ch := s.Watch(ctx, "", old)
	e := recv(t, ch, 5*time.Second, "compaction event")
	if e.Type != EventCompacted || e.Revision != now {
		t.Fatalf("event = %+v, want EventCompacted at %d", e, now)
	}
	if !closedWithin(ch, 5*time.Second) {
		t.Fatal("channel not closed after EventCompacted")
	}
}

// countHandler counts log records with one message.
type countHandler struct {
	msg string
	n   atomic.Int64
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }
