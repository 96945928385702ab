package jetstream_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/stratamesh/strata/broker/jetstream"
	"github.com/stratamesh/strata/internal/testutil"
)

// geoPair is two one-broker regions, r1 and r2, whose namespace demo/geo
// replicates to both (pols[i] is region i's view of the policies).
type geoPair struct {
	pols    [2]swapPolicies
	regions [2]atomic.Pointer[strataRegion]
}

// newGeoPair starts r1 and r2 with drop as each one's CursorDropConfig.
func newGeoPair(tb testing.TB, drop jetstream.CursorDropConfig) *geoPair {
	p := &geoPair{}
	for i := range p.pols {
		p.pols[i].set(geoPolicies([]string{"r1", "r2"}, nil, nil))
	}
	urls := func(i int) []string {
		r := p.regions[i].Load()
		if r == nil {
			return nil
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		var out []string
		for _, b := range r.brokers {
			if b.srv != nil && !b.stopped {
				out = append(out, b.url())
			}
		}
		return out
	}
	for self := range 2 {
		p.regions[self].Store(newStrataRegion(tb, 1, func(c *jetstream.Config) {
			c.Policies = &p.pols[self]
			c.Region = fmt.Sprintf("r%d", self+1)
			c.RemoteBrokers = func(string) []string { return urls(1 - self) }
			c.Replicator.BackoffInitial, c.Replicator.BackoffMax = 20*time.Millisecond, 200*time.Millisecond
			c.CursorDrop = drop
		}))
	}
	return p
}

// r1 is r1's broker.
func (p *geoPair) r1() *strataBroker { return p.regions[0].Load().brokers[0] }

// publish publishes one message on each topic in r1.
func (p *geoPair) publish(tb testing.TB, topics ...string) {
	nc, err := nats.Connect(p.r1().url())
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	js, _ := natsjs.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, topic := range topics {
		if _, err := js.Publish(ctx, "demo.geo."+topic, []byte("m")); err != nil {
			tb.Fatal(err)
		}
	}
}

// positions is r1's replicator cursor positions towards r2, by topic.
func (p *geoPair) positions() map[string]uint64 {
	out := map[string]uint64{}
	for _, rs := range p.r1().js.Replication() {
		if rs.Remote == "r2" {
			out[rs.Topic] = rs.Position
		}
	}
	return out
}

// storedPositions is the keys of r1's persisted cursor positions
// towards r2.
func (p *geoPair) storedPositions(tb testing.TB) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kvs, err := p.regions[0].Load().store.List(ctx, "repl/")
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, kv := range kvs {
		if strings.HasSuffix(kv.Key, "/r2") {
			out = append(out, kv.Key)
		}
	}
	return out
}

// TestCursorDropAfterStop: r2 leaves the replication list while its
// cursors are moving (messages keep coming), so each stopping sender
// writes its last position on its way out — late, by a test hook. The
// round deleting the positions must come after that write, or the
// position written survives with no round left to delete it: once the
// late writes are done, no position towards r2 is stored.
func TestCursorDropAfterStop(t *testing.T) {
	p := newGeoPair(t, jetstream.CursorDropConfig{Tries: 3, Backoff: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	topics := []string{"t1", "t2", "t3", "t4", "t5"}
	nc, err := nats.Connect(p.r1().url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := natsjs.New(nc)
	stop := make(chan struct{})
	published := make(chan struct{})
	go func() {
		defer close(published)
		for {
			for _, topic := range topics {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := js.PublishAsync("demo.geo."+topic, []byte("m")); err != nil {
					return
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-stop:
				return
			}
		}
	}()
	testutil.Eventually(t, "r2 receives every topic's messages", 10*time.Second, func() bool {
		pos := p.positions()
		for _, topic := range topics {
			if pos["demo/geo/"+topic] < 3 {
				return false
			}
		}
		return true
	})
	// The stopping cursors write their last positions late (as a busy
	// broker might): the deletion round must wait for them.
	var begun, done atomic.Int32
	p.r1().js.SetFinalPersistHook(func(persist func()) {
		begun.Add(1)
		defer done.Add(1)
		time.Sleep(300 * time.Millisecond)
		persist()
	})
	p.pols[0].set(geoPolicies([]string{"r1"}, nil, nil))
	p.r1().js.PoliciesChanged()
	testutil.Eventually(t, "the cursors stopped", 10*time.Second, func() bool { return len(p.positions()) == 0 })
	close(stop)
	<-published
	gone := func() bool {
		drops, _ := p.r1().js.CursorDrops()
		return len(drops) == 0 && len(p.storedPositions(t)) == 0
	}
	testutil.Eventually(t, "the positions are deleted", 10*time.Second, gone)
	testutil.Eventually(t, "the stopped cursors wrote their last positions", 10*time.Second, func() bool {
		return begun.Load() > 0 && done.Load() == begun.Load()
	})
	if left := p.storedPositions(t); len(left) > 0 {
		t.Fatalf("positions written after their deletion round (%d late writes): %v", done.Load(), left)
	}
}
