package e2e

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestGeoReplicationBurst: a replicated topic published in r1 at a low
// rate, then a burst of 100× that rate for 20 s during which the
// topic's owner in r1 is restarted twice (SIGTERM, then SIGKILL); the
// replication backlog drains to 0 by itself and r2 holds every message
// once.
func TestGeoReplicationBurst(t *testing.T) {
	c := startGeoCluster(t, geoPair, []string{"r1", "r2"})
	r1 := c.regions["r1"]
	js := geoConnect(t, r1.urls())
	low := scale(10) // messages per second
	var (
		mu      sync.Mutex
		failed  []string
		sent    int
		answers sync.WaitGroup // one per async publish, done once it is answered or given up
	)
	publish := func(rate int, d time.Duration, prefix string) {
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		end := time.Now().Add(d)
		for i := 1; time.Now().Before(end); i++ {
			<-tick.C
			id := fmt.Sprintf("%s-%06d", prefix, i)
			f, err := js.PublishAsync("demo.geo.burst", []byte(id), jetstream.WithMsgID(id))
			mu.Lock()
			sent++
			mu.Unlock()
			if err != nil {
				mu.Lock()
				failed = append(failed, id)
				mu.Unlock()
				continue
			}
			answers.Add(1)
			go func() {
				defer answers.Done()
				select {
				case <-f.Ok():
				case <-f.Err():
					mu.Lock()
					failed = append(failed, id)
					mu.Unlock()
				case <-time.After(10 * time.Second):
					mu.Lock()
					failed = append(failed, id)
					mu.Unlock()
				}
			}()
		}
	}
	publish(low, 3*time.Second, "low")
	answers.Wait()
	c.waitConverged(t, []string{"r1", "r2"}, "demo/geo/burst", uint64(sent-len(failed)), 60*time.Second)

	burstDone := make(chan struct{})
	go func() {
		defer close(burstDone)
		publish(100*low, 20*time.Second, "burst")
	}()
	for i, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		time.Sleep(6 * time.Second)
		owner := c.ownerID("r1", "demo/geo/burst")
		if owner == "" {
			t.Fatal("no owner of the topic in r1")
		}
		p := r1.brokers[owner]
		p.signal(sig)
		<-p.done
		r1.start(t, c.dir, owner)
		t.Logf("restart %d: %s of the owner r1.%s", i+1, sig, owner)
	}
	<-burstDone
	answers.Wait() // every async publish answered, or given up after 10 s
	ctx := context.Background()
	mu.Lock()
	retry := failed
	mu.Unlock()
	for _, id := range retry { // Nats-Msg-Id makes a retry of a stored one a duplicate
		for attempt := 0; ; attempt++ {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := js.Publish(pctx, "demo.geo.burst", []byte(id), jetstream.WithMsgID(id))
			cancel()
			if err == nil {
				break
			}
			if attempt == 20 {
				t.Fatalf("publish %s: %v", id, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	st, err := c.topicStats("r1", "demo/geo/burst")
	if err != nil {
		t.Fatal(err)
	}
	if st.Messages != uint64(sent) {
		t.Fatalf("r1 holds %d messages, %d were published", st.Messages, sent)
	}
	drain := time.Now()
	lag := st.Replication.Cursors[0].LagMsgs
	c.waitConverged(t, []string{"r1", "r2"}, "demo/geo/burst", uint64(sent), 5*time.Minute)
	t.Logf("%d messages (%d retried); the backlog of %d drained to 0 %v after the burst's last publish was answered",
		sent, len(retry), lag, time.Since(drain))
}
