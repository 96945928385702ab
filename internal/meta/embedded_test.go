package meta

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEmbeddedRestartKeepsData(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := DefaultEmbeddedConfig()
	cfg.Dir = t.TempDir()
	cfg.Name = "us-east-meta"
	cfg.Fast = true
	start := time.Now()
	e, err := StartEmbedded(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fast start: %v", time.Since(start).Round(time.Millisecond))
	for _, u := range []string{e.ClientURL(), e.PeerURL()} {
		pu, err := url.Parse(u)
		if err != nil || pu.Port() == "" || pu.Port() == "0" {
			t.Fatalf("URL %q has no real port", u)
		}
		c, err := net.DialTimeout("tcp", pu.Host, time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", u, err)
		}
		c.Close()
	}
	s, err := Open(ctx, Config{Endpoints: []string{e.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "durable", []byte("yes")); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Close twice and concurrently: every call returns once etcd is down.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := e.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	wg.Wait()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(e.Err(), time.Second) {
		t.Fatal("Err channel not closed by Close")
	}

	// Same Dir, etcd's default timing this time.
	cfg.Fast = false
	start = time.Now()
	e2, err := StartEmbedded(ctx, cfg)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer e2.Close()
	t.Logf("restart with default timing: %v", time.Since(start).Round(time.Millisecond))
	s2, err := Open(ctx, Config{Endpoints: []string{e2.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	kv, err := s2.Get(ctx, "durable")
	if err != nil || string(kv.Value) != "yes" {
		t.Fatalf("after restart: %+v, %v", kv, err)
	}
	// With a 1 s election timeout etcd raises a 1 s lease to 2 s.
	resp, err := s2.client.Grant(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if resp.TTL != 2 {
		t.Fatalf("1s lease granted with TTL %ds; want etcd's floor 2s", resp.TTL)
	}
}

func TestEmbeddedConfigValidate(t *testing.T) {
	t.Parallel()
	err := EmbeddedConfig{ClientPort: -1, PeerPort: 70000, StartTimeout: -time.Second}.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"Dir is required", "ClientPort -1", "PeerPort 70000", "StartTimeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; missing %q", err, want)
		}
	}
	if err := (EmbeddedConfig{Dir: "x"}).Validate(); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
	if _, err := StartEmbedded(context.Background(), EmbeddedConfig{}); err == nil {
		t.Fatal("StartEmbedded without Dir succeeded")
	}
}

func TestEmbeddedStartCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := DefaultEmbeddedConfig()
	cfg.Dir = t.TempDir()
	cfg.Fast = true
	e, err := StartEmbedded(ctx, cfg)
	if err == nil {
		e.Close()
		t.Fatal("start with a canceled context succeeded")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
