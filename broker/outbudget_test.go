package broker

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stratamesh/strata/internal/testutil"
)

// The budget hands out blocks up to its limit, refuses past it unless
// forced, keeps given-back blocks idle only within the limit, and trimming
// brings the idle list down to its floor.
func TestOutBudgetTakeGiveTrim(t *testing.T) {
	const limit = 32 * chunkSize
	b := newOutBudget(limit)
	var held [][]byte
	for i := 0; i < 32; i++ {
		c, ok := b.take(100, false)
		if !ok || cap(c) != chunkSize || len(c) != 0 {
			t.Fatalf("take %d: ok=%v cap=%d len=%d", i, ok, cap(c), len(c))
		}
		held = append(held, c)
	}
	if _, ok := b.take(1, false); ok {
		t.Fatal("take past the limit succeeded")
	}
	forced, ok := b.take(1, true)
	if !ok {
		t.Fatal("forced take failed")
	}
	if got := b.used.Load(); got != limit+chunkSize {
		t.Fatalf("used %d, want %d", got, limit+chunkSize)
	}
	b.give(forced)
	for _, c := range held {
		b.give(c)
	}
	if b.used.Load() != 0 || len(b.idle) != 32 {
		t.Fatalf("after giving back: used %d, idle %d blocks", b.used.Load(), len(b.idle))
	}
	// A large frame gets a block of its own size, making room by dropping
	// idle blocks; it is not kept idle afterwards.
	big, ok := b.take(10*chunkSize, false)
	if !ok || cap(big) != 10*chunkSize {
		t.Fatalf("large take: ok=%v cap=%d", ok, cap(big))
	}
	if total := b.used.Load() + b.idleBytesLocked(); total > limit {
		t.Fatalf("used+idle %d past the limit %d", total, limit)
	}
	b.give(big)
	if b.used.Load() != 0 {
		t.Fatalf("used %d after the large block came back", b.used.Load())
	}
	for i := 0; i < 10 && len(b.idle) > b.floor/chunkSize; i++ {
		b.trimIdle()
	}
	if len(b.idle)*chunkSize > b.floor {
		t.Fatalf("idle %d bytes after trimming, floor %d", len(b.idle)*chunkSize, b.floor)
	}
	b.stop()
	c, _ := b.take(1, false)
	b.give(c)
	if len(b.idle) != 0 {
		t.Fatal("a stopped budget kept a block idle")
	}
}

// shed cuts the client connection with the largest backlog, never a route
// (no onShed) and never one already cut.
func TestOutBudgetShedPicksLargestClient(t *testing.T) {
	b := newOutBudget(1 << 20)
	var cuts []string
	mk := func(name string, pend int64, client bool) *outbound {
		o := &outbound{budget: b}
		o.pend.Store(pend)
		if client {
			o.onShed = func() { cuts = append(cuts, name) }
		}
		b.join(o)
		return o
	}
	mk("route", 900, false)
	mk("small", 10, true)
	mk("large", 500, true)
	mk("medium", 200, true)
	for b.shed() {
	}
	want := []string{"large", "medium", "small"}
	if len(cuts) != len(want) {
		t.Fatalf("cut %v, want %v", cuts, want)
	}
	for i := range want {
		if cuts[i] != want[i] {
			t.Fatalf("cut %v, want %v", cuts, want)
		}
	}
}

// A connection's queue gives its blocks back as its reader catches up:
// after a burst is read, the connection holds no memory, and a closed one
// holds none either.
func TestOutboundShrinksAfterBurst(t *testing.T) {
	b := newOutBudget(64 << 20)
	defer b.stop()
	srv, cli := net.Pipe()
	defer cli.Close()
	o := newOutbound(srv, 32<<20, 0, b)
	done := make(chan struct{})
	go func() { o.run(); close(done) }()
	frame := make([]byte, 1000)
	const n = 10000 // ~10 MiB
	for i := 0; i < n; i++ {
		if r := o.enqueue(frame); r == enqClosed || r == enqSlow {
			t.Fatalf("enqueue %d: %v", i, r)
		}
	}
	if used := b.used.Load(); used < n*1000 {
		t.Fatalf("a 10 MB backlog holds only %d bytes of blocks", used)
	}
	o.kick()
	if _, err := io.ReadFull(cli, make([]byte, n*1000)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "blocks back after the burst", 10*time.Second, func() bool { return b.used.Load() == 0 })
	o.closeAfter(nil)
	<-done
	if used := b.used.Load(); used != 0 {
		t.Fatalf("%d bytes still held after the burst was read and the connection closed", used)
	}
	if len(b.members) != 0 {
		t.Fatal("closed outbound still registered with the budget")
	}
}
