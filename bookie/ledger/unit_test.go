package ledger

import (
	"bytes"
	"context"
	"errors"

	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratamesh/strata/bookie"
)

func TestFrame(t *testing.T) {
	f := newFrame([]byte("hello"))
	sealFrame(f, 7, 3, 42)
	p, l, err := openFrame(f, 7, 3)
	if err != nil || string(p) != "hello" || l != 42 {
		t.Fatalf("openFrame = %q, %d, %v", p, l, err)
	}
	for name, check := range map[string]func() error{
		"other ledger": func() error { _, _, err := openFrame(f, 8, 3); return err },
		"other entry":  func() error { _, _, err := openFrame(f, 7, 4); return err },
		"short":        func() error { _, _, err := openFrame(f[:5], 7, 3); return err },
		"flipped bit": func() error {
			g := bytes.Clone(f)
			g[len(g)-1] ^= 1
			_, _, err := openFrame(g, 7, 3)
			return err
		},
		"length below payload": func() error {
			g := newFrame([]byte("hello"))
			sealFrame(g, 7, 3, 4)
			_, _, err := openFrame(g, 7, 3)
			return err
		},
	} {
		if err := check(); !errors.Is(err, ErrCorruptEntry) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if !bytes.Equal(masterKey(nil), masterKey([]byte{})) || bytes.Equal(masterKey(nil), masterKey([]byte("x"))) || len(masterKey(nil)) == 0 {
		t.Error("masterKey")
	}
}

// FuzzOpenFrame: any stored bytes are either refused as corrupt or
// reproduce exactly when sealed again.
func FuzzOpenFrame(f *testing.F) {
	g := newFrame([]byte("payload"))
	sealFrame(g, 1, 2, 100)
	f.Add(g, int64(1), int64(2))
	f.Add([]byte{}, int64(0), int64(0))
	f.Fuzz(func(t *testing.T, b []byte, ledger, entry int64) {
		p, l, err := openFrame(b, ledger, entry)
		if err != nil {
			if !errors.Is(err, ErrCorruptEntry) {
				t.Fatalf("error not ErrCorruptEntry: %v", err)
			}
			return
		}
		again := newFrame(p)
		sealFrame(again, ledger, entry, l)
		if !bytes.Equal(again, b) {
			t.Fatalf("accepted frame does not re-seal to itself")
		}
	})
}

func TestDefaultPlacement(t *testing.T) {
	regs := []bookie.Registration{
		{ID: "a", Address: "x:1", Instance: "i"}, {ID: "b", Address: "x:2", Instance: "i", ReadOnly: true},
		{ID: "c", Address: "x:3", Instance: "i"}, {ID: "d", Address: "x:4", Instance: "i"},
	}
	for range 20 {
		got, err := DefaultPlacement(regs, 2, []string{"c"})
		if err != nil || len(got) != 2 || got[0].ID == got[1].ID {
			t.Fatalf("placement = %+v, %v", got, err)
		}
		for _, r := range got {
			if r.ID == "b" || r.ID == "c" {
				t.Fatalf("placed on %s (read-only or excluded)", r.ID)
			}
		}
	}
	_, err := DefaultPlacement(regs, 3, []string{"c"})
	if !errors.Is(err, ErrNotEnoughBookies) || err.Error() != "ledger: not enough bookies: need 3 writable bookies, have 2 (4 registered, 1 read-only, 1 excluded)" {
		t.Fatalf("too few: %v", err)
	}
}

// TestQuarantine: a failed bookie instance is held out from its failure
// until the period has passed since its last failure; another instance
// at the same id (a wiped disk) is not held; an empty instance holds
// every instance of the id.
func TestQuarantine(t *testing.T) {
	t0 := time.Unix(1000, 0)
	regs := []bookie.Registration{
		{ID: "a", Address: "x:1", Instance: "a1"}, {ID: "b", Address: "x:2", Instance: "b1"},
		{ID: "c", Address: "x:3", Instance: "c2"}, {ID: "d", Address: "x:4", Instance: "d1"},
	}
	ids := func(rs []bookie.Registration) (out []string) {
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	q := newQuarantine(10 * time.Second)
	if free, held := q.filter(regs, t0); len(free) != 4 || held != nil {
		t.Fatalf("empty quarantine: %v, %v", ids(free), held)
	}
	q.add("a", "a1", t0)
	q.add("b", "", t0.Add(2*time.Second))
	q.add("c", "c1", t0) // an older instance of c
	q.add("a", "a1", t0.Add(5*time.Second))
	q.add("a", "a1", t0.Add(time.Second)) // an older report does not shorten it
	for _, tc := range []struct {
		at         time.Duration
		free, held []string
	}{
		{0, []string{"c", "d"}, []string{"a", "b"}},
		{11 * time.Second, []string{"c", "d"}, []string{"a", "b"}},
		{12 * time.Second, []string{"b", "c", "d"}, []string{"a"}},
		{15 * time.Second, []string{"a", "b", "c", "d"}, nil},
	} {
		free, held := q.filter(regs, t0.Add(tc.at))
		if !slices.Equal(ids(free), tc.free) || !slices.Equal(held, tc.held) {
			t.Fatalf("at +%v: free %v, held %v; want %v, %v", tc.at, ids(free), held, tc.free, tc.held)
		}
	}
	if len(q.failed) != 0 {
		t.Fatalf("ended quarantines kept: %v", q.failed)
	}
	q.add("d", "d1", t0.Add(20*time.Second))
	if _, held := q.filter(regs, t0.Add(29*time.Second)); !slices.Equal(held, []string{"d"}) {
		t.Fatalf("a new failure after the quarantine ended: held %v", held)
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{AddTimeout: -1, OpTimeout: -1, ReplaceTimeout: -1, BookieQuarantine: -1, MaxPendingBytes: -1, MaxEntrySize: 1 << 30}.Validate()
	for _, want := range []string{"Store is required", "AddTimeout", "OpTimeout", "ReplaceTimeout", "BookieQuarantine", "MaxPendingBytes", "MaxEntrySize"} {
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("Validate() = %v; want it to mention %s", err, want)
		}
	}
}

// TestCallbackQueue: callbacks run in order, one at a time, off the
// pusher's goroutine; a slow one delays only those after it; after the
// goroutine exits, push refuses.
func TestCallbackQueue(t *testing.T) {
	var wg sync.WaitGroup
	q := startCallbackQueue(&wg)
	release := make(chan struct{})
	var got []int
	q.push(func() { <-release })
	for i := range 100 {
		if !q.push(func() { got = append(got, i) }) {
			t.Fatal("push refused")
		}
	}
	close(release) // the pushes above did not wait for the slow callback
	q.close()
	wg.Wait()
	if want := seqInts(100); !slices.Equal(got, want) {
		t.Fatalf("order %v", got)
	}
	if q.push(func() {}) {
		t.Fatal("push accepted after exit")
	}
}

func seqInts(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func TestFlow(t *testing.T) {
	f := newFlow(10)
	ctx := context.Background()
	if err := f.acquire(ctx, 100); err != nil { // alone: always admitted
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := f.acquire(tctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire over the limit: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- f.acquire(ctx, 5) }()
	f.release(100)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	go func() { done <- f.acquire(ctx, 6) }()
	f.close()
	if err := <-done; !errors.Is(err, errFlowClosed) {
		t.Fatalf("acquire at close: %v", err)
	}
}
