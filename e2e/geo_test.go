package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/internal/testutil"
)

const (
	geoTopic   = "demo/geo/orders"
	geoSubject = "demo.geo.orders"
	geoStream  = "geo:orders"
)

// geoConnect connects a JetStream client to urls, detecting a frozen
// broker within about two seconds.
func geoConnect(t *testing.T, urls []string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.Timeout(2*time.Second), nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// geoPublish publishes n messages "<region>-<i>" (i = 1..n, Nats-Msg-Id
// the same) in order, each retried until acknowledged, about every
// interval; progress counts the acknowledged ones.
func geoPublish(ctx context.Context, js jetstream.JetStream, region string, n int, interval time.Duration, progress *int64, mu *sync.Mutex) error {
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("%s-%06d", region, i)
		for {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: gave up at %s: %w", region, id, ctx.Err())
			}
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := js.Publish(pctx, geoSubject, []byte(id), jetstream.WithMsgID(id))
			cancel()
			if err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		mu.Lock()
		*progress = int64(i)
		mu.Unlock()
		time.Sleep(interval)
	}
	return nil
}

// geoRead reads the whole topic in a region in stream order with an
// ordered consumer and returns each message's payload and its
// Strata-Origin header.
func geoRead(t *testing.T, js jetstream.JetStream, stream string, want int) (ids, origins []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("ordered consumer: %v", err)
	}
	for len(ids) < want {
		batch, err := cons.Fetch(min(want-len(ids), 500), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatalf("fetch after %d: %v", len(ids), err)
		}
		got := 0
		for m := range batch.Messages() {
			ids = append(ids, string(m.Data()))
			origins = append(origins, m.Headers().Get("Strata-Origin"))
			got++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("fetch after %d: %v", len(ids), err)
		}
		if got == 0 && ctx.Err() != nil {
			t.Fatalf("read %d of %d", len(ids), want)
		}
	}
	return ids, origins
}

// checkUnion checks that a region's copy of the topic holds exactly the
// union of every region's n messages, each once, each origin's in its
// order, with Strata-Origin set exactly on the copies from elsewhere.
func checkUnion(t *testing.T, region string, ids, origins []string, regions []string, n int) {
	t.Helper()
	seen := map[string]bool{}
	last := map[string]int{}
	bad := 0
	errorf := func(format string, args ...any) {
		if bad++; bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	defer func() {
		if bad > 10 {
			t.Errorf("%s: %d more problems", region, bad-10)
		}
	}()
	for i, id := range ids {
		if seen[id] {
			errorf("%s: %s stored twice", region, id)
			continue
		}
		seen[id] = true
		from, num, ok := strings.Cut(id, "-")
		k, err := strconv.Atoi(num)
		if !ok || err != nil {
			errorf("%s: unexpected message %q", region, id)
			continue
		}
		if k != last[from]+1 {
			errorf("%s: %s follows %s-%06d (origin order broken)", region, id, from, last[from])
		}
		last[from] = k
		wantOrigin := from
		if from == region {
			wantOrigin = ""
		}
		if origins[i] != wantOrigin {
			errorf("%s: %s has Strata-Origin %q, want %q", region, id, origins[i], wantOrigin)
		}
	}
	for _, r := range regions {
		if last[r] != n {
			errorf("%s: holds %d messages from %s, want %d", region, last[r], r, n)
		}
	}
}

// TestGeoReplicationActiveActive publishes concurrently in three
// regions to the same replicated topic (Nats-Msg-Id, retries). During
// the run one region's brokers are frozen (SIGSTOP) for 10 s and the
// owning broker of the topic in another region is SIGKILLed (and
// restarted later). After quiescence each region holds exactly the
// union, each message once and each origin's in order, and every
// replicator cursor's lag is back to 0.
func TestGeoReplicationActiveActive(t *testing.T) {
	c := startGeoCluster(t, geoMesh, geoRegions)
	n := scale(2000)
	interval := 5 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var mu sync.Mutex
	progress := map[string]*int64{}
	errs := make(chan error, len(geoRegions))
	began := time.Now()
	for _, r := range geoRegions {
		js := geoConnect(t, c.regions[r].urls())
		p := new(int64)
		progress[r] = p
		go func() { errs <- geoPublish(ctx, js, r, n, interval, p, &mu) }()
	}
	minDone := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		m := int64(n)
		for _, p := range progress {
			m = min(m, *p)
		}
		return m
	}
	testutil.Eventually(t, "a fifth of the messages acknowledged in every region", 2*time.Minute, func() bool { return minDone() >= int64(n/5) })
	t.Logf("%d+ acknowledged in every region after %v", n/5, time.Since(began))

	frozen, killedIn := "r3", "r2"
	victim := ""
	testutil.Eventually(t, "the topic's owner in "+killedIn+" known", 30*time.Second, func() bool {
		victim = c.ownerID(killedIn, geoTopic)
		return victim != ""
	})
	c.regions[frozen].signalBrokers(syscall.SIGSTOP)
	t.Logf("froze %s's brokers (SIGSTOP)", frozen)
	time.Sleep(3 * time.Second)
	c.regions[killedIn].brokers[victim].kill()
	t.Logf("SIGKILLed %s.%s, the topic's owner there", killedIn, victim)
	time.Sleep(7 * time.Second)
	c.regions[frozen].signalBrokers(syscall.SIGCONT)
	t.Logf("thawed %s (SIGCONT)", frozen)
	c.regions[killedIn].start(t, c.dir, victim)
	t.Logf("restarted %s.%s", killedIn, victim)

	for range geoRegions {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("all %d×%d messages acknowledged after %v", len(geoRegions), n, time.Since(began))
	want := uint64(n * len(geoRegions))
	quiet := time.Now()
	c.waitConverged(t, geoRegions, geoTopic, want, 3*time.Minute)
	t.Logf("converged %v after the last publish", time.Since(quiet))
	for _, r := range geoRegions {
		ids, origins := geoRead(t, geoConnect(t, c.regions[r].urls()), geoStream, int(want))
		checkUnion(t, r, ids, origins, geoRegions, n)
	}
}
