package meta

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// testEtcd is the embedded etcd shared by the tests of this binary; each
// test works under its own key prefix.
var testEtcd *Embedded

func TestMain(m *testing.M) {
	// No goroutine is ignored: etcd's server and client, Stores and
	// Embedded instances all stop what they start, and goleak's retries
	// cover the moments gRPC takes to tear down closed connections.
	goleak.VerifyTestMain(withEtcd{m})
}

// withEtcd runs the tests between starting and closing testEtcd, so that
// goleak checks after etcd is down.
type withEtcd struct{ m *testing.M }

func (w withEtcd) Run() int {
	dir, err := os.MkdirTemp("", "meta-test-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := DefaultEmbeddedConfig()
	cfg.Dir = dir
	cfg.Fast = true
	cfg.UnsafeNoFsync = true // the disk is shared with other work; durability is TestEmbeddedRestartKeepsData's
	start := time.Now()
	testEtcd, err = StartEmbedded(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start embedded etcd:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "embedded etcd ready at %s in %v\n", testEtcd.ClientURL(), time.Since(start).Round(time.Millisecond))
	defer testEtcd.Close()
	return w.m.Run()
}

// openStore opens a Store on testEtcd under a prefix unique to the test and
// closes it when the test ends.
func openStore(t *testing.T, mod ...func(*Config)) *Store {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Endpoints = []string{testEtcd.ClientURL()}
	cfg.Prefix = testPrefix(t)
	for _, f := range mod {
		f(&cfg)
	}
	s, err := Open(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return s
}

var prefixSeq atomic.Int64

// testPrefix is a key prefix unique to this run of the test (-count reruns
// it against the same etcd).
func testPrefix(t *testing.T) string {
	return fmt.Sprintf("/test/%s/%d", strings.ReplaceAll(t.Name(), "/", "_"), prefixSeq.Add(1))
}

// testCtx is canceled when the test ends and bounds every call in it.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recv takes one value from ch or fails the test after timeout.
func recv[T any](t *testing.T, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed", what)
		}
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
	panic("unreachable")
}

// closedWithin reports whether ch is closed (after draining it) within timeout.
func closedWithin[T any](ch <-chan T, timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return true
			}
		case <-timer.C:
			return false
		}
	}
}

// holdFor checks invariant every 10 ms for d and fails at its first error:
// for properties that must hold over a span of time (a lease outliving its
// TTL while renewed), where the passing of time is the point.
func holdFor(t *testing.T, d time.Duration, what string, invariant func() error) {
	t.Helper()
	end := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(end) {
		if err := invariant(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		<-tick.C
	}
}
