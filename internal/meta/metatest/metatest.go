// Package metatest runs a test binary against one shared embedded etcd
// (fast timing, no fsync) and opens Stores under prefixes unique to each
// test. It is for tests only. internal/meta's own tests cannot use it (it
// imports meta) and keep their own setup.
package metatest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stratamesh/strata/internal/meta"
)

var (
	etcd      *meta.Embedded
	prefixSeq atomic.Int64
)

// Main is a TestMain body: it starts the shared etcd, runs the tests,
// closes etcd, then fails the binary on leaked goroutines (goleak), and
// exits. It does not return.
func Main(m *testing.M) { goleak.VerifyTestMain(runner{m}) }

type runner struct{ m *testing.M }

func (r runner) Run() int {
	dir, err := os.MkdirTemp("", "strata-test-etcd-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := meta.DefaultEmbeddedConfig()
	cfg.Dir, cfg.Fast, cfg.UnsafeNoFsync = dir, true, true
	etcd, err = meta.StartEmbedded(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start embedded etcd:", err)
		return 1
	}
	defer etcd.Close()
	return r.m.Run()
}

// Etcd is the shared embedded etcd (nil outside Main).
func Etcd() *meta.Embedded { return etcd }

// OpenStore opens a Store on the shared etcd under a prefix unique to the
// test, closed when the test ends.
func OpenStore(t testing.TB) *meta.Store {
	t.Helper()
	cfg := meta.DefaultConfig()
	cfg.Endpoints = []string{etcd.ClientURL()}
	cfg.Prefix = fmt.Sprintf("/test/%s/%d", strings.ReplaceAll(t.Name(), "/", "_"), prefixSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := meta.Open(ctx, cfg)
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
