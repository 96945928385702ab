// Command tierbench measures tiered reads against bookie reads (issue 9):
// a topic of n messages (1 KiB by default) over three bookie processes
// (E2/Qw2/Qa2, fsync on) is read sequentially from the earliest message
// through a fresh managed ledger — once from the bookies, then, after its
// ledgers are offloaded and their bookie copies deleted, from each tier
// (a directory, and an in-process S3-compatible server over HTTP) — and
// reports msgs/s, MiB/s, the ratio to the bookie read, and the latency of
// a cold tiered read's first message (fresh block cache). Run it through
// bench/tier.sh.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/stratamesh/strata/bench/benchnode"
	"github.com/stratamesh/strata/bookie/ledger"
	"github.com/stratamesh/strata/broker/mledger"
	"github.com/stratamesh/strata/internal/meta"
	"github.com/stratamesh/strata/region"
	"github.com/stratamesh/strata/tenancy"
	"github.com/stratamesh/strata/tiered"
	"github.com/stratamesh/strata/tiered/blob"
	"github.com/stratamesh/strata/tiered/blob/blobopen"
	"github.com/stratamesh/strata/topology"
)

const topo = `mesh: bench
regions:
  - name: solo
    brokers: 1
    bookies: 3
    ledger: {ensemble: 2, write_quorum: 2, ack_quorum: 2}
`

func main() {
	strata := flag.String("strata", "bin/strata", "the strata binary")
	n := flag.Int("n", 100000, "messages per topic")
	size := flag.Int("size", 1024, "message payload size in bytes")
	rollover := flag.Int64("rollover", 8<<20, "ledger rollover size in bytes")
	dir := flag.String("dir", "", "data directory (default: a new temporary one, removed after)")
	flag.Parse()
	if err := run(*strata, *dir, *n, *size, *rollover); err != nil {
		fmt.Fprintln(os.Stderr, "tierbench:", err)
		os.Exit(1)
	}
}

type bench struct {
	st      *meta.Store
	lc      *ledger.Client
	size    int
	n       int
	owner   int
	roll    int64
	quietLg *slog.Logger
}

func run(strata, dir string, n, size int, roll int64) error {
	if dir == "" {
		d, err := os.MkdirTemp(".", "tierbench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	topoPath := filepath.Join(dir, "bench.yaml")
	if err := os.WriteFile(topoPath, []byte(topo), 0o644); err != nil {
		return err
	}
	common := []string{"node", "--topology", topoPath, "--region", "solo", "--data-dir", filepath.Join(dir, "data"), "--gossip", "loopback", "--log-level", "error"}
	metaNode, err := benchnode.Start(strata, append(common, "--id", "meta"), "")
	if err != nil {
		return err
	}
	defer metaNode.Stop()
	for _, id := range []string{"k1", "k2", "k3"} {
		b, err := benchnode.Start(strata, append(common, "--id", id, "--etcd", metaNode.Report.Etcd, "--join", metaNode.Report.SerfLAN), "")
		if err != nil {
			return err
		}
		defer b.Stop()
	}
	m, _, err := topology.Parse("bench.yaml", []byte(topo))
	if err != nil {
		return err
	}
	r, _ := m.Region("solo")
	ctx := context.Background()
	st, err := meta.Open(ctx, meta.Config{Endpoints: []string{metaNode.Report.Etcd}, Prefix: region.KeyPrefix(m, r)})
	if err != nil {
		return err
	}
	defer st.Close()
	lc, err := ledger.NewClient(ledger.Config{Store: st})
	if err != nil {
		return err
	}
	defer lc.Close()
	b := &bench{st: st, lc: lc, size: size, n: n, roll: roll, quietLg: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))}

	// The tiers: a directory, and S3 over HTTP (gofakes3 in memory).
	fsStore, err := blobopen.Open(ctx, blob.Config{Kind: blob.KindFS, Dir: filepath.Join(dir, "tier")})
	if err != nil {
		return err
	}
	defer fsStore.Close()
	s3srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	defer s3srv.Close()
	s3Store, err := openS3(ctx, s3srv.URL)
	if err != nil {
		return err
	}
	defer s3Store.Close()
	tiers := []struct {
		name  string
		store blob.Store
	}{{"fs", fsStore}, {"s3", s3Store}}

	fmt.Printf("tierbench: %d messages of %d B per topic, ledgers rolled over at %d B, 3 bookie processes E2/Qw2/Qa2 (fsync on)\n", n, size, roll)
	for _, t := range tiers {
		if err := b.publish(ctx, name(t.name)); err != nil {
			return err
		}
	}
	bookieRate, _, err := b.read(ctx, name("fs"), nil)
	if err != nil {
		return err
	}
	mib := float64(n*size) / (1 << 20)
	fmt.Printf("  %-8s %10.0f msgs/s %8.1f MiB/s\n", "bookies", bookieRate, bookieRate*mib/float64(n))
	for _, t := range tiers {
		start := time.Now()
		ledgers, err := b.offload(ctx, name(t.name), t.store)
		if err != nil {
			return fmt.Errorf("offload to %s: %w", t.name, err)
		}
		took := time.Since(start)
		cs := &countingStore{Store: t.store}
		rate, base, err := b.read(ctx, name(t.name), cs)
		if err != nil {
			return fmt.Errorf("read from %s: %w", t.name, err)
		}
		gets, got := cs.counts()
		// A cold read: a fresh reader and block cache on the first
		// ledger's copy, up to its first entry's payload.
		cold := time.Now()
		r, err := tiered.Open(ctx, t.store, base, tiered.NewBlockCache(tiered.DefaultCacheBytes))
		if err != nil {
			return err
		}
		if _, err := r.Read(ctx, 0, 0); err != nil {
			return err
		}
		first := time.Since(cold)
		r.Close()
		fmt.Printf("  %-8s %10.0f msgs/s %8.1f MiB/s   ratio to bookies %.2f   (%d ranged GETs, %.1f MiB)   cold first entry %v   (offload of %d ledgers took %v)\n",
			"tier "+t.name, rate, rate*mib/float64(n), rate/bookieRate, gets, float64(got)/(1<<20), first.Round(10*time.Microsecond), ledgers, took.Round(time.Millisecond))
	}
	return nil
}

func name(tier string) tenancy.Name {
	return tenancy.Name{Tenant: "bench", Namespace: "tier", Topic: tier}
}

func openS3(ctx context.Context, endpoint string) (blob.Store, error) {
	// A bucket on the fake server, through the driver's client: create it
	// with a plain PUT (path-style, unsigned).
	if err := putBucket(endpoint, "bench"); err != nil {
		return nil, err
	}
	return blobopen.Open(ctx, blob.Config{Kind: blob.KindS3, Bucket: "bench", Region: "us-east-1", Endpoint: endpoint, PathStyle: true},
		blobopen.WithS3Credentials(credentials.NewStaticCredentialsProvider("bench", "bench-secret", "")))
}

// config is an ML configuration for a new owner of n (tier: nil for none).
func (b *bench) config(ctx context.Context, n tenancy.Name, tier mledger.Tier) (mledger.Config, error) {
	b.owner++
	key := "bench-owners/" + n.String()
	rev, err := b.st.Put(ctx, key, []byte(fmt.Sprint(b.owner)))
	if err != nil {
		return mledger.Config{}, err
	}
	return mledger.Config{
		Store: b.st, Ledgers: b.lc, Ensemble: 2, WriteQuorum: 2, AckQuorum: 2, Region: "solo",
		Cond: meta.Cond{Key: key, ModRevision: rev}, Limits: mledger.Limits{RolloverBytes: b.roll},
		CacheBytes: 16 << 20, Tier: tier, Logger: b.quietLg,
		// On request only, bookie copies deleted at once.
		Offload: &mledger.OffloadPolicy{Threshold: 1 << 62, DeletionLag: 0},
	}, nil
}

// publish writes n messages to topic nm (windows of 1000 async
// publishes) and closes it.
func (b *bench) publish(ctx context.Context, nm tenancy.Name) error {
	if err := mledger.Create(ctx, b.st, nm, nil, time.Now()); err != nil && !errors.Is(err, mledger.ErrExists) {
		return err
	}
	cfg, err := b.config(ctx, nm, nil)
	if err != nil {
		return err
	}
	ml, err := mledger.Open(ctx, cfg, nm)
	if err != nil {
		return err
	}
	data := []byte(strings.Repeat("x", b.size))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := 0; i < b.n; i++ {
		wg.Add(1)
		ml.Publish("bench.tier."+nm.Topic, nil, data, mledger.PublishOptions{}, func(_ mledger.PubResult, err error) {
			if err != nil {
				mu.Lock()
				firstErr = cmp(firstErr, err)
				mu.Unlock()
			}
			wg.Done()
		})
		if i%1000 == 999 {
			wg.Wait()
		}
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ml.Close(ctx)
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// offload offloads every closed ledger of nm to store and waits until
// their bookie copies are deleted; it returns how many were offloaded.
func (b *bench) offload(ctx context.Context, nm tenancy.Name, store blob.Store) (int, error) {
	cfg, err := b.config(ctx, nm, mledger.NewTier(store, tiered.NewBlockCache(tiered.DefaultCacheBytes), tiered.Config{}))
	if err != nil {
		return 0, err
	}
	ml, err := mledger.Open(ctx, cfg, nm)
	if err != nil {
		return 0, err
	}
	defer ml.Close(ctx)
	if err := ml.OffloadNow(ctx, 0); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		st := ml.OffloadStatus()
		done := st.OffloadedLedgers > 0
		for _, l := range st.Ledgers {
			if l.Where != "tier" && l.Where != "open" {
				done = false
			}
		}
		if st.LastError != "" {
			return 0, errors.New(st.LastError)
		}
		if done {
			return st.OffloadedLedgers, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("offload not done after 10 min: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// read reads nm from its first message to its last through a fresh ML
// (store nil: no tier) and returns msgs/s and the tier object of its
// first ledger ("" when not offloaded).
func (b *bench) read(ctx context.Context, nm tenancy.Name, store blob.Store) (float64, string, error) {
	var tier mledger.Tier
	if store != nil {
		tier = mledger.NewTier(store, tiered.NewBlockCache(tiered.DefaultCacheBytes), tiered.Config{})
	}
	cfg, err := b.config(ctx, nm, tier)
	if err != nil {
		return 0, "", err
	}
	ml, err := mledger.Open(ctx, cfg, nm)
	if err != nil {
		return 0, "", err
	}
	defer ml.Close(ctx)
	s := ml.State()
	start := time.Now()
	for seq := s.FirstSeq; seq <= s.LastSeq; seq++ {
		m, err := ml.Read(ctx, seq)
		if err != nil {
			return 0, "", fmt.Errorf("read %d: %w", seq, err)
		}
		if len(m.Data) != b.size {
			return 0, "", fmt.Errorf("read %d: %d bytes, want %d", seq, len(m.Data), b.size)
		}
	}
	rate := float64(s.LastSeq-s.FirstSeq+1) / time.Since(start).Seconds()
	var base string
	if ls := ml.OffloadStatus().Ledgers; len(ls) > 0 {
		base = ls[0].Object
	}
	return rate, base, nil
}

// countingStore counts the ranged GETs made through it and their bytes.
type countingStore struct {
	blob.Store
	mu    sync.Mutex
	gets  int
	bytes int64
}

func (c *countingStore) NewRangeReader(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	r, err := c.Store.NewRangeReader(ctx, name, off, length)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return &countingReader{ReadCloser: r, c: c}, nil
}

func (c *countingStore) counts() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets, c.bytes
}

type countingReader struct {
	io.ReadCloser
	c *countingStore
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.c.mu.Lock()
	r.c.bytes += int64(n)
	r.c.mu.Unlock()
	return n, err
}

// putBucket creates a bucket on the S3-compatible server at endpoint
// (path-style PUT; gofakes3 does not check signatures).
func putBucket(endpoint, bucket string) error {
	req, err := http.NewRequest(http.MethodPut, endpoint+"/"+bucket, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("create bucket %s: %s", bucket, resp.Status)
	}
	return nil
}
