package jetstream

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestPublishFence(t *testing.T) {
	var f publishFence
	ctx := context.Background()
	if err := f.wait(ctx, f.mark()); err != nil {
		t.Fatalf("nothing issued: %v", err)
	}
	f.issue()
	f.issue()
	mark := f.mark()
	f.issue() // after the mark: not waited for
	done := make(chan error, 1)
	go func() { done <- f.wait(ctx, mark) }()
	f.answer()
	select {
	case err := <-done:
		t.Fatalf("returned after 1 of 2 answers: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	f.answer()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not released after 2 of 2 answers")
	}
	// A wait that times out leaves no waiter behind.
	tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := f.wait(tctx, f.mark()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("3 issued, 2 answered: %v, want a deadline error", err)
	}
	if n := f.waiting.Load(); n != 0 || len(f.waiters) != 0 {
		t.Fatalf("%d/%d waiters left", n, len(f.waiters))
	}
}

// Answers racing with waits never lose a wake-up.
func TestPublishFenceConcurrent(t *testing.T) {
	var f publishFence
	const n = 2000
	for range n {
		f.issue()
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := f.wait(ctx, uint64(n*(i+1)/8)); err != nil {
				t.Error(err)
			}
		}()
	}
	for range n {
		f.answer()
	}
	wg.Wait()
	if n := f.waiting.Load(); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
}
